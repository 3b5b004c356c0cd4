/**
 * An upload pins its chunks a few at a time (one database write per PIN_BATCH chunks, not per
 * chunk: each write is an fsync on SQLite), and still pins every chunk before the guard looks
 * whether it exists or writes it (D15). Both checked by watching the lease and the blob store.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import type { BlobStore } from "../../../src/blob/index.ts";
import { BLOB_KINDS, MiB, bytesOf, keysOf, openStore, readAll, streamOf, type Store } from "./support.ts";

setDefaultTimeout(60_000);

/** Records the lease's pin calls and, for each stat/put of a chunk, whether it was pinned then. */
function watch(store: Store) {
  const pinCalls: string[][] = [];
  const pinned = new Set<string>();
  const unpinnedLooks: string[] = [];
  const lease = store.guard.lease.bind(store.guard);
  store.guard.lease = () => {
    const l = lease();
    const pin = l.pin.bind(l);
    return Object.assign(l, {
      async pin(keys: readonly string[]) {
        pinCalls.push([...keys]);
        await pin(keys);
        for (const k of keys) pinned.add(k);
      },
    });
  };
  const blobs: BlobStore = store.blobs;
  const [stat, put] = [blobs.stat.bind(blobs), blobs.put.bind(blobs)];
  const check = (key: string) => {
    if (key.startsWith("dfs/") && !pinned.has(key)) unpinnedLooks.push(key);
  };
  blobs.stat = (key) => (check(key), stat(key));
  blobs.put = (key, source) => (check(key), put(key, source));
  return { pinCalls, unpinnedLooks };
}

describe.each(BLOB_KINDS)("dfs upload pins (%s blob store)", (kind) => {
  test("10 chunks: three pin writes (4 + 4 + 2), each chunk pinned before it is looked at or written", async () => {
    const store = await openStore(kind);
    const seen = watch(store);
    const bytes = bytesOf(9 * MiB + 5, 41);
    const up = await store.dfs.put(streamOf(bytes));
    await up.commit();
    expect(seen.pinCalls.map((keys) => keys.length)).toEqual([4, 4, 2]);
    expect(seen.pinCalls.flat().sort()).toEqual(keysOf(...Array.from({ length: 10 }, (_, i) => bytes.subarray(i * MiB, (i + 1) * MiB))).sort());
    expect(seen.unpinnedLooks).toEqual([]);
    expect(Buffer.compare(await readAll(store.dfs.read(up.cid)), bytes)).toBe(0);
    await store.close();
  });

  test("fewer chunks than a batch: pinned at the end, before they are written", async () => {
    const store = await openStore(kind);
    const seen = watch(store);
    const bytes = bytesOf(2 * MiB + 1, 42);
    const up = await store.dfs.put(streamOf(bytes));
    await up.commit();
    expect(seen.pinCalls.map((keys) => keys.length)).toEqual([3]);
    expect(seen.unpinnedLooks).toEqual([]);
    expect(Buffer.compare(await readAll(store.dfs.read(up.cid)), bytes)).toBe(0);
    await store.close();
  });
});
