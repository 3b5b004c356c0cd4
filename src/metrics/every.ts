/**
 * A scrape-time gauge's read, made at most once per `maxAgeMs`: aggregates over whole tables (the
 * usage totals, the pin requests by status) would otherwise be read at every scrape of every
 * gateway, and they move slowly. Concurrent scrapes share one read; a failed read is not kept.
 *
 * @example
 *   metrics.gauges({ pins: readAtMostEvery(() => pins.counts()) })
 */
export function readAtMostEvery<T>(read: () => Promise<T>, maxAgeMs = 30_000): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | undefined;
  return () => {
    if (!last || performance.now() - last.at > maxAgeMs) {
      const value = read();
      last = { at: performance.now(), value };
      value.catch(() => {
        if (last?.value === value) last = undefined;
      });
    }
    return last.value;
  };
}
