/**
 * A multipart object's parts as the file row keeps them (storage/schema.ts `parts`): runs of equal
 * sizes, `<size>*<count>` joined by commas, so the usual upload (equal parts, a shorter last) is
 * two short runs however many parts it had; then, when the object has a checksum, `|` and each
 * part's checksum in the object's algorithm, joined by commas (base64 has neither character).
 * GET/HEAD ?partNumber= reads a part's byte range and checksum here, GetObjectAttributes the list.
 */

/** Sizes (and checksums, one per part) in order → the stored form. */
export function encodeParts(sizes: readonly number[], checksums?: readonly string[]): string {
  const runs: [number, number][] = [];
  for (const size of sizes) {
    const last = runs.at(-1);
    if (last && last[0] === size) last[1]++;
    else runs.push([size, 1]);
  }
  const encoded = runs.map(([size, n]) => (n === 1 ? String(size) : `${size}*${n}`)).join(",");
  return checksums && checksums.length === sizes.length ? `${encoded}|${checksums.join(",")}` : encoded;
}

/** The stored form → how many parts, and the byte range (inclusive) and checksum of part `n` (1-based) when it exists. */
export function partRange(stored: string, n: number): { count: number; range?: { start: number; end: number }; checksum?: string } {
  const [sizes = "", sums] = stored.split("|");
  let count = 0;
  let offset = 0;
  let range: { start: number; end: number } | undefined;
  for (const run of sizes.split(",")) {
    const [size, times] = run.split("*").map(Number) as [number, number | undefined];
    const k = times ?? 1;
    if (!range && n > count && n <= count + k) {
      const start = offset + (n - count - 1) * size;
      range = { start, end: start + size - 1 };
    }
    count += k;
    offset += size * k;
  }
  return { count, range, checksum: range ? sums?.split(",")[n - 1] : undefined };
}

/** The stored form → parts `from`…`to` (1-based, inclusive, clipped to the last): number, size, checksum. */
export function partList(stored: string, from: number, to: number): { partNumber: number; size: number; checksum?: string }[] {
  const [sizes = "", sums] = stored.split("|");
  const checksums = sums?.split(",");
  const out: { partNumber: number; size: number; checksum?: string }[] = [];
  let n = 0;
  for (const run of sizes.split(",")) {
    const [size, times] = run.split("*").map(Number) as [number, number | undefined];
    for (let i = 0; i < (times ?? 1); i++) {
      n++;
      if (n > to) return out;
      if (n >= from) out.push({ partNumber: n, size, checksum: checksums?.[n - 1] });
    }
  }
  return out;
}
