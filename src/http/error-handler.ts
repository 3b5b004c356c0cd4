/**
 * Maps every failure to its API's error model in one place (DESIGN.md D11).
 *
 * Typed errors keep their status; validation and parse failures become 400 in the right shape;
 * anything else is a 500 that says nothing of its cause to the client and is logged in full.
 */
import { Elysia, ValidationError } from "elysia";
import type { Logger } from "../log.ts";
import { Unavailable } from "../unavailable.ts";
import { AccountError, StorageError, accountError, accountErrorOf, isAccountPath, requestError, storageError, storageErrorOf } from "./errors.ts";
import { Failure } from "../failure.ts";
import { isPsaPath, pinsError, pinsErrorOf, PinsError } from "../pins/errors.ts";

/** A readable one-line reason for a validation failure, such as `email: Expected string`. */
export function describeValidation(err: ValidationError): string {
  const first = err.valueError ?? err.all[0];
  if (!first) return `Invalid ${err.type}`;
  const field = first.path.replace(/^\//, "").replaceAll("/", ".");
  return field ? `${field}: ${first.message}` : `${err.type}: ${first.message}`;
}

function toTyped(code: string | number, error: unknown, path: string): StorageError | AccountError | undefined {
  if (error instanceof StorageError || error instanceof AccountError) return error;
  const account = isAccountPath(path);
  if (error instanceof Unavailable) {
    const retry = { "Retry-After": String(error.retryAfter) };
    return account ? accountError("UNAVAILABLE", error.message, retry) : storageError.unavailable(error.message, retry);
  }
  if (error instanceof Failure) return account ? accountErrorOf(error) : storageErrorOf(error);
  const bad = (msg: string) => (account ? accountError("PARAM_ERROR", msg) : storageError.badRequest(msg));
  // D4: every refusal of a DID login is 401, malformed fields included.
  if (error instanceof ValidationError) return path === "/login" ? storageError.unauthorized(describeValidation(error)) : bad(describeValidation(error));
  switch (code) {
    case "PARSE":
      return bad("Malformed request body");
    case "NOT_FOUND":
      return account ? accountError("NOT_FOUND", "No such endpoint") : storageError.notFound("No such endpoint");
    case "INVALID_FILE_TYPE":
    case "INVALID_COOKIE_SIGNATURE":
      return bad("Invalid request");
  }
  return undefined;
}

/** The Pinning Service API's own error shape for its paths (pins/errors.ts). */
function toPins(code: string | number, error: unknown): PinsError | undefined {
  if (error instanceof PinsError) return error;
  // The storage routes' `/:type/…` answer any other path under /psa: no such back-end, no such endpoint.
  if (error instanceof Failure) return error.code === "unsupported" ? pinsError("NOT_FOUND", "No such endpoint") : pinsErrorOf(error);
  if (error instanceof Unavailable) return pinsError("UNAVAILABLE", error.message, { "Retry-After": String(error.retryAfter) });
  if (error instanceof ValidationError) return pinsError("BAD_REQUEST", describeValidation(error));
  // Another API's answer to a path under /psa (the storage routes' `/:type/…` take any first segment).
  if (error instanceof StorageError || error instanceof AccountError) {
    if (error.status === 401) return pinsError("UNAUTHORIZED", error.message);
    if (error.status === 404 || error.status === 405 || error.status === 518) return pinsError("NOT_FOUND", "No such endpoint");
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

export const errorHandler = (log: Logger) =>
  new Elysia({ name: "error-handler" }).onError({ as: "global" }, ({ code, error, path, request }) => {
    if (isPsaPath(path)) {
      const pins = toPins(code, error);
      if (error instanceof Unavailable) log.warn(error.message, { method: request.method, path, err: error.detail });
      if (pins) return pins.toResponse();
      log.error("unhandled error", { method: request.method, path, err: error instanceof Error ? (error.stack ?? error.message) : String(error) });
      return pinsError("INTERNAL_SERVER_ERROR", "Internal error").toResponse();
    }
    let typed = toTyped(code, error, path);
    if (error instanceof Unavailable) log.warn(error.message, { method: request.method, path, err: error.detail });
    if (!typed) {
      log.error("unhandled error", { method: request.method, path, err: error instanceof Error ? (error.stack ?? error.message) : String(error) });
      typed = requestError.internal(path);
    }
    return typed.toResponse();
  });
