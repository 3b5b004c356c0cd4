/**
 * What the flat-memory probes (memory-probe.ts of test/storage/dfs and test/storage/ipfs) share:
 * a stream of distinct pieces (no block or chunk repeats, so deduplication cannot hide the file)
 * and a peak-RSS meter sampled as bytes flow. Each probe runs in a process of its own, so no other
 * test's memory counts: its test starts it with `runProbe`.
 *
 * @example
 *   const rss = rssMeter()
 *   await backend.put(distinctStream(256 * MiB, () => rss.sample()))
 *   console.log(rss.growth())
 *   // in the test:
 *   const probe = await runProbe(join(import.meta.dir, "memory-probe.ts"))
 *   expect(probe.code, probe.stderr).toBe(0)
 *   const r = probe.result<{ growth: number }>()
 */
import { TEST_DB, testDatabaseUrl } from "./db.ts";

const MiB = 1024 * 1024;
const PIECE = 64 * 1024;

/** Peak RSS since `reset()` (or creation), after a full collection so the start is what is live. */
export function rssMeter() {
  let start = 0;
  let peak = 0;
  const reset = () => {
    Bun.gc(true);
    start = peak = process.memoryUsage().rss;
  };
  reset();
  return {
    reset,
    sample: () => void (peak = Math.max(peak, process.memoryUsage().rss)),
    growth: () => peak - start,
  };
}

/** `size` bytes in 64 KiB pieces, each different; `onMiB` runs after every MiB handed out. */
export function distinctStream(size: number, onMiB: () => void): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (sent >= size) return c.close();
      const piece = new Uint8Array(PIECE);
      new DataView(piece.buffer).setFloat64(0, sent);
      c.enqueue(piece);
      sent += PIECE;
      if (sent % MiB === 0) onMiB();
    },
  });
}

/** Reads `parts` to the end, sampling `rss` every 16 MiB; the byte count. */
export async function drain(parts: AsyncIterable<Uint8Array>, rss: { sample(): void }): Promise<number> {
  let read = 0;
  for await (const part of parts) {
    read += part.byteLength;
    if (read % (16 * MiB) < part.byteLength) rss.sample();
  }
  return read;
}

/**
 * Runs a probe script in a process of its own (the test runner shares one process between all test
 * files, so their memory would count too): its exit code, its stderr, and `result()`, the JSON of
 * its last line of output. On the PostgreSQL pass the probe gets a database of the shared server
 * (its one argument, '' otherwise) rather than starting one. Its blocks are local files whatever
 * the pass: on the S3 pass the probe would otherwise start a Ceph of its own when it loads the test
 * support (test/support/blobs.ts), beside the shared one.
 */
export async function runProbe(script: string): Promise<{ code: number; stderr: string; result<T>(): T }> {
  const databaseUrl = TEST_DB === "postgres" ? await testDatabaseUrl() : "";
  const env = { ...process.env, STOWAGE_TEST_BLOBS: "local" };
  const proc = Bun.spawn([process.execPath, script, databaseUrl], { stdout: "pipe", stderr: "pipe", env });
  const [out, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stderr, result: <T>() => JSON.parse(out.trim().split("\n").pop() as string) as T };
}
