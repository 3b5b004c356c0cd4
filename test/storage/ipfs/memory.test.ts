/**
 * Memory stays bounded by blocks in flight, not by file size: a 384 MiB ipfs put and
 * its full read, in a process of its own (the test runner shares one process between all test
 * files). Leaves are cut into, and read into, buffers that are given back and reused
 * (http/lent.ts; the read is consumed as the listener consumes a download). Measured: 35–61 MiB of
 * growth during the put (the source's 64 KiB pieces are still fresh, and Bun's collector lets dead
 * ones pile up before it runs) and 9–10 during the read, against 157–174 and 85–89 with a fresh
 * 1 MiB buffer per leaf. The bounds catch a return to that.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { runProbe } from "../../support/rss-probe.ts";

const MiB = 1_048_576;
const SIZE = 384 * MiB;
const PUT_BOUND = 96 * MiB;
const READ_BOUND = 32 * MiB;

test("a 384 MiB ipfs put and its read keep RSS growth well under the file size", async () => {
  // Its database and blocks: see runProbe (local blocks on every pass).
  const probe = await runProbe(join(import.meta.dir, "memory-probe.ts"));
  expect(probe.code, probe.stderr).toBe(0);
  const r = probe.result<{ size: number; read: number; putGrowth: number; readGrowth: number; growth: number }>();
  expect(r.size).toBe(SIZE);
  expect(r.read).toBe(SIZE);
  console.log(`ipfs memory: RSS growth ${(r.putGrowth / MiB).toFixed(0)} MiB during the put, ${(r.readGrowth / MiB).toFixed(0)} MiB during the read, for ${SIZE / MiB} MiB`);
  expect(r.putGrowth).toBeLessThan(PUT_BOUND);
  expect(r.readGrowth).toBeLessThan(READ_BOUND);
}, 120_000);
