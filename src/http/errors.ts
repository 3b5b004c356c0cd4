/**
 * The two error models of the API (DESIGN.md D11), as typed errors.
 *
 * Storage routes answer `{ Code, Description, HTTPStatusCode }`; account routes (`/v2/...`)
 * answer `{ result: -1, error, message }` (their schemas: model.ts). Services throw these; each
 * renders itself (`toResponse()`), so no layer builds an error body by hand.
 *
 * @example
 *   throw storageError.unauthorized("Token is null")
 *   throw accountError("PARAM_ERROR", "email is required")
 */

import type { AccountErrorBody, StorageErrorBody } from "./model.ts";
import { Failure, type FailureCode } from "../failure.ts";

/** Storage error codes by HTTP status: the spec's codes (401, 500, 516, 517, 518) and D11's. */
export const storageCodes = {
  400: "InvalidArgument",
  401: "Authentication",
  402: "PaymentRequired",
  403: "AccessDenied",
  404: "NotFound",
  405: "MethodNotAllowed",
  406: "NotAcceptable",
  409: "Conflict",
  410: "Blocked",
  411: "InvalidArgument",
  413: "EntityTooLarge",
  416: "InvalidRange",
  429: "RateLimited",
  500: "InternalError",
  503: "Unavailable",
  516: "Storage",
  517: "Address",
  518: "Storage",
} as const;

export type StorageStatus = keyof typeof storageCodes;

/** An error answers one request: never kept by a cache (D8 asks it of purchases; true of all). */
const NOT_CACHED = { "cache-control": "no-store" } as const;

export class StorageError extends Error {
  override name = "StorageError";
  constructor(
    readonly status: StorageStatus,
    readonly description: string,
    /** Extra fields of the body, such as delete's `Status: "Failure"`, and headers such as Retry-After. */
    readonly extra: { body?: Record<string, unknown>; headers?: Record<string, string> } = {},
  ) {
    super(description);
  }

  get body(): StorageErrorBody {
    return { ...this.extra.body, Code: storageCodes[this.status], Description: this.description, HTTPStatusCode: this.status };
  }

  toResponse(): Response {
    return Response.json(this.body, { status: this.status, headers: { ...NOT_CACHED, ...this.extra.headers } });
  }
}

/** One constructor per failure the spec names, so routes read like the spec's error table. */
export const storageError = {
  badRequest: (what: string) => new StorageError(400, what),
  unauthorized: (what: string) => new StorageError(401, what),
  quota: (what: string) => new StorageError(402, what),
  forbidden: (what = "Permission denied") => new StorageError(403, what),
  conflict: (what: string) => new StorageError(409, what),
  notFound: (what = "Not found") => new StorageError(404, what),
  /** A response format the trustless gateway cannot serve (D17). */
  notAcceptable: (what: string) => new StorageError(406, what),
  tooLarge: (limit: number) => new StorageError(413, `Request body is larger than ${limit} bytes`),
  lengthRequired: () => new StorageError(411, LENGTH_REQUIRED),
  rateLimited: (retryAfterSeconds: number) =>
    new StorageError(429, "Too many requests", { headers: { "Retry-After": String(retryAfterSeconds) } }),
  internal: () => new StorageError(500, "Internal error, try again"),
  unavailable: (what: string, headers?: Record<string, string>) => new StorageError(503, what, { headers }),
  listFailed: (detail: string) => new StorageError(516, `list object error: ${detail}`),
  address: (what = "Address parameter missing or invalid") => new StorageError(517, what),
  unsupportedType: () => new StorageError(518, "Storage type not supported"),
};

/**
 * The domain's failures (src/failure.ts) in the storage API's JSON: each code's status, and the
 * spec's own wording where the spec fixes one (518's). The S3 API has its table in s3api/errors.ts.
 */
const FAILURE_JSON: Record<FailureCode, { status: StorageStatus; description?: string }> = {
  "quota-exceeded": { status: 402 },
  "not-found": { status: 404 },
  forbidden: { status: 403 },
  "too-large": { status: 413 },
  unsupported: { status: 518, description: "Storage type not supported" },
  "bad-input": { status: 400 },
  "bad-range": { status: 416 },
  interrupted: { status: 400 },
  blocked: { status: 410 },
  unauthenticated: { status: 401 },
  "bad-voucher": { status: 517 },
};

/** A failure of the domain as the storage API answers it; a StorageError as it is. */
export function storageErrorOf(err: Failure | StorageError): StorageError {
  if (err instanceof StorageError) return err;
  const row = FAILURE_JSON[err.code];
  return new StorageError(row.status, row.description ?? err.message);
}

/** The same failures on an account path (`/v2/…`), in the account API's model. */
const FAILURE_ACCOUNT: Record<FailureCode, AccountErrorName> = {
  "quota-exceeded": "FORBIDDEN",
  "not-found": "NOT_FOUND",
  forbidden: "FORBIDDEN",
  "too-large": "PAYLOAD_TOO_LARGE",
  unsupported: "PARAM_ERROR",
  "bad-input": "PARAM_ERROR",
  "bad-range": "PARAM_ERROR",
  interrupted: "PARAM_ERROR",
  blocked: "FORBIDDEN",
  unauthenticated: "UNAUTHORIZED",
  "bad-voucher": "PARAM_ERROR",
};

export const accountErrorOf = (err: Failure) => new AccountError(FAILURE_ACCOUNT[err.code], err.message);

/** Account error names and their HTTP status. */
export const accountErrors = {
  PARAM_ERROR: 400,
  CODE_INVALID: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  VERIFY_ACTION_FAILED: 400,
  USER_ADD_ACTION_FAILED: 409,
  PAYLOAD_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  NOT_CONFIGURED: 503,
  /** A service the request needs (mail, the chain, a JWKS) did not answer. */
  UNAVAILABLE: 503,
} as const;

export type AccountErrorName = keyof typeof accountErrors;

export class AccountError extends Error {
  override name = "AccountError";
  constructor(
    readonly error: AccountErrorName,
    message: string,
    readonly headers: Record<string, string> = {},
    /** A status other than the name's own (411 answers PARAM_ERROR). */
    private readonly statusOverride?: number,
  ) {
    super(message);
  }

  get status(): number {
    return this.statusOverride ?? accountErrors[this.error];
  }

  get body(): AccountErrorBody {
    return { result: -1, error: this.error, message: this.message };
  }

  toResponse(): Response {
    return Response.json(this.body, { status: this.status, headers: { ...NOT_CACHED, ...this.headers } });
  }
}

export const accountError = (name: AccountErrorName, message: string, headers?: Record<string, string>) =>
  new AccountError(name, message, headers);

/** Which model a path answers in: the account API lives under `/v2/`. */
export const isAccountPath = (path: string) => path === "/v2" || path.startsWith("/v2/");

const LENGTH_REQUIRED = "Content-Length is required for this body";
const MALFORMED = "Malformed request: its Host or a header cannot be read";

/** Errors raised before a request reaches a route, in the model of the API its path belongs to. */
export const requestError = {
  /** 411: a body read whole must declare its length (see http/body-limit.ts). */
  lengthRequired: (path: string) => (isAccountPath(path) ? new AccountError("PARAM_ERROR", LENGTH_REQUIRED, {}, 411) : storageError.lengthRequired()),
  internal: (path: string) => (isAccountPath(path) ? accountError("INTERNAL_ERROR", "Internal error, try again") : storageError.internal()),
  /** 400: what came is not an HTTP request the app can be handed (see http/listen.ts). */
  malformed: (path: string) => (isAccountPath(path) ? accountError("PARAM_ERROR", MALFORMED) : storageError.badRequest(MALFORMED)),
};
