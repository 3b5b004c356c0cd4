/**
 * Two gateways over one database and one blob store (D16), as a cluster runs them: commits and
 * releases of the same Cid in parallel on both keep every reference count exact, and a release
 * racing an upload of the same content (with sweeps on both) never takes a chunk the upload
 * relies on. On the STOWAGE_TEST_DB=postgres pass each gateway has its own connection pool, so
 * the transactions really overlap; SQLite is one gateway's database (D16), so there the two
 * share its connection.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { TEST_DB } from "../../support/db.ts";
import { BLOB_KINDS, MiB, bytesOf, chunkKeys, chunkRefs, keysOf, openStore, readAll, rowCounts, scalar, sha256, streamOf, type Store } from "./support.ts";

setDefaultTimeout(120_000);

const chunksOf = (bytes: Uint8Array) => Array.from({ length: Math.ceil(bytes.length / MiB) }, (_, i) => bytes.subarray(i * MiB, (i + 1) * MiB));

/** A second gateway beside `a`: its own pool on PostgreSQL, `a`'s connection on SQLite. */
const second = (a: Store) => openStore(a.kind, { root: a.root, blobs: a.blobs, database: TEST_DB === "sqlite" ? a.database : undefined });

/** A put of `bytes` on `gw`, not yet committed. */
const pending = (gw: Store, bytes: Uint8Array) => gw.dfs.put(streamOf(bytes, 256 * 1024));

describe.each(BLOB_KINDS)("two gateways on one database (%s blob store)", (kind) => {
  test("parallel commits and releases of one Cid on both gateways keep the counts exact", async () => {
    const a = await openStore(kind);
    const b = await second(a);
    // Two files sharing their first chunk, so chunk counts are shared between two objects too.
    const shared = bytesOf(MiB, 70);
    const x = Buffer.concat([shared, bytesOf(MiB + 5, 71)]);
    const y = Buffer.concat([shared, bytesOf(7, 72)]);
    const px = await pending(a, x);
    await px.commit();
    const cidX = px.cid;
    let refsX = 1;
    let cidY = "";
    for (let round = 0; round < 4; round++) {
      // Uploads of x and y on both gateways, then their commits and releases of x all at once.
      const ups = await Promise.all([pending(a, x), pending(b, x), pending(a, y), pending(b, y), pending(b, x)]);
      const releases = Array.from({ length: refsX }, (_, i) => (i % 2 ? a : b).dfs.release(cidX));
      await Promise.all([...ups.map((u) => u.commit()), ...releases]);
      refsX = 3;
      cidY = ups[2]!.cid;
      expect(await scalar(a, `SELECT refs FROM dfs_objects WHERE cid = '${cidX}'`)).toBe(3);
      expect(await scalar(a, `SELECT refs FROM dfs_objects WHERE cid = '${ups[2]!.cid}'`)).toBe(2 * (round + 1));
      expect(await chunkRefs(a, sha256(shared))).toBe(2);
      expect(await rowCounts(a)).toEqual({ objects: 2, chunks: 4, manifest: 5 });
      expect(await chunkKeys(a)).toEqual(keysOf(...chunksOf(x), ...chunksOf(y).slice(1)));
      expect(Buffer.compare(await readAll(b.dfs.read(cidX)), x)).toBe(0);
    }
    // Every reference of y released at once, from both gateways: x keeps the shared chunk.
    await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).dfs.release(cidY)));
    expect(await a.dfs.stat(cidY)).toBeUndefined();
    expect(await chunkRefs(a, sha256(shared))).toBe(1);
    expect(await chunkKeys(a)).toEqual(keysOf(...chunksOf(x)));
    await Promise.all([0, 1, 2].map((i) => (i % 2 ? a : b).dfs.release(cidX)));
    expect(await rowCounts(a)).toEqual({ objects: 0, chunks: 0, manifest: 0 });
    await Promise.all([a.dfs.sweep(), b.dfs.sweep()]);
    expect(await chunkKeys(a)).toEqual([]);
    expect(await scalar(a, "SELECT COUNT(*) AS n FROM blob_pins")).toBe(0);
    expect(await scalar(a, "SELECT COUNT(*) AS n FROM blob_tombstones")).toBe(0);
    await b.close();
    await a.close();
  });

  test("a release on one gateway racing an upload of the same content on the other, sweeps on both: the upload's data stays", async () => {
    const a = await openStore(kind);
    const b = await second(a);
    const bytes = bytesOf(3 * MiB + 1, 80);
    for (let round = 0; round < 12; round++) {
      const [from, to] = round % 2 ? [a, b] : [b, a];
      const held = await pending(from, bytes);
      await held.commit();
      const [racing] = await Promise.all([pending(to, bytes), from.dfs.release(held.cid), from.dfs.sweep(), to.dfs.sweep()]);
      await racing.commit();
      expect(Buffer.compare(await readAll(from.dfs.read(racing.cid)), bytes)).toBe(0);
      expect(await rowCounts(a)).toEqual({ objects: 1, chunks: 4, manifest: 4 });
      await to.dfs.release(racing.cid);
      expect(await chunkKeys(a)).toEqual([]);
    }
    await b.close();
    await a.close();
  });
});
