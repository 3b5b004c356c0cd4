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

/**
 * An API with an error model of its own under its own paths (the Pinning Service API's under
 * /psa): its failures answer in its shape. `answer` gives undefined for an error it does not know,
 * which is then logged and answered by `internal`.
 */
export interface ErrorEdge {
  owns(path: string): boolean;
  answer(code: string | number, error: unknown): Response | undefined;
  internal(): Response;
}

export const errorHandler = (log: Logger, edges: readonly ErrorEdge[] = []) =>
  new Elysia({ name: "error-handler" }).onError({ as: "global" }, ({ code, error, path, request }) => {
    const edge = edges.find((e) => e.owns(path));
    if (edge) {
      if (error instanceof Unavailable) log.warn(error.message, { method: request.method, path, err: error.detail });
      const answered = edge.answer(code, error);
      if (answered) return answered;
      log.error("unhandled error", { method: request.method, path, err: error instanceof Error ? (error.stack ?? error.message) : String(error) });
      return edge.internal();
    }
    let typed = toTyped(code, error, path);
    if (error instanceof Unavailable) log.warn(error.message, { method: request.method, path, err: error.detail });
    if (!typed) {
      log.error("unhandled error", { method: request.method, path, err: error instanceof Error ? (error.stack ?? error.message) : String(error) });
      typed = requestError.internal(path);
    }
    return typed.toResponse();
  });
