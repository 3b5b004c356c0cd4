/**
 * A byte count as clients write it in a query or a form field: plain digits, exact as a JSON
 * number. Here rather than in http/ because the authorities parse a voucher's `size` below every
 * API, and the quota's routes parse theirs at the edge: both read it the same way.
 *
 * @example
 *   wholeBytes("1048576") // 1048576
 *   wholeBytes("1e6")     // undefined
 */

/** A byte count written as plain digits, exact as a JSON number (below 2^53); else undefined. */
export function wholeBytes(raw: unknown): number | undefined {
  const s = String(raw ?? "").trim();
  if (!/^\d{1,16}$/.test(s)) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
}
