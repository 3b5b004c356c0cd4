/**
 * What an upload asks of the blob store (D15, S3 ratio): fresh chunks, which no row
 * names, are written with one PUT each and no HEAD before it; chunks a row already names are
 * looked for and read back (which repairs a damaged one), never written again. Counted on the real
 * store of each kind by wrapping its methods (and its batches' puts, on local files).
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import type { BlobStore } from "../../../src/blob/index.ts";
import { BLOB_KINDS, MiB, bytesOf, openStore, readAll, sha256, streamOf } from "./support.ts";

setDefaultTimeout(60_000);

type Counted = Record<"stat" | "put" | "bytes", number>;

/** Counts the calls the dfs back-end makes to `blobs` (keys under dfs/ only). */
function countCalls(blobs: BlobStore): Counted {
  const calls: Counted = { stat: 0, put: 0, bytes: 0 };
  const [stat, put, bytes] = [blobs.stat.bind(blobs), blobs.put.bind(blobs), blobs.bytes.bind(blobs)];
  const counting = (name: keyof Counted, key: string) => {
    if (key.startsWith("dfs/")) calls[name]++;
  };
  blobs.stat = (key) => (counting("stat", key), stat(key));
  blobs.put = (key, source) => (counting("put", key), put(key, source));
  blobs.bytes = (key) => (counting("bytes", key), bytes(key));
  // A store with batches (local files) gets an upload's chunk writes through one: they count as PUTs.
  const batch = blobs.batch?.bind(blobs);
  if (batch) {
    blobs.batch = () => {
      const b = batch();
      return { put: (key, chunk) => (counting("put", key), b.put(key, chunk)), sync: () => b.sync() };
    };
  }
  return calls;
}

describe.each(BLOB_KINDS)("dfs requests to the blob store (%s)", (kind) => {
  test("fresh content: one PUT per chunk and no HEAD; the same content again: each chunk looked for and read back, none written", async () => {
    const store = await openStore(kind);
    const calls = countCalls(store.blobs);
    const bytes = bytesOf(3 * MiB + 10, 31);
    const first = await store.dfs.put(streamOf(bytes));
    await first.commit();
    expect(calls).toEqual({ stat: 0, put: 4, bytes: 0 });

    Object.assign(calls, { stat: 0, put: 0, bytes: 0 });
    const again = await store.dfs.put(streamOf(bytes));
    await again.commit();
    expect(again.cid).toBe(first.cid);
    expect(calls).toEqual({ stat: 4, put: 0, bytes: 4 });
    expect(sha256(await readAll(store.dfs.read(first.cid)))).toBe(sha256(bytes));
    await store.close();
  });
});
