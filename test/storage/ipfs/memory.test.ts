/**
 * Memory stays bounded by blocks in flight, not by file size (issue 10): a 384 MiB ipfs put and
 * its full read, in a process of its own (the test runner shares one process between all test
 * files). The bound is generous on purpose: Bun's garbage collector lets dead 1 MiB blocks pile up
 * before it runs (measured: 95–175 MiB of growth during the put, 75–105 MiB during the read, on a
 * busy machine; bench/README.md, "ipfs path and memory"), and holding the file would blow it.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { TEST_DB, testDatabaseUrl } from "../../support/db.ts";

const MiB = 1_048_576;
const SIZE = 384 * MiB;
const BOUND = 256 * MiB;

test("a 384 MiB ipfs put and its read keep RSS growth well under the file size", async () => {
  // On the PostgreSQL pass the probe gets a database of the shared server rather than starting one.
  const databaseUrl = TEST_DB === "postgres" ? await testDatabaseUrl() : "";
  // Its blocks are local files whatever the pass: on the S3 pass the probe would otherwise start a
  // Ceph of its own when it loads the test support (test/support/blobs.ts), beside the shared one.
  const env = { ...process.env, STOWAGE_TEST_BLOBS: "local" };
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, "memory-probe.ts"), databaseUrl], { stdout: "pipe", stderr: "pipe", env });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect(code, err).toBe(0);
  const r = JSON.parse(out.trim().split("\n").pop() as string) as { size: number; read: number; putGrowth: number; readGrowth: number; growth: number };
  expect(r.size).toBe(SIZE);
  expect(r.read).toBe(SIZE);
  console.log(`ipfs memory: RSS growth ${(r.putGrowth / MiB).toFixed(0)} MiB during the put, ${(r.readGrowth / MiB).toFixed(0)} MiB during the read, for ${SIZE / MiB} MiB`);
  expect(r.growth).toBeLessThan(BOUND);
}, 120_000);
