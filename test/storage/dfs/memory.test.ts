/**
 * Memory stays bounded by chunks, not by file size. Measured in a process of its own (the test
 * runner shares one process between all test files, so their memory would count here too). Both
 * the put and the read reuse their chunk buffers (http/lent.ts: the upload's chunker cuts into
 * buffers its sink gives back once written; the read, consumed as the listener consumes a
 * download, gets each chunk back once used). Measured for this 256 MiB file: 22–30 MiB of growth
 * during the put (the source's 64 KiB pieces are still fresh, and Bun's collector lets dead ones
 * pile up before it runs), 5–7 during the read — against 48–68 and 40–55 with a fresh 1 MiB buffer
 * per chunk. The bounds catch a return to that.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { runProbe } from "../../support/rss-probe.ts";

const MiB = 1_048_576;
const SIZE = 256 * MiB;
const PUT_BOUND = 40 * MiB;
const READ_BOUND = 24 * MiB;

test("a 256 MiB upload and its download keep RSS growth well under the file size", async () => {
  // Its database and blocks: see runProbe (local blocks on every pass).
  const probe = await runProbe(join(import.meta.dir, "memory-probe.ts"));
  expect(probe.code, probe.stderr).toBe(0);
  const r = probe.result<{ size: number; read: number; putGrowth: number; readGrowth: number }>();
  expect(r.size).toBe(SIZE);
  expect(r.read).toBe(SIZE);
  console.log(`dfs memory: RSS growth ${(r.putGrowth / MiB).toFixed(0)} MiB during put, ${(r.readGrowth / MiB).toFixed(0)} MiB during the read, for ${SIZE / MiB} MiB`);
  expect(r.putGrowth).toBeLessThan(PUT_BOUND);
  expect(r.readGrowth).toBeLessThan(READ_BOUND);
}, 60_000);
