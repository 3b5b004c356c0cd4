/**
 * Caps bodies that are read whole (JSON, forms, anything) at 64 KiB (D9), before anything reads
 * them, by their Content-Length. (Over a socket such bodies must declare it: the server's fetch
 * handler refuses chunked ones, see `needsLength`.) Streaming routes (uploads) register a
 * matcher and are left alone: they stream and enforce their own limit.
 *
 * It is also where the type of such a body is settled before Elysia parses it by its
 * Content-Type: JSON sent without saying so (D14, see `isUntypedJson`) is marked as JSON, so every
 * route that takes a parsed body reads it the same way.
 */
import { Elysia } from "elysia";
import { isUntypedJson } from "./body.ts";
import { accountError, isAccountPath, storageError } from "./errors.ts";

export const MAX_PARSED_BODY = 64 * 1024;

type Matcher = (method: string, path: string) => boolean;
const streamed: Matcher[] = [];

/** Marks requests that a route streams itself (e.g. `POST /:type` uploads). */
export function streamsBody(matcher: Matcher) {
  streamed.push(matcher);
}

/** A body read whole by the app: any body, whatever its type (Elysia's parser takes JSON, forms,
 * text and octet streams alike), on a route that does not stream or cap it itself. */
export function isParsedBody(request: Request, path: string): boolean {
  if (request.method === "GET" || request.method === "HEAD" || !request.body) return false;
  return !streamed.some((m) => m(request.method, path));
}

/** Over a socket, a parsed body without Content-Length (chunked) could grow without bound. */
export const needsLength = (request: Request, path: string) => isParsedBody(request, path) && request.headers.get("content-length") === null;

export const bodyLimit = new Elysia({ name: "body-limit" }).onRequest(async ({ request }) => {
  // Most requests carry no body: they need no URL parsed here.
  if (request.method === "GET" || request.method === "HEAD") return;
  const path = new URL(request.url).pathname;
  if (!isParsedBody(request, path)) return;
  const length = request.headers.get("content-length");
  const account = isAccountPath(path);
  if (length !== null && Number(length) > MAX_PARSED_BODY) {
    throw account ? accountError("PAYLOAD_TOO_LARGE", `Body larger than ${MAX_PARSED_BODY} bytes`) : storageError.tooLarge(MAX_PARSED_BODY);
  }
  // Request headers are mutable, and Elysia reads the type only when it parses, after this hook.
  if (await isUntypedJson(request, MAX_PARSED_BODY)) request.headers.set("content-type", "application/json");
});
