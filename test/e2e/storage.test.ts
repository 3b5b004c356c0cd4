/**
 * The storage middleware end to end, against the compiled binary over an empty data dir: SDK
 * login with a fresh key, one 20 MiB file uploaded to `dfs` and `ipfs` (same Cid), listed, read
 * back byte-exact in ranges and whole, a `dfs` delete and the `ipfs` delete's 518; a second IPFS
 * node in another process fetches the upload over TCP; a kill -9 in the middle of two uploads
 * leaves no partial file, no orphan chunk and an unchanged traffic counter; a SIGTERM lets a
 * download in flight finish and exits 0.
 *
 * The tests share one data dir, one account and its upload of the 20 MiB file to both back-ends,
 * all made in beforeAll; a test that needs a server starts one when a test before stopped it, and
 * each leaves the stored files as it found them, so any one of them passes alone (`bun test -t`).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes, createHash } from "node:crypto";
import { closeSync, openSync, readdirSync, readFileSync, truncateSync, writeSync } from "node:fs";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { Database } from "bun:sqlite";
import { isAlive } from "../../src/datadir/lock.ts";
import { connectStorage, StorageApiError, type FileEntry, type StorageClient } from "../../src/sdk/storage.ts";
import { CHUNK_PREFIX, CHUNK_SIZE, hashOfKey } from "../../src/storage/dfs/cid.ts";
import { anvilsOf, runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { blobStoreOf } from "../support/blobs.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";

const MiB = 1024 * 1024;
const ROOT = join(import.meta.dir, "..", "..");

const work = tempDir("e2e-storage");
const dataDir = join(work, "data");
const args = ["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir];
const account = privateKeyToAccount(generatePrivateKey());

/** The 20 MiB file every test reads back, and its 1 MiB chunks' SHA-256 (the dfs chunk names). */
const content = randomBytes(20 * MiB);
const contentPath = join(work, "random-20MiB.bin");
await Bun.write(contentPath, content);
const contentSha = sha256(content);
const contentChunks = new Set(Array.from({ length: content.length / CHUNK_SIZE }, (_, i) => sha256(content.subarray(i * CHUNK_SIZE, (i + 1) * CHUNK_SIZE))));

let server: RunningBinary | undefined;
let store: StorageClient;
/** The answer of the login that opened `store`'s session. */
let login: { did: string };
/** When set, upload bodies sent through the client stop after this many bytes and never end. */
let gate: { after: number; sent: number[] } | undefined;
/** The 20 MiB file as uploaded to each back-end in beforeAll. */
let uploaded: { dfs: FileEntry; ipfs: FileEntry };

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** fetch, except that while `gate` is set an upload's body stalls after `gate.after` bytes. */
const gatedFetch = ((input: string | URL | Request, init?: RequestInit) => {
  const body = init?.body;
  if (!gate || init?.method !== "POST" || !(body instanceof ReadableStream)) return fetch(input, init);
  const { after, sent } = gate;
  const slot = sent.push(0) - 1;
  const reader = (body as ReadableStream<Uint8Array>).getReader();
  const stalled = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if ((sent[slot] as number) >= after) return new Promise<void>(() => {}); // held open until the server dies
      const next = await reader.read();
      if (next.done) return controller.close();
      sent[slot] = (sent[slot] as number) + next.value.byteLength;
      controller.enqueue(next.value);
    },
  });
  return fetch(input, { ...init, body: stalled });
}) as typeof fetch;

/** Chunks (by SHA-256) in the server's blob store, and keys under `dfs/` that name no chunk. */
async function dfsFiles(): Promise<{ chunks: string[]; temps: number }> {
  const chunks: string[] = [];
  let temps = 0;
  for await (const key of blobStoreOf(dataDir).list(CHUNK_PREFIX)) {
    const hash = hashOfKey(key);
    if (hash === undefined) temps++;
    else chunks.push(hash);
  }
  return { chunks: chunks.sort(), temps };
}

/** Blocks of the embedded IPFS node: objects under `ipfs/` in the server's blob store. */
async function ipfsBlocks(): Promise<number> {
  let n = 0;
  for await (const _ of blobStoreOf(dataDir).list("ipfs/")) n++;
  return n;
}

/** The JSON log lines of a server with this `msg`. */
function logLines(binary: RunningBinary, msg: string): Record<string, unknown>[] {
  return binary
    .output()
    .split("\n")
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as Record<string, unknown>];
      } catch {
        return []; // not a log line
      }
    })
    .filter((l) => l.msg === msg);
}



/** Remaining space and traffic (spec 2.6 `SizeByte`) of the test account. */
async function quotaLeft(url: string): Promise<{ space: number; traffic: number }> {
  const left = async (kind: string) => {
    const res = await fetch(`${url}/dfs/${kind}`, { headers: { authorization: `Bearer ${store.accessToken}` } });
    if (!res.ok) throw new Error(`GET /dfs/${kind}: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { SizeByte: number }).SizeByte;
  };
  return { space: await left("space"), traffic: await left("traffic") };
}

async function bytesOf(res: Response): Promise<Uint8Array> {
  return new Uint8Array(await res.arrayBuffer());
}

/** The server over the test's data dir, with `store` logged in to it: the one running, or a new
 * one when a test before stopped or killed it. */
async function running(): Promise<RunningBinary> {
  if (server && server.proc.exitCode === null && server.proc.signalCode === null) return server;
  server = await startBinary(args);
  store = await connectStorage({ baseUrl: server.url, account, fetch: gatedFetch });
  login = await store.login();
  return server;
}

beforeAll(async () => {
  await running();
  // Free space and traffic from the administrator (D7, D13): uploads and downloads need quota.
  for (const quota of [["--space", "1GiB"], ["--traffic", "10GiB"]]) {
    const grant = await runBinary(["admin", "grant", "--did", store.did, ...quota, "--data-dir", dataDir]);
    if (grant.code !== 0) throw new Error(`admin grant ${quota.join(" ")} failed: ${grant.stderr}`);
  }
  uploaded = { dfs: await store.upload("dfs", contentPath), ipfs: await store.upload("ipfs", contentPath) };
}, 60_000);

afterAll(async () => {
  if (server && server.proc.exitCode === null && server.proc.signalCode === null) await server.stop("SIGTERM");
  // A test that failed between its kill -9 and the restart leaves the killed server's anvil.
  for (const pid of anvilsOf(dataDir)) if (isAlive(pid)) process.kill(pid, "SIGTERM");
});

test("SDK against the binary: login, one Cid on dfs and ipfs, list, ranged and full downloads, delete, 518 on ipfs delete", async () => {
  await running();
  expect(login.did).toBe(`did:ethr:0x3d9:${account.address}`);

  const { dfs, ipfs } = uploaded;
  expect(dfs.Cid).toMatch(/^bafy/); // a dag-pb root over 20 raw leaves
  expect(ipfs.Cid).toBe(dfs.Cid);
  for (const entry of [dfs, ipfs]) {
    expect(entry).toMatchObject({ Name: "random-20MiB.bin", Size: content.length, Public: false, UserDefined: { etag: dfs.Cid } });
  }

  for (const kind of ["dfs", "ipfs"] as const) {
    const list = await store.list(kind);
    expect(list.Address).toBe(account.address);
    expect(list.Storage).toBe(kind);
    expect(list.Object).toEqual([uploaded[kind]]);
  }

  const size = content.length;
  const ranges: [number, number][] = [
    [0, 0],
    [MiB - 5, MiB + 4], // across the first chunk boundary
    [3 * MiB - 1, 6 * MiB], // four chunks, sliced at both ends
    [7 * MiB + 12_345, 7 * MiB + 12_345 + 65_535],
    [size - 1, size - 1], // the last byte
  ];
  for (const kind of ["dfs", "ipfs"] as const) {
    for (const [start, end] of ranges) {
      const res = await store.download(kind, dfs.Cid, { range: [start, end] });
      expect(res.status).toBe(206);
      expect(res.headers.get("content-range")).toBe(`bytes ${start}-${end}/${size}`);
      const got = await bytesOf(res);
      expect(Buffer.compare(got, content.subarray(start, end + 1))).toBe(0);
    }
    // HEAD tells the length (the SDK sizes its voucher for a whole download by it), charging nothing.
    expect(await store.sizeOf(kind, dfs.Cid)).toBe(size);
    const head = await store.download(kind, dfs.Cid, { method: "HEAD", range: [MiB - 5, MiB + 4] });
    expect(head.status).toBe(206);
    expect(head.headers.get("content-length")).toBe("10");
    expect(head.headers.get("content-range")).toBe(`bytes ${MiB - 5}-${MiB + 4}/${size}`);
    const whole = await store.download(kind, dfs.Cid);
    expect(whole.status).toBe(200);
    expect(whole.headers.get("etag")).toBe(`"${dfs.Cid}"`);
    expect(sha256(await bytesOf(whole))).toBe(contentSha);
  }

  // A second dfs file, deleted: Success, gone from the list, its chunks gone from the disk.
  const other = await store.upload("dfs", randomBytes(3 * MiB + 7), { name: "other.bin" });
  expect((await dfsFiles()).chunks).toHaveLength(contentChunks.size + 4);
  expect(await store.delete(other.ID)).toEqual({ Status: "Success" });
  expect((await store.list("dfs")).Object).toEqual([dfs]);
  expect(await dfsFiles()).toEqual({ chunks: [...contentChunks].sort(), temps: 0 });

  // Delete is dfs-only (spec 4.1 rule 4): ipfs answers 518 with Status Failure, and keeps the file.
  const refused = await store.delete(ipfs.ID, "ipfs").then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(refused).toBeInstanceOf(StorageApiError);
  expect((refused as StorageApiError).status).toBe(518);
  expect((refused as StorageApiError).body).toMatchObject({ Status: "Failure", HTTPStatusCode: 518 });
  expect((await store.list("ipfs")).Object).toEqual([ipfs]);
}, 60_000);

test("a second IPFS node in another process dials the server's node over TCP and fetches the file by Cid", async () => {
  const health = (await (await fetch(`${(await running()).url}/healthz`)).json()) as { components: { ipfs: { multiaddrs: string[]; pinned: number } } };
  const [addr] = health.components.ipfs.multiaddrs.filter((a) => a.startsWith("/ip4/127.0.0.1/tcp/"));
  expect(addr).toMatch(/\/p2p\/12D3KooW\w+$/);
  expect(health.components.ipfs.pinned).toBe(1);
  const peer = Bun.spawn([process.execPath, join(ROOT, "test", "support", "ipfs-peer.ts"), addr as string, uploaded.ipfs.Cid, "30000"], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(peer.stdout).text(), new Response(peer.stderr).text(), peer.exited]);
  const result = JSON.parse(out.trim().split("\n").pop() ?? "{}") as { sha256?: string; bytes?: number; error?: string };
  if (code !== 0) throw new Error(`ipfs peer failed (exit ${code}): ${out}\n${err}`);
  expect(result).toMatchObject({ sha256: contentSha, bytes: content.length });
}, 60_000);

test("kill -9 during a dfs and an ipfs upload: restart lists no partial file, leaves no orphan chunk, keeps the traffic counter and the earlier files", async () => {
  const first = await running();
  const usedBefore = (await store.trafficHash(0)).used;
  const quotaBefore = await quotaLeft(first.url);
  const blocksBefore = await ipfsBlocks();

  // 300 MiB files whose first 64 MiB are random (distinct chunks); the bodies stall after 48 MiB.
  const big = join(work, "big-300MiB.bin");
  const fd = openSync(big, "w");
  for (let i = 0; i < 64; i++) writeSync(fd, randomBytes(MiB));
  closeSync(fd);
  truncateSync(big, 300 * MiB);
  gate = { after: 48 * MiB, sent: [] };
  // What the two bodies really sent: the gate stops after the piece that crosses 48 MiB.
  const sent = gate.sent;
  try {
    const outcomes = (["dfs", "ipfs"] as const).map((kind) =>
      store.upload(kind, big).then(
        (entry) => ({ entry }),
        (error: unknown) => ({ error }),
      ),
    );
    // In flight on both back-ends: new chunk files and new blocks appear under DATA_DIR.
    await until("chunks and blocks of the uploads on disk", async () => (await dfsFiles()).chunks.length >= contentChunks.size + 24 && (await ipfsBlocks()) >= blocksBefore + 24, Boolean, 60_000);
    expect(await first.stop("SIGKILL")).not.toBe(0);
    for (const outcome of await Promise.all(outcomes)) expect(outcome).toHaveProperty("error");
  } finally {
    gate = undefined; // later uploads go through whole, whatever happened here
  }
  const left = await dfsFiles();
  expect(left.chunks.length).toBeGreaterThanOrEqual(contentChunks.size + 24); // what the sweep has to remove

  // The killed server's blob pins lapse LEASE_MS (60 s) after their last renewal (D15: a dead
  // gateway's claims expire; age alone never frees a blob). Instead of waiting a minute, the test
  // ages them (and any tombstone) while no server runs: the clock, not the protocol.
  const db = new Database(join(dataDir, "stowage.db"));
  try {
    db.run("UPDATE blob_pins SET expires_at = ?", [Date.now() - 1]);
    db.run("UPDATE blob_tombstones SET expires_at = ?", [Date.now() - 1]);
  } finally {
    db.close();
  }

  const second = await startBinary(args);
  server = second;
  // The sweeps run beside the started server, on the gateway holding their lease (this one, at
  // once: the lease is its own from before the kill). The dfs sweep removes every chunk no
  // committed file names; the ipfs sweep every block no pinned root contains.
  await until("the dfs sweep", async () => logLines(second, "dfs: sweep").length > 0, Boolean, 30_000);
  expect(await dfsFiles()).toEqual({ chunks: [...contentChunks].sort(), temps: 0 });
  const [sweep] = logLines(second, "dfs: sweep");
  expect(sweep).toMatchObject({ deadObjects: 0, keptChunks: contentChunks.size });
  expect(sweep?.orphanChunks as number).toBe(left.chunks.length - contentChunks.size);
  // The ipfs orphan sweep runs beside the started server.
  await until("the ipfs orphan sweep", () => logLines(second, "ipfs orphan sweep done").length > 0, Boolean, 30_000);
  const [ipfsSweep] = logLines(second, "ipfs orphan sweep done");
  expect(ipfsSweep).toMatchObject({ held: 0 });
  expect(ipfsSweep?.removed as number).toBeGreaterThanOrEqual(24);
  expect(await ipfsBlocks()).toBe(contentChunks.size + 1);

  // Same account and access token against the restarted server (new port): no partial file
  // listed, no traffic charged for the killed uploads, the earlier files intact.
  store = await connectStorage({ baseUrl: second.url, account, accessToken: store.accessToken, fetch: gatedFetch });
  expect((await store.list("dfs")).Object).toEqual([uploaded.dfs]);
  expect((await store.list("ipfs")).Object).toEqual([uploaded.ipfs]);
  expect((await store.trafficHash(0)).used).toBe(usedBefore);
  // The killed uploads' holds outlive them only until they expire (D14: a restart clears no live
  // hold, it cannot tell a dead gateway's from another's), and hold no more than the bytes sent.
  const quotaAfter = await quotaLeft(second.url);
  const sentBytes = sent.reduce((a, b) => a + b, 0);
  for (const pool of ["space", "traffic"] as const) {
    expect(quotaAfter[pool]).toBeLessThanOrEqual(quotaBefore[pool]);
    expect(quotaBefore[pool] - quotaAfter[pool]).toBeLessThanOrEqual(sentBytes);
  }
  for (const kind of ["dfs", "ipfs"] as const) {
    expect(sha256(await bytesOf(await store.download(kind, uploaded.dfs.Cid)))).toBe(contentSha);
    const tail = await store.download(kind, uploaded.dfs.Cid, { range: [content.length - MiB - 1, content.length - 1] });
    expect(Buffer.compare(await bytesOf(tail), content.subarray(content.length - MiB - 1))).toBe(0);
  }
  const health = (await (await fetch(`${second.url}/healthz`)).json()) as { components: { dfs: { objects: number; chunks: number; pinnedChunks: number } } };
  expect(health.components.dfs).toMatchObject({ objects: 1, chunks: contentChunks.size, pinnedChunks: 0 });
  expect(anvilsOf(dataDir)).toHaveLength(1); // the killed server's anvil was stopped by the restart
}, 90_000);

test("SIGTERM while a download is in flight: the download completes, the exit code is 0", async () => {
  const serving = await running();
  const res = await store.download("dfs", uploaded.dfs.Cid);
  expect(res.status).toBe(200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const hash = createHash("sha256");
  let received = 0;
  const first = await reader.read();
  expect(first.done).toBe(false);
  hash.update(first.value as Uint8Array);
  received += (first.value as Uint8Array).byteLength;

  // Nothing more is read until the server has taken the signal: the body is still in flight.
  serving.proc.kill("SIGTERM");
  await until("the server to log its stop", () => logLines(serving, "stopping").length > 0, Boolean, 10_000);
  expect(received).toBeLessThan(content.length);
  for (let next = await reader.read(); !next.done; next = await reader.read()) {
    hash.update(next.value);
    received += next.value.byteLength;
  }
  expect(received).toBe(content.length);
  expect(hash.digest("hex")).toBe(contentSha);
  expect(await serving.proc.exited).toBe(0);
  expect(logLines(serving, "shutdown: cutting connections still open")).toEqual([]);
  expect(anvilsOf(dataDir)).toHaveLength(0);
}, 60_000);
