/**
 * The compiled binary with its content on S3 (DESIGN.md D15), against the test suite's Ceph RGW:
 * - no chunk or block is written under the data dir: no file there holds any piece of the
 *   uploaded bytes, and every piece is an object under the server's prefix;
 * - a restart with the local block and chunk folders removed still serves every file byte-exact,
 *   and a second IPFS node in another process still fetches one over bitswap;
 * - kill -9 during concurrent uploads on both back-ends: after the restart nothing partial is
 *   listed, every acknowledged file reads back byte-exact, and once the start-up sweep has run no
 *   object under the prefix is one that no listed file needs.
 * What a file needs is computed here from its bytes with the D9 importer (the same Cids as the
 * server), not read from the server's tables: the test holds the server to the content alone.
 *
 * These tests configure S3 themselves, so they live outside the folders that the S3 pass of
 * `npm test` (STOWAGE_TEST_BLOBS=s3) runs again: they run once, in the first pass.
 */
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { importFile } from "ipfs-unixfs-importer";
import { base32 } from "multiformats/bases/base32";
import { CID } from "multiformats/cid";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { isAlive } from "../../src/datadir/lock.ts";
import { CHUNK_SIZE, d9ImporterOptions } from "../../src/storage/cid-options.ts";
import { connectStorage, type FileEntry, type StorageClient } from "../../src/sdk/storage.ts";
import { anvilsOf, runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { cephRgw, stowageS3Env, type Rgw } from "../support/ceph.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";

const MiB = 1024 * 1024;
const ROOT = join(import.meta.dir, "..", "..");
const RAW = 0x55;
type Kind = "dfs" | "ipfs";

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const hex = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("hex");

/** One server's world: a data dir, its own prefix in the shared bucket, the settings naming both. */
async function s3World(name: string) {
  const rgw = await cephRgw();
  const dataDir = join(tempDir(name), "data");
  const prefix = rgw.prefix();
  const env = stowageS3Env(rgw, prefix);
  const args = ["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir];
  afterAll(() => {
    // A test that failed between its kill -9 and the restart leaves the killed server's anvil.
    for (const pid of anvilsOf(dataDir)) if (isAlive(pid)) process.kill(pid, "SIGTERM");
  });
  return { rgw, dataDir, prefix, env, start: () => startBinary(args, env), admin: (...a: string[]) => runBinary(["admin", ...a, "--data-dir", dataDir], env) };
}

/** A logged-in SDK client for a new account with space and traffic granted by the administrator. */
async function newUser(world: Awaited<ReturnType<typeof s3World>>, url: string, fetchFn: typeof fetch = fetch) {
  const account = privateKeyToAccount(generatePrivateKey());
  const store = await connectStorage({ baseUrl: url, account, fetch: fetchFn });
  await store.login();
  for (const pool of [["--space", "2GiB"], ["--traffic", "10GiB"]]) {
    const grant = await world.admin("grant", "--did", store.did, ...pool);
    if (grant.code !== 0) throw new Error(`admin grant ${pool.join(" ")}: ${grant.stderr}`);
  }
  return { account, store };
}

/** Every key under `prefix`, listed with the S3 client itself (not the server's store code). */
async function objectsUnder(rgw: Rgw, prefix: string): Promise<string[]> {
  const client = rgw.client();
  const keys: string[] = [];
  let continuationToken: string | undefined;
  do {
    const page = await client.list({ prefix, maxKeys: 1000, continuationToken });
    for (const o of page.contents ?? []) keys.push(o.key.slice(prefix.length));
    continuationToken = page.isTruncated ? page.nextContinuationToken : undefined;
  } while (continuationToken);
  return keys.sort();
}

/**
 * The SHA-256 digest an object key names (D15: `dfs/<raw-leaf Cid>`, `ipfs/<block multihash in
 * base32, no multibase prefix>`), or undefined for keys that are not content (the deployment marker).
 */
function digestOfKey(key: string): { kind: Kind; digest: string } | undefined {
  const m = /^(dfs|ipfs)\/([a-z0-9]+)$/.exec(key);
  if (!m) {
    if (key.startsWith("dfs/") || key.startsWith("ipfs/")) throw new Error(`object key ${key} names no block`);
    return undefined;
  }
  const kind = m[1] as Kind;
  const multihash = kind === "dfs" ? CID.parse(m[2] as string).multihash.bytes : base32.baseDecode(m[2] as string);
  if (multihash.length !== 34 || multihash[0] !== 0x12 || multihash[1] !== 0x20) throw new Error(`object key ${key} names no SHA-256 block`);
  return { kind, digest: hex(multihash.subarray(2)) };
}

/** The blocks of `bytes` as the server imports them (D9): every block's digest, and the leaves'. */
async function blocksOf(bytes: Uint8Array): Promise<{ cid: string; all: Set<string>; leaves: Set<string> }> {
  const all = new Set<string>();
  const leaves = new Set<string>();
  const sink = {
    put: async (cid: CID) => {
      all.add(hex(cid.multihash.digest));
      if (cid.code === RAW) leaves.add(hex(cid.multihash.digest));
      return cid;
    },
  };
  const entry = await importFile({ content: [bytes] }, sink, d9ImporterOptions());
  return { cid: entry.cid.toString(), all, leaves };
}

/** Content objects under the prefix, by back-end. */
async function contentObjects(rgw: Rgw, prefix: string): Promise<Record<Kind, Set<string>>> {
  const out: Record<Kind, Set<string>> = { dfs: new Set(), ipfs: new Set() };
  for (const key of await objectsUnder(rgw, prefix)) {
    const d = digestOfKey(key);
    if (d) out[d.kind].add(d.digest);
  }
  return out;
}

/** Every regular file under `dir` (what a data dir holds: database, chain state, keys, …). */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...filesUnder(p));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

/** Files under `dir` holding any of `needles` (64 random bytes from each chunk of each upload). */
function filesHolding(dir: string, needles: Uint8Array[]): string[] {
  return filesUnder(dir).filter((p) => {
    const body = readFileSync(p);
    return needles.some((n) => body.indexOf(n) >= 0);
  });
}

/** 64 bytes from each chunk (a short last chunk: the file's last 64 bytes), random so they match nothing else. */
const needlesOf = (bytes: Uint8Array) =>
  Array.from({ length: Math.ceil(bytes.length / CHUNK_SIZE) }, (_, i) => {
    const start = Math.max(0, Math.min(i * CHUNK_SIZE, bytes.length - 64));
    return bytes.subarray(start, start + 64);
  });

async function download(store: StorageClient, kind: Kind, cid: string, range?: [number, number]): Promise<Uint8Array> {
  return new Uint8Array(await (await store.download(kind, cid, range ? { range } : {})).arrayBuffer());
}

/** The server's bitswap address on loopback, from /healthz. */
async function ipfsAddress(url: string): Promise<string> {
  const health = (await (await fetch(`${url}/healthz`)).json()) as { components: { ipfs: { multiaddrs: string[] } } };
  const [addr] = health.components.ipfs.multiaddrs.filter((a) => a.startsWith("/ip4/127.0.0.1/tcp/"));
  if (!addr) throw new Error(`no loopback multiaddr in /healthz: ${JSON.stringify(health.components.ipfs)}`);
  return addr;
}

/** A second IPFS node in its own process fetches `cid` over bitswap from `addr`. */
async function peerFetch(addr: string, cid: string): Promise<{ sha256?: string; bytes?: number; error?: string }> {
  const peer = Bun.spawn([process.execPath, join(ROOT, "test", "support", "ipfs-peer.ts"), addr, cid, "30000"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(peer.stdout).text(), new Response(peer.stderr).text(), peer.exited]);
  if (code !== 0) throw new Error(`ipfs peer failed (exit ${code}): ${out}\n${err}`);
  return JSON.parse(out.trim().split("\n").pop() ?? "{}");
}


describe("content on S3 (Ceph RGW)", () => {
  test("no chunk or block under the data dir; a restart without the local block and chunk folders serves every file byte-exact, and another IPFS node fetches over bitswap", async () => {
    const world = await s3World("e2e-s3-local");
    let server: RunningBinary = await world.start();
    try {
      const { store, account } = await newUser(world, server.url);
      // Three files: a multi-chunk one on both back-ends (one Cid), one on dfs alone, a small one on ipfs alone.
      const a = new Uint8Array(randomBytes(5 * MiB + 123));
      const files: { kind: Kind; name: string; bytes: Uint8Array }[] = [
        { kind: "dfs", name: "a.bin", bytes: a },
        { kind: "ipfs", name: "a.bin", bytes: a },
        { kind: "dfs", name: "c.bin", bytes: new Uint8Array(randomBytes(3 * MiB)) },
        { kind: "ipfs", name: "b.bin", bytes: new Uint8Array(randomBytes(1000)) }, // one raw leaf
      ];
      const stored: { kind: Kind; bytes: Uint8Array; entry: FileEntry; blocks: Awaited<ReturnType<typeof blocksOf>> }[] = [];
      for (const f of files) {
        const entry = await store.upload(f.kind, f.bytes, { name: f.name });
        const blocks = await blocksOf(f.bytes);
        expect(entry.Cid).toBe(blocks.cid); // the D9 Cid, as on local files
        stored.push({ kind: f.kind, bytes: f.bytes, entry, blocks });
      }

      // Every chunk and block is an object under the prefix ...
      const objects = await contentObjects(world.rgw, world.prefix);
      for (const s of stored) {
        const needed = s.kind === "dfs" ? s.blocks.leaves : s.blocks.all;
        for (const d of needed) expect(objects[s.kind].has(d)).toBe(true);
      }
      // ... and no file under the data dir holds any piece of the content.
      const needles = stored.flatMap((s) => needlesOf(s.bytes));
      expect(filesHolding(world.dataDir, needles)).toEqual([]);

      // Stopped, the local folders of chunks and blocks removed (whatever this version has), restarted.
      expect(await server.stop("SIGTERM")).toBe(0);
      for (const dir of ["blobs", "dfs", join("ipfs", "blocks")]) rmSync(join(world.dataDir, dir), { recursive: true, force: true });
      server = await world.start();
      const again = await connectStorage({ baseUrl: server.url, account, accessToken: store.accessToken });
      for (const s of stored) {
        expect(sha256(await download(again, s.kind, s.entry.Cid))).toBe(sha256(s.bytes));
        const [from, to] = [Math.max(0, s.bytes.length - CHUNK_SIZE - 7), s.bytes.length - 1]; // across the last chunk boundary
        expect(Buffer.compare(await download(again, s.kind, s.entry.Cid, [from, to]), s.bytes.subarray(from))).toBe(0);
      }
      const addr = await ipfsAddress(server.url);
      for (const s of stored.filter((x) => x.kind === "ipfs")) {
        expect(await peerFetch(addr, s.entry.Cid)).toMatchObject({ sha256: sha256(s.bytes), bytes: s.bytes.length });
      }
      // Still nothing under the data dir after serving it all.
      expect(filesHolding(world.dataDir, needles)).toEqual([]);
    } finally {
      if (server.proc.exitCode === null && server.proc.signalCode === null) await server.stop("SIGTERM");
    }
  }, 120_000);

  test("kill -9 during concurrent uploads: nothing partial listed, acknowledged files intact, no unreferenced object after the start-up sweep", async () => {
    const world = await s3World("e2e-s3-kill");
    // Bodies of the big uploads stall after `after` bytes and stay open until the server dies,
    // so they are surely half-stored when it does.
    const gate = { after: 24 * MiB, stalled: 0 };
    const gated = ((input: string | URL | Request, init?: RequestInit) => {
      const body = init?.body;
      const big = init?.method === "POST" && body instanceof ReadableStream && Number(new Headers(init.headers).get("content-length")) > 32 * MiB;
      if (!big) return fetch(input, init);
      const reader = (body as ReadableStream<Uint8Array>).getReader();
      let sent = 0;
      const stalled = new ReadableStream<Uint8Array>({
        async pull(controller) {
          if (sent >= gate.after) {
            gate.stalled++;
            return new Promise<void>(() => {}); // held open until the server dies
          }
          const next = await reader.read();
          if (next.done) return controller.close();
          sent += next.value.byteLength;
          controller.enqueue(next.value);
        },
      });
      return fetch(input, { ...init, body: stalled });
    }) as typeof fetch;

    const first = await world.start();
    let server: RunningBinary = first;
    try {
      const { store, account } = await newUser(world, first.url, gated);
      // Acknowledged before the storm: a multi-chunk file on each back-end.
      const sent = new Map<string, Uint8Array>();
      const put = (kind: Kind, name: string, bytes: Uint8Array) => {
        sent.set(`${kind}:${name}`, bytes);
        return store.upload(kind, bytes, { name }).then(
          (entry) => ({ kind, name, entry }),
          (error: unknown) => ({ kind, name, error }),
        );
      };
      const early = await Promise.all([put("dfs", "early-dfs.bin", new Uint8Array(randomBytes(3 * MiB + 5))), put("ipfs", "early-ipfs.bin", new Uint8Array(randomBytes(2 * MiB + 9)))]);
      for (const e of early) expect(e).toHaveProperty("entry");

      // The storm: small files that finish, and two big ones per back-end that stall half-way.
      const small = (["dfs", "ipfs"] as const).flatMap((kind) => [0, 1, 2].map((i) => put(kind, `small-${kind}-${i}.bin`, new Uint8Array(randomBytes(i === 0 ? 777 : (i + 1) * MiB + i))))); // 777 B: one raw leaf
      const big = (["dfs", "ipfs"] as const).flatMap((kind) => [0, 1].map((i) => put(kind, `big-${kind}-${i}.bin`, new Uint8Array(randomBytes(40 * MiB))))); // distinct chunks
      const acknowledged = await Promise.all(small);
      // What the finished files need, so the wait below counts only the big uploads' objects.
      const finished: Record<Kind, Set<string>> = { dfs: new Set(), ipfs: new Set() };
      for (const o of [...early, ...acknowledged] as { kind: Kind; name: string }[]) {
        for (const d of (await blocksOf(sent.get(`${o.kind}:${o.name}`) as Uint8Array)).all) finished[o.kind].add(d);
      }
      const unfinished = (now: Record<Kind, Set<string>>, kind: Kind) => [...now[kind]].filter((d) => !finished[kind].has(d)).length;
      // Half of each big upload is on the store: objects no committed row names yet.
      await until(
        "the big uploads' chunks and blocks on the store",
        async () => {
          const now = await contentObjects(world.rgw, world.prefix);
          return gate.stalled >= 4 && unfinished(now, "dfs") >= 24 && unfinished(now, "ipfs") >= 24;
        },
        Boolean,
        90_000,
        50,
      );
      expect(await first.stop("SIGKILL")).not.toBe(0);
      for (const outcome of await Promise.all(big)) expect(outcome).toHaveProperty("error");
      for (const outcome of acknowledged) expect(outcome).toHaveProperty("entry");
      const leftBehind = await contentObjects(world.rgw, world.prefix);

      // The killed server's pins lapse LEASE_MS (60 s) after their last renewal (D15: a dead
      // gateway's claims expire; age alone never frees a blob). Instead of waiting a minute, the
      // test ages them (and any tombstone) while no server runs: the clock, not the protocol.
      const db = new Database(join(world.dataDir, "stowage.db"));
      try {
        const lapsed = Date.now() - 1;
        db.run("UPDATE blob_pins SET expires_at = ?", [lapsed]);
        db.run("UPDATE blob_tombstones SET expires_at = ?", [lapsed]);
      } finally {
        db.close();
      }

      server = await world.start();
      const again = await connectStorage({ baseUrl: server.url, account, accessToken: store.accessToken });
      const ack = [...early, ...acknowledged].map((o) => o as { kind: Kind; name: string; entry: FileEntry });
      const need: Record<Kind, Set<string>> = { dfs: new Set(), ipfs: new Set() };
      const leavesNeeded: Record<Kind, Set<string>> = { dfs: new Set(), ipfs: new Set() };
      for (const kind of ["dfs", "ipfs"] as const) {
        const listed = (await again.list(kind)).Object;
        // Exactly the acknowledged files: nothing partial, none lost.
        expect(listed.map((e) => e.Name).sort()).toEqual(ack.filter((a) => a.kind === kind).map((a) => a.name).sort());
        for (const entry of listed) {
          const bytes = sent.get(`${kind}:${entry.Name}`) as Uint8Array;
          expect(entry.Size).toBe(bytes.length);
          expect(sha256(await download(again, kind, entry.Cid))).toBe(sha256(bytes));
          const blocks = await blocksOf(bytes);
          expect(entry.Cid).toBe(blocks.cid);
          for (const d of blocks.all) need[kind].add(d);
          for (const d of blocks.leaves) leavesNeeded[kind].add(d);
        }
      }
      // The sweep had something to remove ...
      const strays = (kind: Kind, objects: Record<Kind, Set<string>>) => [...objects[kind]].filter((d) => !need[kind].has(d));
      expect(strays("dfs", leftBehind).length).toBeGreaterThanOrEqual(24);
      expect(strays("ipfs", leftBehind).length).toBeGreaterThanOrEqual(24);
      // ... and once it has run, every object under the prefix is one a listed file needs.
      let after = await contentObjects(world.rgw, world.prefix);
      await until(
        "the start-up sweep to leave only referenced objects",
        async () => {
          after = await contentObjects(world.rgw, world.prefix);
          return strays("dfs", after).length === 0 && strays("ipfs", after).length === 0;
        },
        Boolean,
        30_000,
        50,
      ).catch(() => {}); // the expectations below say what is left
      expect({ dfs: strays("dfs", after), ipfs: strays("ipfs", after) }).toEqual({ dfs: [], ipfs: [] });
      for (const kind of ["dfs", "ipfs"] as const) for (const d of leavesNeeded[kind]) expect(after[kind].has(d)).toBe(true);
      for (const d of need.ipfs) expect(after.ipfs.has(d)).toBe(true);
      // Nothing under the data dir holds the content either, the killed uploads' included.
      expect(filesHolding(world.dataDir, [...sent.values()].flatMap(needlesOf))).toEqual([]);
    } finally {
      if (server.proc.exitCode === null && server.proc.signalCode === null) await server.stop("SIGTERM");
    }
  }, 240_000);
});
