/**
 * Small parsers for request parameters that several APIs share.
 *
 * @example
 *   bearerToken("Bearer abc") // "abc"
 *   wholeBytes("1048576")     // 1048576; wholeBytes("1e6") // undefined
 */

/** The token of an `Authorization: Bearer <token>` header. */
export function bearerToken(authorization: string | null | undefined): string | undefined {
  return /^Bearer\s+(\S+)$/i.exec((authorization ?? "").trim())?.[1];
}

/** A byte count written as plain digits, exact as a JSON number (below 2^53); else undefined. */
export function wholeBytes(raw: unknown): number | undefined {
  const s = String(raw ?? "").trim();
  if (!/^\d{1,16}$/.test(s)) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
}
