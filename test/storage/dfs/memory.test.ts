/**
 * Memory stays bounded by chunks, not by file size. Measured in a process of its own (the test
 * runner shares one process between all test files, so their memory would count here too). The
 * bound is generous on purpose: Bun's garbage collector lets some tens of MiB of dead buffers pile
 * up before it runs (measured: 40–55 MiB of growth for this 256 MiB file), and the file is big
 * enough that holding it would blow the bound by far.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { runProbe } from "../../support/rss-probe.ts";

const MiB = 1_048_576;
const SIZE = 256 * MiB;
const BOUND = 128 * MiB;

test("a 256 MiB upload and its download keep RSS growth well under the file size", async () => {
  // Its database and blocks: see runProbe (local blocks on every pass).
  const probe = await runProbe(join(import.meta.dir, "memory-probe.ts"));
  expect(probe.code, probe.stderr).toBe(0);
  const r = probe.result<{ size: number; read: number; putGrowth: number; growth: number }>();
  expect(r.size).toBe(SIZE);
  expect(r.read).toBe(SIZE);
  console.log(`dfs memory: RSS growth ${(r.putGrowth / MiB).toFixed(0)} MiB during put, ${(r.growth / MiB).toFixed(0)} MiB by the end of the read, for ${SIZE / MiB} MiB`);
  expect(r.growth).toBeLessThan(BOUND);
}, 60_000);
