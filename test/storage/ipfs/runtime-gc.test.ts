/**
 * Garbage at run time: blocks of aborted uploads and of unpinned content are collected once enough
 * has piled up, without a restart, and pinned content is untouched.
 */
import { afterAll, expect, test } from "bun:test";
import { MiB, blockFiles, collect, openBackend, randomBytes, streamOf } from "./helpers.ts";

const opened = await openBackend(undefined, { gcAfterBytes: 3 * MiB });
afterAll(() => opened.close());
const { ipfs, dataDir } = opened;

test("aborted and released content is collected at run time; pinned content stays readable", async () => {
  const kept = randomBytes(2 * MiB);
  const keep = await ipfs.put(streamOf(kept));
  await keep.commit();
  const baseline = blockFiles(dataDir).length;

  const dropped = await ipfs.put(streamOf(randomBytes(2 * MiB)));
  await dropped.abort();
  expect(blockFiles(dataDir).length).toBeGreaterThan(baseline);
  expect(ipfs.garbage().running).toBeUndefined(); // 2 MiB: under the threshold

  const other = await ipfs.put(streamOf(randomBytes(2 * MiB)));
  await other.commit();
  await ipfs.release(other.cid); // 4 MiB of garbage now: a collection starts
  const run = ipfs.garbage().running;
  expect(run).toBeDefined();
  const result = await run!;
  expect(result.removed).toBeGreaterThan(0);
  expect(blockFiles(dataDir).length).toBe(baseline);
  expect(await collect(ipfs.read(keep.cid))).toEqual(kept);
  expect(ipfs.garbage().bytes).toBe(0);
});
