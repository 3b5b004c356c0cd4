/**
 * Small parsers for request parameters that several APIs share.
 *
 * @example
 *   bearerToken("Bearer abc") // "abc"
 */

/** The token of an `Authorization: Bearer <token>` header. */
export function bearerToken(authorization: string | null | undefined): string | undefined {
  return /^Bearer\s+(\S+)$/i.exec((authorization ?? "").trim())?.[1];
}
