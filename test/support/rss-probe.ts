/**
 * What the flat-memory probes (memory-probe.ts of test/storage/dfs and test/storage/ipfs) share:
 * a stream of distinct pieces (no block or chunk repeats, so deduplication cannot hide the file)
 * and a peak-RSS meter sampled as bytes flow. Each probe runs in a process of its own, so no other test's memory counts.
 *
 * @example
 *   const rss = rssMeter()
 *   await backend.put(distinctStream(256 * MiB, () => rss.sample()))
 *   console.log(rss.growth())
 */
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
