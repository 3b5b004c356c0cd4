/**
 * Memory stays bounded by chunks, not by file size. Measured in a process of its own (the test
 * runner shares one process between all test files, so their memory would count here too). The
 * put's bound is generous on purpose: Bun's garbage collector lets some tens of MiB of dead buffers
 * pile up before it runs (measured: 48–68 MiB of growth for this 256 MiB file), and the file is big
 * enough that holding it would blow the bound by far. The read, consumed as the listener consumes a
 * download (each chunk given back once used: http/lent.ts), reuses its buffers: 5–7 MiB of growth
 * measured, against 40–55 when every chunk was read into a fresh buffer; its bound catches a
 * return to that.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { runProbe } from "../../support/rss-probe.ts";

const MiB = 1_048_576;
const SIZE = 256 * MiB;
const PUT_BOUND = 128 * MiB;
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
