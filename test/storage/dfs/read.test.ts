/** Round trips and ranges: what goes in comes out, whole or in inclusive byte ranges. */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { InvalidRangeError, NotFoundError, cidOf } from "../../../src/storage/dfs/index.ts";
import { BLOB_KINDS, MiB, bytesOf, chunkKeys, keyOf, keysOf, openStore, readAll, streamOf, type Store } from "./support.ts";

setDefaultTimeout(60_000);

describe.each(BLOB_KINDS)("dfs reads (%s blob store)", (kind) => {
  let store: Store;
  beforeAll(async () => {
    store = await openStore(kind);
  }, 60_000); // the database may start here (PostgreSQL pass)
  afterAll(() => store.close());

  async function putCommitted(bytes: Uint8Array, piece?: number): Promise<string> {
    const up = await store.dfs.put(streamOf(bytes, piece));
    await up.commit();
    return up.cid;
  }

  describe("dfs round trip", () => {
    test.each([
      ["empty", 0],
      ["1 byte", 1],
      ["1 MiB", MiB],
      ["1 MiB + 1", MiB + 1],
      ["~5 MiB random", 5 * MiB + 12_345],
    ])("%s comes back byte for byte", async (_name, size) => {
      const bytes = bytesOf(size, 100 + size);
      const cid = await putCommitted(bytes);
      expect(await store.dfs.stat(cid)).toEqual({ size });
      expect(Buffer.compare(await readAll(store.dfs.read(cid)), bytes)).toBe(0);
    });

    test("pieces bigger than a chunk, or odd-sized, are cut the same", async () => {
      const bytes = bytesOf(3 * MiB + 5, 9);
      const a = await store.dfs.put(streamOf(bytes, 3 * MiB));
      const b = await store.dfs.put(streamOf(bytes, 777));
      expect(a.cid).toBe(b.cid);
      await a.commit();
      expect(Buffer.compare(await readAll(store.dfs.read(a.cid)), bytes)).toBe(0);
      await b.abort();
    });

    test("chunks are blobs dfs/<raw-leaf Cid of the chunk> (D15)", async () => {
      const bytes = bytesOf(2 * MiB, 31);
      const before = await chunkKeys(store);
      await putCommitted(bytes);
      const [first, second] = [bytes.subarray(0, MiB), bytes.subarray(MiB)];
      // A 1 MiB file is its own raw leaf: its Cid is the chunk's.
      expect(keyOf(first)).toBe(`dfs/${await cidOf([first])}`);
      expect((await chunkKeys(store)).filter((k) => !before.includes(k))).toEqual(keysOf(first, second));
    });

    test("stat and read of an unknown Cid", async () => {
      const unknown = await cidOf([new TextEncoder().encode("never stored")]);
      expect(await store.dfs.stat(unknown)).toBeUndefined();
      await expect(readAll(store.dfs.read(unknown))).rejects.toBeInstanceOf(NotFoundError);
    });
  });

  describe("dfs ranges (inclusive)", () => {
    const size = 3 * MiB + 100;
    const bytes = bytesOf(size, 77);
    let cid: string;
    beforeAll(async () => {
      cid = await putCommitted(bytes);
    }, 60_000);

    const cases: [string, number, number][] = [
      ["first byte", 0, 0],
      ["last byte", size - 1, size - 1],
      ["across a chunk boundary", MiB - 10, MiB + 9],
      ["across two boundaries", MiB - 1, 2 * MiB],
      ["exactly the second chunk", MiB, 2 * MiB - 1],
      ["inside the short last chunk", 3 * MiB + 1, 3 * MiB + 50],
      ["whole", 0, size - 1],
    ];
    test.each(cases)("%s", async (_name, start, end) => {
      const got = await readAll(store.dfs.read(cid, { start, end }));
      expect(got.length).toBe(end - start + 1);
      expect(Buffer.compare(got, bytes.subarray(start, end + 1))).toBe(0);
    });

    test.each([
      ["past the end", 0, size],
      ["start after end", 10, 9],
      ["negative", -1, 5],
      ["fractional", 0.5, 5],
    ])("%s is refused", async (_name, start, end) => {
      await expect(readAll(store.dfs.read(cid, { start, end }))).rejects.toBeInstanceOf(InvalidRangeError);
    });

    test("any range of the empty file is refused", async () => {
      const empty = await putCommitted(new Uint8Array(0));
      await expect(readAll(store.dfs.read(empty, { start: 0, end: 0 }))).rejects.toBeInstanceOf(InvalidRangeError);
      expect((await readAll(store.dfs.read(empty))).length).toBe(0);
    });

    test("a range reads only the chunks it overlaps", async () => {
      const other = bytesOf(size, 78);
      const otherCid = await putCommitted(other);
      // Without its first and last chunks, a middle range must still be served.
      for (const i of [0, 3]) await store.blobs.delete(keyOf(other.subarray(i * MiB, (i + 1) * MiB)));
      const got = await readAll(store.dfs.read(otherCid, { start: MiB + 5, end: 3 * MiB - 1 }));
      expect(Buffer.compare(got, other.subarray(MiB + 5, 3 * MiB))).toBe(0);
    });
  });
});
