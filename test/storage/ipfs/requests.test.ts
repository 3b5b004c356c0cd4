/**
 * What an upload asks of the blob store (D15, S3 ratio): fresh blocks, which no pinned
 * root's rows name, are written with one PUT each and no HEAD before it; blocks a row already
 * names are looked for, never written again. Runs on the process's blob store
 * (STOWAGE_TEST_BLOBS); counted by wrapping the real store's methods.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { BLOCK_PREFIX } from "../../../src/storage/ipfs/blocks.ts";
import { MiB, collect, openBackend, randomBytes, sha256, streamOf, watchBlockWrites } from "./helpers.ts";

setDefaultTimeout(60_000);

test("fresh content: one PUT per block and no HEAD; the same content again: each block looked for, none written", async () => {
  const opened = await openBackend();
  const { store } = opened;
  const calls = { stat: 0, put: 0 };
  const stat = store.stat.bind(store);
  store.stat = (key) => (key.startsWith(BLOCK_PREFIX) && calls.stat++, stat(key));
  // Plain puts, or (local files) the puts of the upload's batch.
  const writes = watchBlockWrites(store, () => calls.put++);

  // 25 leaves and one root node.
  const bytes = randomBytes(24 * MiB + 7);
  const first = await opened.ipfs.put(streamOf(bytes));
  // On local files the blocks go through one batch (no fsync, rename and folder fsync each, one
  // after the other), and every block is durable before the upload can be committed (its rows name them).
  expect(writes.batched()).toBe(store.batch ? 26 : 0);
  expect(writes.unsynced()).toBe(0);
  await first.commit();
  expect(calls).toEqual({ stat: 0, put: 26 });

  Object.assign(calls, { stat: 0, put: 0 });
  const again = await opened.ipfs.put(streamOf(bytes));
  await again.commit();
  expect(again.cid).toBe(first.cid);
  expect(calls).toEqual({ stat: 26, put: 0 });
  expect(sha256(await collect(opened.ipfs.read(first.cid)))).toBe(sha256(bytes));
  await opened.close();
});
