/**
 * Reference counts of roots and blocks, abort, the orphan sweep, restarts and a kill -9
 * mid-upload, each on its own data dir (and blob prefix) with the back-end reopened as a server
 * restart would.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { exporter } from "ipfs-unixfs-exporter";
import { CID } from "multiformats/cid";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LEASE_MS } from "../../../src/blob/guard.ts";
import { blockKey, readBlock } from "../../../src/storage/ipfs/blocks.ts";
import { sweepOrphans } from "../../../src/storage/ipfs/sweep.ts";
import { silentLogger } from "../../../src/log.ts";
import { blobStoreOf, prefixOf, testRgw } from "../../support/blobs.ts";
import { TEST_DB, testDatabaseUrlOf } from "../../support/db.ts";
import { tempDir } from "../../support/tmp.ts";
import { MiB, blockKeys, blockRows, collect, openBackend, randomBytes, sha256, streamOf, within, type Opened } from "./helpers.ts";

setDefaultTimeout(60_000);

const refs = async (o: Opened, cid: string) => (await o.database.sql.get<{ refs: number }>("select refs from ipfs_pins where cid = $1", [cid]))?.refs;

/** Every block key of a pinned root's DAG, read from the store. */
async function dagKeys(o: Opened, root: string): Promise<string[]> {
  // The blob store only, each block checked against its Cid.
  const store = {
    async *get(cid: CID) {
      yield await readBlock(o.store, cid);
    },
  };
  const keys = new Set<string>();
  const stack = [CID.parse(root)];
  while (stack.length > 0) {
    const cid = stack.pop()!;
    keys.add(blockKey(cid));
    if (cid.code === 0x55) continue;
    const entry = await exporter(cid, store, { offline: true });
    if (entry.type !== "file") throw new Error("not a file");
    for (const link of entry.node.Links) stack.push(link.Hash);
  }
  return [...keys].sort();
}

async function putCommitted(o: Opened, bytes: Uint8Array): Promise<string> {
  const p = await o.ipfs.put(streamOf(bytes));
  await p.commit();
  return p.cid;
}

describe("references", () => {
  test("two commits of the same bytes: one release keeps it, the second deletes its blocks", async () => {
    const bytes = randomBytes(2 * MiB + 1);
    const o = await openBackend();
    const first = await o.ipfs.put(streamOf(bytes));
    await first.commit();
    const second = await o.ipfs.put(streamOf(bytes));
    expect(second.cid).toBe(first.cid);
    await second.commit();
    expect(await refs(o, first.cid)).toBe(2);
    const keys = await blockKeys(o.store);
    expect(keys).toHaveLength(4); // root + 3 leaves, stored once
    expect(keys).toEqual(await dagKeys(o, first.cid));
    expect([...(await blockRows(o))].sort()).toEqual(keys.map((k) => [k, 1]));

    await o.ipfs.release(first.cid);
    expect(await refs(o, first.cid)).toBe(1);
    expect(await o.ipfs.stat(first.cid)).toEqual({ size: bytes.byteLength });
    expect(sha256(await collect(o.ipfs.read(first.cid)))).toBe(sha256(bytes));
    expect(await blockKeys(o.store)).toEqual(keys);

    await o.ipfs.release(first.cid);
    expect(await refs(o, first.cid)).toBeUndefined();
    expect(await o.ipfs.stat(first.cid)).toBeUndefined();
    expect((await o.ipfs.health()).pinned).toBe(0);
    expect(await blockKeys(o.store)).toEqual([]);
    expect((await blockRows(o)).size).toBe(0);
    expect(await o.database.sql.get("select count(*) as n from ipfs_object_blocks")).toEqual({ n: 0 });
    await o.ipfs.release(first.cid); // one too many: harmless
    await o.close();
  });

  test("abort pins nothing and deletes the blocks it wrote, but not blocks pinned content holds", async () => {
    const o = await openBackend();
    const kept = randomBytes(MiB);
    const keptCid = await putCommitted(o, kept);
    const before = await blockKeys(o.store);
    // Shares its first leaf with `kept`.
    const aborted = await o.ipfs.put(streamOf(new Uint8Array([...kept, ...randomBytes(MiB + 7)])));
    expect((await blockKeys(o.store)).length).toBe(before.length + 3);
    await aborted.abort();
    expect(await o.ipfs.stat(aborted.cid)).toBeUndefined();
    expect((await o.ipfs.health()).pinned).toBe(1);
    expect(await blockKeys(o.store)).toEqual(before);
    expect(sha256(await collect(o.ipfs.read(keptCid)))).toBe(sha256(kept));
    await o.close();
  });

  test("release of one of two files sharing blocks keeps the shared blocks and deletes the rest", async () => {
    const shared = randomBytes(2 * MiB);
    const a = new Uint8Array([...shared, ...randomBytes(1000)]);
    const b = new Uint8Array([...shared, ...randomBytes(1000)]);
    const o = await openBackend();
    const cidA = await putCommitted(o, a);
    const cidB = await putCommitted(o, b);
    const keysA = await dagKeys(o, cidA);
    const keysB = await dagKeys(o, cidB);
    const common = keysA.filter((k) => keysB.includes(k));
    expect(common).toHaveLength(2); // the two shared leaves
    expect(await blockKeys(o.store)).toHaveLength(keysA.length + keysB.length - 2);
    for (const k of common) expect((await blockRows(o)).get(k)).toBe(2);

    await o.ipfs.release(cidB);
    expect(await blockKeys(o.store)).toEqual(keysA); // B's root and tail went, the shared leaves stay
    expect(sha256(await collect(o.ipfs.read(cidA)))).toBe(sha256(a));
    for (const k of common) expect((await blockRows(o)).get(k)).toBe(1);

    // Helia 7.1.15's own pin counts lost a shared block in this order: pin A again, release it.
    const again = await o.ipfs.put(streamOf(b));
    await again.commit();
    await o.ipfs.release(cidA);
    expect(await blockKeys(o.store)).toEqual(keysB);
    expect(sha256(await collect(o.ipfs.read(cidB)))).toBe(sha256(b));
    await o.close();
  });

  test("a file repeating one chunk, released, does not take the chunk from another file", async () => {
    const zeros = new Uint8Array(2 * MiB + 1); // links the all-zero chunk twice
    const other = new Uint8Array(MiB + 5); // its first leaf is the same all-zero chunk
    const o = await openBackend();
    const p1 = await putCommitted(o, other);
    const p2 = await putCommitted(o, zeros);
    await o.ipfs.release(p2);
    expect(sha256(await collect(o.ipfs.read(p1)))).toBe(sha256(other));
    expect(await blockKeys(o.store)).toEqual(await dagKeys(o, p1));
    expect(await o.ipfs.stat(p2)).toBeUndefined();
    await o.close();
  });

  test("a block being uploaded is not deleted by a release that frees it", async () => {
    const bytes = randomBytes(MiB);
    const o = await openBackend();
    const cid = await putCommitted(o, bytes);
    // An upload of the same bytes, not yet committed, when the only reference goes.
    const pending = await o.ipfs.put(streamOf(bytes));
    await o.ipfs.release(cid);
    expect(await blockKeys(o.store)).toEqual([blockKey(CID.parse(cid))]); // its pin kept it
    await pending.commit();
    expect(sha256(await collect(o.ipfs.read(cid)))).toBe(sha256(bytes));
    await o.close();
  });
});

describe("races (D15)", () => {
  test("content released while the same bytes are uploaded again and a sweep runs, 40 times over: the new upload always reads back byte-exact", async () => {
    const o = await openBackend();
    const bytes = randomBytes(3 * MiB + 1);
    const cid = await putCommitted(o, bytes);
    const sweep = () => sweepOrphans({ sql: o.database.sql, guard: o.guard, log: silentLogger });
    for (let round = 0; round < 40; round++) {
      const again = (async () => {
        const p = await o.ipfs.put(streamOf(bytes, 256 * 1024));
        await p.commit();
        return p.cid;
      })();
      const [, , got] = await Promise.all([o.ipfs.release(cid), sweep(), again]);
      expect(got).toBe(cid);
      expect(sha256(await collect(o.ipfs.read(cid)))).toBe(sha256(bytes));
    }
    expect(await blockKeys(o.store)).toEqual(await dagKeys(o, cid));
    await o.ipfs.release(cid);
    expect(await blockKeys(o.store)).toEqual([]);
    await o.close();
  });
});

describe("parallel commits and releases (D16)", () => {
  test("commits and releases of one Cid at once keep the root's and the blocks' counts exact", async () => {
    const o = await openBackend();
    const shared = randomBytes(MiB);
    const x = Buffer.concat([shared, randomBytes(MiB + 3)]);
    const cid = await putCommitted(o, x);
    const keys = await dagKeys(o, cid);
    let held = 1;
    for (let round = 0; round < 4; round++) {
      const ups = await Promise.all(Array.from({ length: 4 }, () => o.ipfs.put(streamOf(x, 256 * 1024))));
      // This round's commits beside releases of every reference the last round left.
      await Promise.all([...ups.map((u) => u.commit()), ...Array.from({ length: held }, () => o.ipfs.release(cid))]);
      held = 4;
      expect(await refs(o, cid)).toBe(4);
      expect([...(await blockRows(o))].sort()).toEqual(keys.map((k) => [k, 1]));
      expect(await blockKeys(o.store)).toEqual(keys);
      expect(sha256(await collect(o.ipfs.read(cid)))).toBe(sha256(x));
    }
    await Promise.all(Array.from({ length: held }, () => o.ipfs.release(cid)));
    expect(await refs(o, cid)).toBeUndefined();
    expect((await blockRows(o)).size).toBe(0);
    expect(await blockKeys(o.store)).toEqual([]);
    await o.close();
  });
});

describe("orphan sweep at start", () => {
  test("a deletion whose deleter died is finished by the sweep (the guard's housekeeping), not kept as held", async () => {
    const o = await openBackend();
    await o.ipfs.swept;
    const stray = blockKey(CID.parse("bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"));
    await o.store.put(stray, new TextEncoder().encode("a block its deleter meant to delete"));
    await o.database.sql.run("INSERT INTO blob_tombstones (key, holder, expires_at) VALUES ($1, 'dead-deleter', $2)", [stray, Date.now() - 1]);
    expect(await sweepOrphans({ sql: o.database.sql, guard: o.guard, log: silentLogger })).toEqual({ seen: 0, removed: 0, held: 0 });
    expect(await o.store.stat(stray)).toBeUndefined();
    expect(await o.database.sql.all("SELECT key FROM blob_tombstones")).toEqual([]);
    await o.close();
  });

  test("blocks without a row are deleted; referenced ones and other prefixes stay", async () => {
    let o = await openBackend();
    const bytes = randomBytes(MiB + 10);
    const cid = await putCommitted(o, bytes);
    const kept = await blockKeys(o.store);
    // What a crash between writes and commit leaves: blocks without rows, their pins lapsed.
    const stray = blockKey(CID.parse("bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"));
    await o.store.put(stray, new TextEncoder().encode("not even its hash"));
    await o.store.put("dfs/not-mine", new Uint8Array([1]));
    await o.close();

    o = await openBackend(o.dataDir);
    expect(await o.ipfs.swept).toEqual({ seen: kept.length + 1, removed: 1, held: 0 });
    expect(await blockKeys(o.store)).toEqual(kept);
    expect(await o.store.stat("dfs/not-mine")).toBe(1);
    expect(sha256(await collect(o.ipfs.read(cid)))).toBe(sha256(bytes));
    await o.store.delete("dfs/not-mine");
    await o.close();
  });
});

describe("restarts", () => {
  test("the peer id, the key file's mode and the blocks survive a restart", async () => {
    const bytes = randomBytes(MiB + 100);
    let o = await openBackend();
    const peerId = o.ipfs.peerId;
    expect(peerId).toMatch(/^12D3KooW/); // Ed25519
    const cid = await putCommitted(o, bytes);
    await o.close();

    o = await openBackend(o.dataDir);
    expect(o.ipfs.peerId).toBe(peerId);
    expect(o.ipfs.multiaddrs().every((a) => a.endsWith(`/p2p/${peerId}`))).toBe(true);
    expect(statSync(join(o.dataDir, "ipfs", "peer.key")).mode & 0o777).toBe(0o600);
    expect(statSync(join(o.dataDir, "ipfs")).mode & 0o777).toBe(0o700);
    expect(await o.ipfs.swept).toEqual({ seen: 3, removed: 0, held: 0 });
    expect(sha256(await collect(o.ipfs.read(cid)))).toBe(sha256(bytes));
    const health = await o.ipfs.health();
    expect(health).toMatchObject({ kind: "ipfs", status: "started", peerId, pinned: 1, connections: 0, store: o.store.kind });
    await o.close();
    expect(await o.ipfs.put(streamOf(bytes)).then(() => undefined, (e: unknown) => e)).toMatchObject({ code: "IPFS_STOPPED" });
  });

  test("a damaged peer key stops the start instead of changing the peer id", async () => {
    const o = await openBackend();
    await o.close();
    writeFileSync(join(o.dataDir, "ipfs", "peer.key"), "garbage");
    const err = await openBackend(o.dataDir).then(() => undefined, (e: unknown) => e);
    expect(err).toMatchObject({ code: "IPFS_BAD_PEER_KEY" });
  });

  test("kill -9 mid-upload: once its pins lapse, the sweep removes the partial upload's blocks and keeps committed content", async () => {
    const dataDir = tempDir("ipfs");
    const prefix = prefixOf(dataDir);
    const s3 = testRgw && prefix !== undefined ? [JSON.stringify({ endpoint: testRgw.endpoint, bucket: testRgw.bucket, region: testRgw.region, prefix, accessKeyId: testRgw.accessKeyId, secretAccessKey: testRgw.secretAccessKey })] : [];
    const databaseUrl = TEST_DB === "postgres" ? await testDatabaseUrlOf(dataDir) : "";
    const child = Bun.spawn(["bun", join(import.meta.dir, "fixtures", "upload-forever.ts"), dataDir, s3[0] ?? "", databaseUrl], {
      stdout: "pipe",
      stderr: "inherit",
      // The child is given its store; it must not start a Ceph of its own.
      env: { ...process.env, STOWAGE_TEST_BLOBS: "local" },
    });
    const lines = readLines(child.stdout);
    const committed = (await within(15_000, lines.next())).value?.replace("committed ", "");
    expect((await within(5_000, lines.next())).value).toBe("uploading");
    const probe = blobStoreOf(dataDir);
    // Wait (bounded) until the upload has written some leaves, then kill the server hard.
    await within(15_000, untilAsync(async () => (await blockKeys(probe)).length >= 4));
    child.kill(9);
    await child.exited;

    // Restarted before the dead upload's pins lapse: they still hold its blocks.
    let o = await openBackend(dataDir);
    const early = await o.ipfs.swept;
    expect(early?.removed).toBe(0);
    expect(early?.held).toBeGreaterThanOrEqual(3);
    await o.close();
    // Restarted after they lapsed (the guard's clock ahead by a lease).
    o = await openBackend(dataDir, { now: () => Date.now() + LEASE_MS + 1 });
    expect((await o.ipfs.swept)?.removed).toBeGreaterThanOrEqual(3);
    expect(await blockKeys(o.store)).toHaveLength(1); // the committed file's single block
    expect((await o.ipfs.health()).pinned).toBe(1);
    expect(new TextDecoder().decode(await collect(o.ipfs.read(committed!)))).toBe("kept across the crash\n");
    await o.close();
    expect(readFileSync(join(dataDir, "ipfs", "peer.key")).byteLength).toBeGreaterThan(0);
  });
});

async function* readLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const chunk of stream) {
    buffered += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      yield buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
    }
  }
}

/** Polls `check` until it holds (callers bound the wait with `within`). */
async function untilAsync(check: () => Promise<boolean>): Promise<void> {
  while (!(await check())) await Bun.sleep(20);
}
