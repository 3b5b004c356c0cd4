/**
 * Failures of the Pinning Service API in its own error shape, `{ "error": { "reason", "details" } }`
 * (the spec's Failure), with the spec's reasons for its statuses: BAD_REQUEST 400, UNAUTHORIZED
 * 401, NOT_FOUND 404, INSUFFICIENT_FUNDS 409, and reasons of our own for the 4XX it leaves to a
 * service. The edge maps the storage pipeline's domain failures (src/failure.ts) here, and the
 * worker writes the same reason into a failed pin's `info.status_details`.
 */
import { ValidationError } from "elysia";
import { Failure } from "../failure.ts";
import { describeValidation, type ErrorEdge } from "../http/error-handler.ts";
import { AccountError, StorageError } from "../http/errors.ts";
import { Unavailable } from "../unavailable.ts";

export const PIN_REASONS = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  NOT_FOUND: 404,
  INSUFFICIENT_FUNDS: 409,
  CONTENT_TOO_LARGE: 413,
  /** The account has as many pins queued or pinning as it may. */
  TOO_MANY_PINS: 429,
  /** This gateway runs without its ipfs back-end. */
  UNAVAILABLE: 503,
  INTERNAL_SERVER_ERROR: 500,
  /** Outcomes of the worker (a failed pin's info.status_details); the routes do not answer these. */
  TIMEOUT: 504,
  FETCH_FAILED: 502,
  CONTENT_BLOCKED: 410,
  UNSUPPORTED_CONTENT: 422,
} as const;

export type PinReason = keyof typeof PIN_REASONS;

const NOT_CACHED = { "cache-control": "no-store" };

export class PinsError extends Error {
  override name = "PinsError";
  constructor(
    readonly reason: PinReason,
    readonly details: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(details);
  }

  get status(): number {
    return PIN_REASONS[this.reason];
  }

  get body() {
    return { error: { reason: this.reason, details: this.details } };
  }

  toResponse(): Response {
    const extra = this.status === 401 ? { "www-authenticate": 'Bearer realm="psa"' } : {};
    return Response.json(this.body, { status: this.status, headers: { ...NOT_CACHED, ...extra, ...this.headers } });
  }
}

export const pinsError = (reason: PinReason, details: string, headers?: Record<string, string>) => new PinsError(reason, details, headers);

/** A domain failure of the write path in the API's words. */
export function pinsErrorOf(f: Failure): PinsError {
  switch (f.code) {
    case "quota-exceeded":
      return pinsError("INSUFFICIENT_FUNDS", f.message);
    case "too-large":
      return pinsError("CONTENT_TOO_LARGE", f.message);
    case "not-found":
      return pinsError("NOT_FOUND", f.message);
    case "bad-input":
    case "bad-range":
    case "bad-voucher":
      return pinsError("BAD_REQUEST", f.message);
    case "unsupported":
      return pinsError("UNSUPPORTED_CONTENT", f.message);
    case "forbidden":
    case "unauthenticated":
      return pinsError("UNAUTHORIZED", f.message);
    case "interrupted":
      return pinsError("FETCH_FAILED", f.message);
    case "blocked":
      return pinsError("CONTENT_BLOCKED", f.message);
    default:
      // A code added after this table: a refusal of the request all the same.
      return pinsError("BAD_REQUEST", f.message);
  }
}

/** Paths the Pinning Service API answers: its errors take its shape. */
export const PSA_PREFIX = "/psa";
export const isPsaPath = (path: string) => path === PSA_PREFIX || path.startsWith(`${PSA_PREFIX}/`);

/** A failure under /psa in the spec's shape, or undefined for one nobody expected (a 500). */
function answerOf(code: string | number, error: unknown): PinsError | undefined {
  if (error instanceof PinsError) return error;
  // The storage routes' `/:type/…` answer any other path under /psa: no such back-end, no such endpoint.
  if (error instanceof Failure) return error.code === "unsupported" ? pinsError("NOT_FOUND", "No such endpoint") : pinsErrorOf(error);
  if (error instanceof Unavailable) return pinsError("UNAVAILABLE", error.message, { "Retry-After": String(error.retryAfter) });
  if (error instanceof ValidationError) return pinsError("BAD_REQUEST", describeValidation(error));
  if (error instanceof StorageError || error instanceof AccountError) {
    if (error.status === 401) return pinsError("UNAUTHORIZED", error.message);
    if (error.status === 404 || error.status === 405 || error.status === 518) return pinsError("NOT_FOUND", "No such endpoint");
    if (error.status === 413) return pinsError("CONTENT_TOO_LARGE", error.message);
    return error.status < 500 ? pinsError("BAD_REQUEST", error.message) : undefined;
  }
  switch (code) {
    case "PARSE":
      return pinsError("BAD_REQUEST", "Malformed request body: a JSON object is expected");
    case "NOT_FOUND":
      return pinsError("NOT_FOUND", "No such endpoint");
  }
  return undefined;
}

/** The error handler's edge for /psa (http/error-handler.ts): every failure there in the spec's shape. */
export const pinsErrorEdge: ErrorEdge = {
  owns: isPsaPath,
  answer: (code, error) => answerOf(code, error)?.toResponse(),
  internal: () => pinsError("INTERNAL_SERVER_ERROR", "Internal error").toResponse(),
};
