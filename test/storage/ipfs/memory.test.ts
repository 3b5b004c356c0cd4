/**
 * Memory stays bounded by blocks in flight, not by file size (issue 10): a 384 MiB ipfs put and
 * its full read, in a process of its own (the test runner shares one process between all test
 * files). The bound is generous on purpose: Bun's garbage collector lets dead 1 MiB blocks pile up
 * before it runs (measured: 95–175 MiB of growth during the put, 75–105 MiB during the read, on a
 * busy machine; bench/README.md, "ipfs path and memory"), and holding the file would blow it.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { runProbe } from "../../support/rss-probe.ts";

const MiB = 1_048_576;
const SIZE = 384 * MiB;
const BOUND = 256 * MiB;

test("a 384 MiB ipfs put and its read keep RSS growth well under the file size", async () => {
  // Its database and blocks: see runProbe (local blocks on every pass).
  const probe = await runProbe(join(import.meta.dir, "memory-probe.ts"));
  expect(probe.code, probe.stderr).toBe(0);
  const r = probe.result<{ size: number; read: number; putGrowth: number; readGrowth: number; growth: number }>();
  expect(r.size).toBe(SIZE);
  expect(r.read).toBe(SIZE);
  console.log(`ipfs memory: RSS growth ${(r.putGrowth / MiB).toFixed(0)} MiB during the put, ${(r.readGrowth / MiB).toFixed(0)} MiB during the read, for ${SIZE / MiB} MiB`);
  expect(r.growth).toBeLessThan(BOUND);
}, 120_000);
