/**
 * A multipart object's part sizes as the file row keeps them (storage/schema.ts `parts`): runs of
 * equal sizes, `<size>*<count>` joined by commas, so the usual upload (equal parts, a shorter last)
 * is two short runs however many parts it had. GET/HEAD ?partNumber= reads a part's byte range here.
 */

/** Sizes in order → the stored form. */
export function encodePartSizes(sizes: readonly number[]): string {
  const runs: [number, number][] = [];
  for (const size of sizes) {
    const last = runs.at(-1);
    if (last && last[0] === size) last[1]++;
    else runs.push([size, 1]);
  }
  return runs.map(([size, n]) => (n === 1 ? String(size) : `${size}*${n}`)).join(",");
}

/** The stored form → how many parts, and the byte range (inclusive) of part `n` (1-based) when it exists. */
export function partRange(stored: string, n: number): { count: number; range?: { start: number; end: number } } {
  let count = 0;
  let offset = 0;
  let range: { start: number; end: number } | undefined;
  for (const run of stored.split(",")) {
    const [size, times] = run.split("*").map(Number) as [number, number | undefined];
    const k = times ?? 1;
    if (!range && n > count && n <= count + k) {
      const start = offset + (n - count - 1) * size;
      range = { start, end: start + size - 1 };
    }
    count += k;
    offset += size * k;
  }
  return { count, range };
}
