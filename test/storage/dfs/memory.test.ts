/**
 * Memory stays bounded by chunks, not by file size. Measured in a process of its own (the test
 * runner shares one process between all test files, so their memory would count here too). The
 * bound is generous on purpose: Bun's garbage collector lets some tens of MiB of dead buffers pile
 * up before it runs (measured: 40–55 MiB of growth for this 256 MiB file), and the file is big
 * enough that holding it would blow the bound by far.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { TEST_DB, testDatabaseUrl } from "../../support/db.ts";

const MiB = 1_048_576;
const SIZE = 256 * MiB;
const BOUND = 128 * MiB;

test("a 256 MiB upload and its download keep RSS growth well under the file size", async () => {
  // On the PostgreSQL pass the probe gets a database of the shared server rather than starting one.
  const databaseUrl = TEST_DB === "postgres" ? await testDatabaseUrl() : "";
  // Its blocks are local files whatever the pass: on the S3 pass the probe would otherwise start a
  // Ceph of its own when it loads the test support (test/support/blobs.ts), beside the shared one.
  const env = { ...process.env, STOWAGE_TEST_BLOBS: "local" };
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, "memory-probe.ts"), databaseUrl], { stdout: "pipe", stderr: "pipe", env });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect(code, err).toBe(0);
  const r = JSON.parse(out.trim().split("\n").pop() as string) as { size: number; read: number; putGrowth: number; growth: number };
  expect(r.size).toBe(SIZE);
  expect(r.read).toBe(SIZE);
  console.log(`dfs memory: RSS growth ${(r.putGrowth / MiB).toFixed(0)} MiB during put, ${(r.growth / MiB).toFixed(0)} MiB by the end of the read, for ${SIZE / MiB} MiB`);
  expect(r.growth).toBeLessThan(BOUND);
}, 60_000);
