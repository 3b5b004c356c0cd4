/**
 * The trustless gateway (D17) end to end, against the compiled binary over an empty data dir and
 * its embedded chain: A uploads a file to ipfs and publishes it as public and free with the SDK;
 * once the server's indexer has the entry, anyone fetches a CAR of it from /ipfs/<cid> with no
 * account and verifies it block by block; STOWAGE_PUBLIC_EGRESS, read by the binary, stops the
 * reads once A's allowance for the day is spent. And @helia/verified-fetch, with the binary as its
 * only gateway (no libp2p, no delegated routers), fetches B's public file byte for byte, every
 * block checked against its Cid, and is refused B's private one (uploaded, never published).
 */
import { afterAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { withHTTP } from "@helia/http";
import { createVerifiedFetchWithHelia } from "@helia/verified-fetch";
import { CarReader } from "@ipld/car";
import * as dagPb from "@ipld/dag-pb";
import { createHeliaLight } from "helia";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { connectDirectory } from "../../src/sdk/directory.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";

const POLL_MS = 200;
const dataDir = join(tempDir("e2e-trustless"), "data");
let server: Promise<RunningBinary> | undefined;
afterAll(async () => {
  await (await server)?.stop();
});
/** The one binary of this file, started by the first test that needs it (once, even if that test
 * times out). Each owner has room for one CAR of a 3 MiB file a day (3 MiB and framing), not two. */
const started = () =>
  (server ??= startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], { STOWAGE_INDEXER_POLL: `${POLL_MS}ms`, STOWAGE_PUBLIC_EGRESS: "5MiB", STOWAGE_METRICS_LISTEN: "" }));

async function admin(...args: string[]) {
  const r = await runBinary(["admin", ...args, "--data-dir", dataDir]);
  if (r.code !== 0) throw new Error(`stowage admin ${args.join(" ")} failed: ${r.stderr}`);
}

/** A new account, funded for the directory's transaction, with 16 MiB of space and traffic. */
async function owner(url: string) {
  const a = privateKeyToAccount(generatePrivateKey());
  await admin("fund", a.address, "1");
  await admin("grant", "--did", `did:ethr:0x3d9:${a.address}`, "--space", "16MiB");
  await admin("grant", "--did", `did:ethr:0x3d9:${a.address}`, "--traffic", "16MiB");
  const store = await connectStorage({ baseUrl: url, account: a });
  await store.login();
  return { account: a, store };
}

/** The binary's own log lines of the requests it answered on `path`: their statuses. */
const answeredOn = (binary: RunningBinary, path: string) =>
  binary
    .output()
    .split("\n")
    .filter((line) => /^\{.*"msg":"request".*\}$/.test(line)) // whole lines only: the last may be half written
    .map((line) => JSON.parse(line) as { path: string; status: number })
    .filter((r) => r.path === path)
    .map((r) => r.status);

test("a public file is fetched as a verified CAR with no account, until the owner's allowance is spent", async () => {
  const { url } = await started();
  const { account: a, store } = await owner(url);

  const content = new Uint8Array(randomBytes(3 * 1024 * 1024 + 17));
  const file = await store.upload("ipfs", content, { name: "open-data.csv" });
  // Refused until it is published (and the index has it).
  expect((await fetch(`${url}/ipfs/${file.Cid}?format=car`)).status).toBe(403);
  await (await connectDirectory(url, { account: a })).publish({ cid: file.Cid, name: "Open data", size: file.Size, isPublic: true });

  const car = await until("the CAR", () => fetch(`${url}/ipfs/${file.Cid}`, { headers: { accept: "application/vnd.ipld.car" } }), (r) => r.status !== 403, 10 * POLL_MS + 3000, POLL_MS / 4);
  expect(car.status).toBe(200);
  expect(car.headers.get("content-type")).toBe("application/vnd.ipld.car; version=1; order=dfs; dups=n");
  const reader = await CarReader.fromBytes(new Uint8Array(await car.arrayBuffer()));
  expect((await reader.getRoots()).map(String)).toEqual([file.Cid]);
  const leaves: { cid: string; bytes: Uint8Array }[] = [];
  for await (const b of reader.blocks()) {
    expect(new Uint8Array(new Bun.CryptoHasher("sha256").update(b.bytes).digest())).toEqual(b.cid.multihash.digest);
    if (b.cid.code === 0x55) leaves.push({ cid: b.cid.toString(), bytes: b.bytes });
  }
  expect(Buffer.concat(leaves.map((l) => l.bytes))).toEqual(Buffer.from(content));

  // A little over 3 of the 5 MiB are spent: the next CAR is cut at the leaf that no longer fits,
  // and then a raw leaf of 1 MiB is refused until the next UTC day.
  const second = await fetch(`${url}/ipfs/${file.Cid}?format=car`);
  expect(second.status).toBe(200);
  expect(await second.arrayBuffer().then((b) => b.byteLength, () => "cut")).toBe("cut");
  const refused = await fetch(`${url}/ipfs/${leaves[1]?.cid}?format=raw`);
  expect(refused.status).toBe(429);
  expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
}, 60_000);

test("verified-fetch with the binary as its only gateway fetches a public file byte for byte and is refused a private one", async () => {
  const binary = await started();
  const { url } = binary;
  const { account: b, store } = await owner(url);
  // Three leaves under one dag-pb root (D9: 1 MiB chunks); B's allowance is its own, not A's.
  const open = new Uint8Array(randomBytes(2 * 1024 * 1024 + 5));
  const file = await store.upload("ipfs", open, { name: "open.bin" });
  const secret = await store.upload("ipfs", new Uint8Array(randomBytes(2 * 1024 * 1024 + 7)), { name: "secret.bin" });
  await (await connectDirectory(url, { account: b })).publish({ cid: file.Cid, name: "Open", size: file.Size, isPublic: true });
  const root = await until("the public root", () => fetch(`${url}/ipfs/${file.Cid}?format=raw`), (r) => r.status !== 403, 10 * POLL_MS + 3000, POLL_MS / 4);
  expect(root.status).toBe(200);
  const leaves = dagPb.decode(new Uint8Array(await root.arrayBuffer())).Links.map((l) => l.Hash.toString());
  expect(leaves.length).toBe(3);

  // No libp2p and no delegated routers: the binary is the one source of blocks. Helia asks its
  // non-fallback routers first and, with none at all, waits for ever (helia 7.1.15 routing.js):
  // one that knows no provider lets it go on to the gateway.
  const helia = withHTTP(createHeliaLight(), { delegatedRouters: [], recursiveGateways: [url], allowInsecure: true, allowLocal: true });
  helia.addRouter({ name: "no-routing", async *findProviders() {} });
  await helia.start();
  const vf = await createVerifiedFetchWithHelia(helia);
  try {
    const res = await vf(`ipfs://${file.Cid}`, { signal: AbortSignal.timeout(30_000) });
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(Buffer.from(open));
    // Every leaf came from the binary (there is no other source), and verified-fetch checks each
    // block against its Cid before it gives a byte out. The binary's log lines reach this process
    // through a pipe, at its pace: the last may still be on the way.
    await until("the binary's log of each leaf served", () => leaves.map((leaf) => answeredOn(binary, `/ipfs/${leaf}`).includes(200)), (v) => v.every(Boolean), 5000);

    // verified-fetch keeps looking for another provider after a refusal: it gives up at the signal.
    const outcome = await vf(`ipfs://${secret.Cid}`, { signal: AbortSignal.timeout(3_000) }).then(
      async (r) => ({ status: r.status, bytes: (await r.arrayBuffer()).byteLength }),
      (err: Error) => ({ error: err.name }),
    );
    expect("status" in outcome ? outcome.status >= 400 : outcome.error).toBeTruthy();
    // It asked the binary, and the binary refused every time.
    const asked = answeredOn(binary, `/ipfs/${secret.Cid}`);
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.every((status) => status === 403)).toBe(true);
  } finally {
    await vf.stop();
  }
}, 60_000);
