/**
 * What went wrong storing or reading a file, in the domain's own words: a code that says what
 * happened (the pool is full, the file is not there, the back-end cannot do that), never how an
 * API answers it. The storage pipeline, the quota meter, the catalog and the back-ends throw
 * these; each API maps the code at its edge, in one table of its own: the storage API's JSON
 * (src/http/errors.ts `storageErrorOf`) and S3's XML (src/s3api/errors.ts `toS3Error`).
 *
 * It sits directly in src/ (no folder) so that every capability can throw it and every edge can
 * map it without importing each other.
 *
 * @example
 *   throw failure("quota-exceeded", "not enough space: 1000 bytes allowed, 900 in use, 200 more needed")
 */

const FAILURE_CODES = [
  /** A pool (space or traffic) or a voucher cannot take the bytes. */
  "quota-exceeded",
  /** No such file, content or upload for this caller. */
  "not-found",
  /** The caller may not act on this file (another account's). */
  "forbidden",
  /** The body is larger than this gateway stores. */
  "too-large",
  /** The back-end (or this gateway) does not do this: a type it does not run, a delete on ipfs. */
  "unsupported",
  /** The request's own input is wrong: a bad name, a bad Cid, a digest that does not match. */
  "bad-input",
  /** A byte range outside the content. */
  "bad-range",
  /** The client's body broke off before its end. */
  "interrupted",
  /** The content is on this gateway's denylist: gone for every reader, refused to every writer. */
  "blocked",
  /** A signed call does not prove who makes it: no session for its token, a requestID used or too
   * old, a token or login that cannot be one. */
  "unauthenticated",
  /** A voucher (a payer's signed allowance) is missing, malformed or cannot be recovered. */
  "bad-voucher",
] as const;

export type FailureCode = (typeof FAILURE_CODES)[number];

export class Failure extends Error {
  override name = "Failure";
  constructor(
    readonly code: FailureCode,
    message: string,
  ) {
    super(message);
  }
}

export const failure = (code: FailureCode, message: string) => new Failure(code, message);
