/**
 * An upload pins the blocks the importer hands over together in one database write (the importer
 * writes ten at a time; each write is an fsync on SQLite), and still pins every block before the
 * guard looks whether it exists or writes it (D15). Runs on the process's blob store
 * (STOWAGE_TEST_BLOBS).
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import type { Queryable } from "../../../src/db/sql.ts";
import { BLOCK_PREFIX } from "../../../src/storage/ipfs/blocks.ts";
import { MiB, blockKeys, collect, openBackend, randomBytes, sha256, streamOf, watchBlockWrites } from "./helpers.ts";

setDefaultTimeout(60_000);

test("25 blocks: a few pin writes, each block pinned before it is looked at or written", async () => {
  const opened = await openBackend();
  const pinCalls: string[][] = [];
  const pinned = new Set<string>();
  const unpinnedLooks: string[] = [];
  const lease = opened.guard.lease.bind(opened.guard);
  opened.guard.lease = () => {
    const l = lease();
    const pin = l.pin.bind(l);
    return Object.assign(l, {
      // What runs alongside (which blocks a row names) and its answer pass through.
      async pin(keys: readonly string[], alongside?: (q: Queryable) => Promise<unknown>) {
        pinCalls.push([...keys]);
        const answer = alongside ? await pin(keys, alongside) : await pin(keys);
        for (const k of keys) pinned.add(k);
        return answer;
      },
    });
  };
  const { store } = opened;
  const stat = store.stat.bind(store);
  const check = (key: string) => {
    if (key.startsWith(BLOCK_PREFIX) && !pinned.has(key)) unpinnedLooks.push(key);
  };
  store.stat = (key) => (check(key), stat(key));
  watchBlockWrites(store, check);

  const bytes = randomBytes(24 * MiB + 7);
  const up = await opened.ipfs.put(streamOf(bytes));
  await up.commit();
  // 25 leaves and one root node: the leaves come in batches of ten, the root after them.
  const keys = await blockKeys(store);
  expect(keys.length).toBe(26);
  expect(pinCalls.flat().sort()).toEqual(keys);
  expect(pinCalls.length).toBeLessThanOrEqual(6);
  expect(unpinnedLooks).toEqual([]);
  expect(sha256(await collect(opened.ipfs.read(up.cid)))).toBe(sha256(bytes));
  await opened.close();
});
