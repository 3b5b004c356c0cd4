/**
 * dfs `compose` (an S3 multipart completion, D18): objects whose every part but the last is a whole
 * number of 1 MiB chunks become one object without a byte read back from the blob store, under
 * the Cid reading the bytes gives (D9, the importer's layout over the known leaves, two levels of
 * tree included); parts that do not line up, or a part gone meanwhile, are refused (undefined) and
 * change nothing.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import type { BlobStore } from "../../../src/blob/index.ts";
import { CHUNK_SIZE, cidOf } from "../../../src/storage/dfs/index.ts";
import { cidOfLeaves } from "../../../src/storage/dfs/compose.ts";
import { BLOB_KINDS, MiB, blobStoreFor, bytesOf, chunkKeys, openStore, readAll, rowCounts, sha256, streamOf } from "./support.ts";
import { tempDir } from "../../support/tmp.ts";

setDefaultTimeout(120_000);

/** The blob store with a count of the calls that read, open or look at an object (a Proxy: `instanceof` still holds). */
function counted(store: BlobStore) {
  const reads = { n: 0 };
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      if (prop === "get" || prop === "bytes" || prop === "stat" || prop === "openFile") {
        return (...args: unknown[]) => {
          reads.n++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
  return { store: proxy, reads };
}

describe.each(BLOB_KINDS)("dfs compose (%s blob store)", (kind) => {
  test("parts of whole chunks become the file the bytes give: same Cid, byte-exact, no blob read; the parts can go", async () => {
    const root = tempDir("dfs-compose");
    const { store: blobs, reads } = counted(await blobStoreFor(kind, root));
    const made = await openStore(kind, { root, blobs });
    const parts = [bytesOf(2 * MiB, 11), bytesOf(3 * MiB, 12), bytesOf(MiB + 7, 13)];
    const cids: string[] = [];
    for (const p of parts) {
      const up = await made.dfs.put(streamOf(p));
      await up.commit();
      cids.push(up.cid);
    }
    const whole = Buffer.concat(parts);
    reads.n = 0;
    const composed = await made.dfs.compose!(cids);
    expect(composed).toBeDefined();
    await composed!.commit();
    expect(reads.n).toBe(0);
    expect(composed!.cid).toBe(await cidOf([whole]));
    expect(composed!.size).toBe(whole.byteLength);
    for (const cid of cids) await made.dfs.release(cid);
    expect(Buffer.compare(await readAll(made.dfs.read(composed!.cid)), whole)).toBe(0);
    expect(reads.n).toBeGreaterThan(0); // the count does see reads
    expect((await rowCounts(made)).chunks).toBe(7);
    await made.dfs.release(composed!.cid);
    expect(await rowCounts(made)).toEqual({ objects: 0, chunks: 0, manifest: 0 });
    expect(await chunkKeys(made)).toEqual([]);
    await made.close();
  });

  test("a part that ends inside a chunk, or one gone meanwhile: undefined, and nothing changes", async () => {
    const made = await openStore(kind);
    const ups = [];
    for (const [size, seed] of [[MiB + 1, 21], [2 * MiB, 22], [MiB, 23]] as const) {
      const up = await made.dfs.put(streamOf(bytesOf(size, seed)));
      await up.commit();
      ups.push(up);
    }
    const before = await rowCounts(made);
    expect(await made.dfs.compose!([ups[0]!.cid, ups[1]!.cid])).toBeUndefined(); // the first ends 1 byte into a chunk
    await made.dfs.release(ups[2]!.cid);
    expect(await made.dfs.compose!([ups[1]!.cid, ups[2]!.cid])).toBeUndefined(); // the second is gone
    const fine = await made.dfs.compose!([ups[1]!.cid, ups[0]!.cid]); // the last part may end anywhere
    expect(fine?.size).toBe(3 * MiB + 1);
    await fine!.abort();
    // Only the released part's rows went; no pin is left behind by the refusals or the abort.
    expect(await rowCounts(made)).toEqual({ objects: before.objects - 1, chunks: before.chunks - 1, manifest: before.manifest - 1 });
    expect((await made.database.sql.get<{ n: number }>("SELECT COUNT(*) AS n FROM blob_pins"))?.n).toBe(0);
    await made.close();
  });
});

test("the Cid of known leaves is the importer's over the bytes: one leaf, a short one, and past 1024 leaves (two levels)", async () => {
  for (const bytes of [new Uint8Array([7]), bytesOf(CHUNK_SIZE, 31), bytesOf(3 * CHUNK_SIZE + 5, 32)]) {
    const leaves = [];
    for (let i = 0; i < bytes.byteLength; i += CHUNK_SIZE) {
      const c = bytes.subarray(i, i + CHUNK_SIZE);
      leaves.push({ hash: sha256(c), size: c.byteLength });
    }
    expect(cidOfLeaves(leaves)).toBe(await cidOf([bytes]));
  }
  // 1025 chunks and a 9-byte tail, all zeros: one 1 MiB buffer handed over again and again.
  const zeros = new Uint8Array(CHUNK_SIZE);
  const tail = new Uint8Array(9);
  const leaves = [...Array.from({ length: 1025 }, () => ({ hash: sha256(zeros), size: CHUNK_SIZE })), { hash: sha256(tail), size: 9 }];
  const content = (function* () {
    for (let i = 0; i < 1025; i++) yield zeros;
    yield tail;
  })();
  expect(cidOfLeaves(leaves)).toBe(await cidOf(content));
});
