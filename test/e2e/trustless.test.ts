/**
 * The trustless gateway (D17) end to end, against the compiled binary over an empty data dir and
 * its embedded chain: A uploads a file to ipfs and publishes it as public and free with the SDK;
 * once the server's indexer has the entry, anyone fetches a CAR of it from /ipfs/<cid> with no
 * account and verifies it block by block; STOWAGE_PUBLIC_EGRESS, read by the binary, stops the
 * reads once A's allowance for the day is spent.
 */
import { afterAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { CarReader } from "@ipld/car";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { connectDirectory } from "../../src/sdk/directory.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";

const POLL_MS = 200;
const dataDir = join(tempDir("e2e-trustless"), "data");
let server: RunningBinary | undefined;
afterAll(async () => {
  await server?.stop();
});

async function admin(...args: string[]) {
  const r = await runBinary(["admin", ...args, "--data-dir", dataDir]);
  if (r.code !== 0) throw new Error(`stowage admin ${args.join(" ")} failed: ${r.stderr}`);
}

test("a public file is fetched as a verified CAR with no account, until the owner's allowance is spent", async () => {
  // Room for one CAR of the file (3 MiB and framing), not two.
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], { STOWAGE_INDEXER_POLL: `${POLL_MS}ms`, STOWAGE_PUBLIC_EGRESS: "5MiB", STOWAGE_METRICS_LISTEN: "" });
  const url = server.url;
  const a = privateKeyToAccount(generatePrivateKey());
  await admin("fund", a.address, "1");
  await admin("grant", "--did", `did:ethr:0x3d9:${a.address}`, "--space", "16MiB");
  await admin("grant", "--did", `did:ethr:0x3d9:${a.address}`, "--traffic", "16MiB");

  const content = new Uint8Array(randomBytes(3 * 1024 * 1024 + 17));
  const store = await connectStorage({ baseUrl: url, account: a });
  await store.login();
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
});
