/**
 * The denylist (D25) on every door, on real parts (this pass's database and blob store, Helia, the
 * S3 API on a socket, a second IPFS node in another process): content a compact denylist file
 * names, or the operator blocked (`stowage admin block`'s rows), answers 410 on voucher downloads
 * from both back-ends, S3 GetObject and HeadObject, the trustless and path gateways (its leaves
 * too), and bitswap; its uploads are refused over HTTP and S3, keeping nothing; /metrics counts
 * each refusal by door. Double-hashed rules (modern and legacy), paths below a directory and
 * exceptions match as IPIP-383 says; another gateway of the cluster sees the operator's blocks;
 * a file is read again when it changes; lifting a block serves the same bytes again, since
 * nothing was deleted.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { S3Client } from "bun";
import { rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import * as dagPb from "@ipld/dag-pb";
import { base58btc } from "multiformats/bases/base58";
import { CID } from "multiformats/cid";
import { sha256 } from "multiformats/hashes/sha2";
import { block, createDenylist, unblock, DenylistFileError, type Denylist } from "../../src/denylist/index.ts";
import { findAccessKey } from "../../src/keys/index.ts";
import { silentLogger } from "../../src/log.ts";
import { createMetrics } from "../../src/metrics/index.ts";
import { startS3Api } from "../../src/s3api/index.ts";
import { cidOfStream } from "../../src/sdk/cid.ts";
import { keysClient } from "../../src/sdk/keys.ts";
import { StorageApiError } from "../../src/sdk/storage.ts";
import { createDirectStorage } from "../../src/storage/direct.ts";
import { blockKey } from "../../src/storage/ipfs/blocks.ts";
import { BASE } from "../support/storage.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";
import { randomBytes, trustlessGateway } from "./support.ts";

// Each bitswap fetch starts a Helia node in another process (≈ 1 s on a busy machine).
setDefaultTimeout(60_000);

const MiB = 1024 * 1024;
const PEER = join(import.meta.dir, "..", "support", "ipfs-peer.ts");

const tg = await trustlessGateway();
const { url } = await tg.serve();
const metrics = createMetrics();
const listFile = join(tempDir("denylist"), "list.deny");
await writeFile(listFile, "version: 1\nname: test list\n---\n");
// Checks are read again by `refresh()` in each test: no timer decides when a test sees its change.
const denylist = await createDenylist({ sql: tg.sql, log: silentLogger, files: [listFile], pollMs: 3_600_000, fileCheckMs: 3_600_000, onBlocked: metrics.blocked });
tg.useDenylist(denylist);
afterAll(() => denylist.stop());

const direct = createDirectStorage({ sql: tg.sql, log: silentLogger, maxBody: tg.gw.config.maxBody, backends: tg.gw.backends, meter: tg.gw.quota?.meter, denylist });
const s3 = await startS3Api({
  hostname: "127.0.0.1",
  port: 0,
  maxBody: tg.gw.config.maxBody,
  log: silentLogger,
  sql: tg.sql,
  chainId: tg.gw.config.chainId,
  direct,
  findAccessKey: (id) => findAccessKey({ sql: tg.sql, secretsKey: tg.gw.secrets.secretsKey, resolver: tg.gw.resolver, chainId: tg.gw.config.chainId }, id),
});
afterAll(() => s3.stop());

const owner = await tg.user();
const key = await keysClient({ baseUrl: BASE, store: owner.store, fetch: tg.gw.fetch }).create({ access: "rw", bucket: "*" });
const bucket = (name: string) => new S3Client({ accessKeyId: key.accessKeyId, secretAccessKey: key.secretAccessKey, endpoint: s3.url, bucket: name, region: "us-east-1" });

// A public file of three leaves, stored on ipfs (published) and, the same bytes, on dfs and in S3.
const content = randomBytes(2 * MiB + 99);
const file = await tg.publish(owner, content, { name: "public.bin" });
const cid = file.Cid;
await owner.store.upload("dfs", content, { name: "copy.bin" });
await bucket("ipfs").write("s3-copy.bin", content);
const leaf = dagPb.decode(new Uint8Array(await (await fetch(`${url}/ipfs/${cid}?format=raw`)).arrayBuffer())).Links[0]?.Hash as CID;
// A control: public, never blocked.
const other = await tg.publish(owner, randomBytes(300_000), { name: "other.bin" });

/** The status every read door answers for `cid`'s content (the bitswap fetch only when asked: it takes a second). */
async function doors(c = cid) {
  const status = async (p: Promise<unknown>) =>
    p.then(
      () => 200,
      (err: unknown) => (err instanceof StorageApiError ? err.status : Promise.reject(err)),
    );
  // Presigned, so the status itself is seen (and for GET, that the XML names the code).
  const s3Status = async (b: string, name: string, method: "GET" | "HEAD") => {
    const res = await fetch(bucket(b).file(name).presign({ method, expiresIn: 60 }), { method });
    const body = await res.text();
    if (method === "GET" && res.status === 410) expect(body).toContain("<Code>Blocked</Code>");
    return res.status;
  };
  const at = async (path: string) => {
    const res = await fetch(`${url}${path}`);
    await res.arrayBuffer();
    return res.status;
  };
  return {
    path: await at(`/ipfs/${c}`),
    raw: await at(`/ipfs/${c}?format=raw`),
    car: await at(`/ipfs/${c}?format=car`),
    leaf: await at(`/ipfs/${leaf}?format=raw`),
    ipfs: await status(owner.store.download("ipfs", c, { size: content.byteLength }).then((r) => r.arrayBuffer())),
    dfs: await status(owner.store.download("dfs", c, { size: content.byteLength }).then((r) => r.arrayBuffer())),
    s3Get: await s3Status("ipfs", "s3-copy.bin", "GET"),
    s3Head: await s3Status("ipfs", "s3-copy.bin", "HEAD"),
  };
}
const ALL_OK = { path: 200, raw: 200, car: 200, leaf: 200, ipfs: 200, dfs: 200, s3Get: 200, s3Head: 200 };
const ALL_GONE = { path: 410, raw: 410, car: 410, leaf: 410, ipfs: 410, dfs: 410, s3Get: 410, s3Head: 410 };

async function fetchFromPeer(c: string, timeoutMs: number): Promise<{ sha256?: string; error?: string }> {
  const ipfs = tg.gw.backends.ipfs as unknown as { multiaddrs(): string[] };
  const child = Bun.spawn(["bun", PEER, ipfs.multiaddrs()[0] as string, c, String(timeoutMs)], { stdout: "pipe", stderr: "pipe" });
  const [out] = await Promise.all([new Response(child.stdout).text(), child.exited]);
  return JSON.parse(out.trim().split("\n").at(-1) ?? "{}");
}
const sha256Hex = (b: Uint8Array) => new Bun.CryptoHasher("sha256").update(b).digest("hex");

/** The count /metrics shows for `door`. */
async function blockedCount(door: string): Promise<number> {
  const text = await metrics.registry.metrics();
  return Number(new RegExp(`^stowage_blocked_requests_total\\{door="${door}"\\} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
}

async function writeList(lines: string[]) {
  // As an editor saves: a new file renamed over the old one.
  const tmp = `${listFile}.tmp`;
  await writeFile(tmp, ["version: 1", "name: test list", "---", ...lines, ""].join("\n"));
  await rename(tmp, listFile);
  await denylist.refresh();
}

describe("a CID in a denylist file", () => {
  beforeAll(async () => {
    expect(await doors()).toEqual(ALL_OK);
  });

  test("answers 410 on every read path, and /metrics counts each by door", async () => {
    const before = { path: await blockedCount("path"), trustless: await blockedCount("trustless"), download: await blockedCount("download"), s3: await blockedCount("s3") };
    await writeList([`/ipfs/${cid}`]);
    expect(await doors()).toEqual(ALL_GONE);
    const res = await fetch(`${url}/ipfs/${cid}`);
    expect(res.status).toBe(410);
    expect(await res.json()).toEqual({ Code: "Blocked", Description: expect.stringContaining("blocked on this gateway"), HTTPStatusCode: 410 });
    const head = await fetch(`${url}/ipfs/${cid}`, { method: "HEAD" });
    expect(head.status).toBe(410);
    // The control is served.
    expect((await fetch(`${url}/ipfs/${other.Cid}`)).status).toBe(200);
    expect(await blockedCount("path")).toBe(before.path + 3);
    expect(await blockedCount("trustless")).toBe(before.trustless + 3);
    expect(await blockedCount("download")).toBe(before.download + 2);
    expect(await blockedCount("s3")).toBe(before.s3 + 2);
  });

  test("another IPFS node cannot fetch it over bitswap, while it fetches other content", async () => {
    await writeList([`/ipfs/${cid}`]);
    const blocked = await fetchFromPeer(cid, 3000);
    expect(blocked.sha256).toBeUndefined();
    expect(await blockedCount("bitswap")).toBeGreaterThan(0);
    // Its leaves neither: only blocked content holds them.
    expect((await fetchFromPeer(leaf.toString(), 3000)).sha256).toBeUndefined();
    const fine = await fetchFromPeer(other.Cid, 20_000);
    expect(fine.error).toBeUndefined();
  });

  test("is refused on upload — over HTTP (both back-ends, payload signed as a Cid or as a SHA-256) and S3 — and keeps nothing", async () => {
    await writeList([`/ipfs/${cid}`]);
    const uploader = await tg.user();
    const before = await blockedCount("upload");
    for (const kind of ["ipfs", "dfs"]) {
      // The SDK signs the Cid: refused before the body is read.
      const refused = await uploader.store.upload(kind, content, { name: "again.bin" }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(StorageApiError);
      expect((refused as StorageApiError).status).toBe(410);
      expect((refused as StorageApiError).body.Code).toBe("Blocked");
      // A SHA-256 payload: refused once the bytes are in and the Cid known, before the file row.
      const session = await tg.gw.session(uploader.account);
      const res = await tg.gw.app.handle(await tg.gw.uploadRequest(session, { requestID: 1, bytes: content, kind }));
      expect(res.status).toBe(410);
      expect((await uploader.store.list(kind)).Object).toEqual([]);
    }
    const s3Put = await bucket("dfs")
      .write("blocked.bin", content)
      .then(
        () => 200,
        (err: { code?: string }) => err.code,
      );
    expect(s3Put).toBe("Blocked");
    expect(await bucket("dfs").exists("blocked.bin")).toBe(false);
    expect(await blockedCount("upload")).toBe(before + 5);
  });

  test("new content refused on upload leaves no block behind", async () => {
    const fresh = randomBytes(MiB + 5);
    const freshCid = await cidOfStream(new Blob([fresh]).stream());
    await writeList([`/ipfs/${freshCid}`]);
    const uploader = await tg.user();
    const session = await tg.gw.session(uploader.account);
    const res = await tg.gw.app.handle(await tg.gw.uploadRequest(session, { requestID: 1, bytes: fresh, kind: "ipfs" }));
    expect(res.status).toBe(410);
    expect(await tg.gw.blobs.store.stat(blockKey(CID.parse(freshCid)))).toBeUndefined();
  });

  test("removed from the file, it is served again, byte for byte: nothing was deleted", async () => {
    await writeList([`/ipfs/${cid}`]);
    expect((await owner.store.list("ipfs")).Object.map((f) => f.Cid)).toContain(cid);
    await writeList([]);
    expect(await doors()).toEqual(ALL_OK);
    const back = await owner.store.download("ipfs", cid, { size: content.byteLength });
    expect(sha256Hex(new Uint8Array(await back.arrayBuffer()))).toBe(sha256Hex(content));
    expect((await fetchFromPeer(cid, 20_000)).sha256).toBe(sha256Hex(content));
  });
});

describe("rules as IPIP-383 writes them", () => {
  const mh = () => base58btc.baseEncode(CID.parse(cid).multihash.bytes);
  const doubleOf = async (text: string) => base58btc.baseEncode((await sha256.digest(new TextEncoder().encode(text))).bytes);

  test("a double-hashed CID (base58btc multihash of the CID's multihash), and the legacy hex form", async () => {
    await writeList([`//${await doubleOf(mh())}`]);
    expect(await doors()).toEqual(ALL_GONE);
    const legacy = new Bun.CryptoHasher("sha256").update(`${CID.parse(cid).toV1()}/`).digest("hex");
    await writeList([`# legacy badbits anchor`, `//${legacy}`]);
    expect((await fetch(`${url}/ipfs/${cid}`)).status).toBe(410);
    await writeList([]);
    expect((await fetch(`${url}/ipfs/${cid}`)).status).toBe(200);
  });

  test("a CID in any version or base blocks its multihash; a path rule blocks that path only; ! makes an exception", async () => {
    const v0ish = CID.createV1(0x55, CID.parse(cid).multihash).toString(base58btc.encoder);
    await writeList([`/ipfs/${v0ish}`]);
    expect((await fetch(`${url}/ipfs/${cid}`)).status).toBe(410);
    const tree = await tg.publishTree(owner, [{ path: "docs/a.txt", content: new TextEncoder().encode("a") }, { path: "docs/b.txt", content: new TextEncoder().encode("b") }]);
    await writeList([`/ipfs/${tree}/docs/*`, `!/ipfs/${tree}/docs/b.txt`]);
    expect((await fetch(`${url}/ipfs/${tree}/docs/a.txt`)).status).toBe(410);
    expect((await fetch(`${url}/ipfs/${tree}/docs/b.txt`)).status).toBe(200);
    expect((await fetch(`${url}/ipfs/${tree}/`)).status).toBe(200);
    // A double-hashed path: sha256 of "<b58 multihash>/docs/b.txt".
    await writeList([`//${await doubleOf(`${base58btc.baseEncode(tree.multihash.bytes)}/docs/b.txt`)}`]);
    expect((await fetch(`${url}/ipfs/${tree}/docs/b.txt`)).status).toBe(410);
    expect((await fetch(`${url}/ipfs/${tree}/docs/a.txt`)).status).toBe(200);
    // Blocking a directory's CID blocks what is below it.
    await writeList([`/ipfs/${tree}`]);
    expect((await fetch(`${url}/ipfs/${tree}/docs/a.txt`)).status).toBe(410);
    await writeList([]);
  });

  test("a line that is no rule is skipped, the rest holds; a header that is not YAML refuses the file at start and keeps the last rules later", async () => {
    await writeList(["not a rule", `/ipfs/${cid}`]);
    expect((await fetch(`${url}/ipfs/${cid}`)).status).toBe(410);
    const bad = join(tempDir("denylist-bad"), "bad.deny");
    await writeFile(bad, "version: [1\n---\n/ipfs/x\n");
    expect(createDenylist({ sql: tg.sql, log: silentLogger, files: [bad] })).rejects.toBeInstanceOf(DenylistFileError);
    expect(createDenylist({ sql: tg.sql, log: silentLogger, files: [join(tempDir("denylist-none"), "missing.deny")] })).rejects.toBeInstanceOf(DenylistFileError);
    await writeFile(listFile, "version: 2\n---\n");
    await denylist.refresh();
    // The previous rules stay in force.
    expect((await fetch(`${url}/ipfs/${cid}`)).status).toBe(410);
    await writeList([]);
    expect((await fetch(`${url}/ipfs/${cid}`)).status).toBe(200);
  });

  test("a file changed on disk is read again by its timer", async () => {
    const watching = await createDenylist({ sql: tg.sql, log: silentLogger, files: [listFile], fileCheckMs: 50 });
    try {
      expect(watching.blocking(cid)).toBeUndefined();
      await writeFile(listFile, `/ipfs/${cid}\n`);
      await until("the file's rule", () => watching.blocking(cid) !== undefined, Boolean, 10_000);
    } finally {
      watching.stop();
      await writeList([]);
    }
  });
});

describe("the operator's own blocks (stowage admin block)", () => {
  test("block, 410 everywhere, unblock, served again; a block is kept as a record with its reason", async () => {
    const { row, created } = await block(tg.sql, cid, "court order 17");
    expect(created).toBe(true);
    expect(row.rule).toBe(`/ipfs/${cid}`);
    await denylist.refresh();
    expect(await doors()).toEqual(ALL_GONE);
    // Blocking again only changes the reason; an unblock by another spelling of the CID lifts it.
    expect((await block(tg.sql, cid, "court order 18")).created).toBe(false);
    const lifted = await unblock(tg.sql, CID.parse(cid).toString(base58btc.encoder));
    expect(lifted.map((r) => r.reason)).toEqual(["court order 18"]);
    await denylist.refresh();
    expect(await doors()).toEqual(ALL_OK);
  });

  test("a path below a directory; a double hash", async () => {
    const tree = await tg.publishTree(owner, [{ path: "x/leak.pdf", content: randomBytes(1000) }, { path: "x/fine.pdf", content: randomBytes(1000) }]);
    await block(tg.sql, `${tree}/x/leak.pdf`, "DMCA 4411");
    const digest = base58btc.baseEncode((await sha256.digest(new TextEncoder().encode(base58btc.baseEncode(CID.parse(other.Cid).multihash.bytes)))).bytes);
    await block(tg.sql, `//${digest}`, "hash list");
    await denylist.refresh();
    expect((await fetch(`${url}/ipfs/${tree}/x/leak.pdf`)).status).toBe(410);
    expect((await fetch(`${url}/ipfs/${tree}/x/fine.pdf`)).status).toBe(200);
    expect((await fetch(`${url}/ipfs/${other.Cid}`)).status).toBe(410);
    await unblock(tg.sql, `${tree}/x/leak.pdf`);
    await unblock(tg.sql, `//${digest}`);
    await denylist.refresh();
    expect((await fetch(`${url}/ipfs/${tree}/x/leak.pdf`)).status).toBe(200);
    expect((await fetch(`${url}/ipfs/${other.Cid}`)).status).toBe(200);
  });

  test("every gateway of the cluster sees a block within its poll, and its lifting", async () => {
    const another: Denylist = await createDenylist({ sql: tg.sql, log: silentLogger, pollMs: 50 });
    try {
      expect(another.blocking(cid)).toBeUndefined();
      await block(tg.sql, cid, "seen elsewhere");
      await until("the other gateway's block", () => another.blocking(cid) !== undefined, Boolean, 10_000);
      await unblock(tg.sql, cid);
      await until("the other gateway's unblock", () => another.blocking(cid) === undefined, Boolean, 10_000);
    } finally {
      another.stop();
    }
  });
});
