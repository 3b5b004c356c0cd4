/**
 * Reads a request body up to a limit without trusting Content-Length: a chunked body that grows
 * past the limit is cut off at the limit, never buffered whole. And tells JSON sent without a
 * JSON Content-Type (D14), so it can be parsed as what it is.
 */
export class BodyTooLarge extends Error {
  override name = "BodyTooLarge";
  constructor(readonly limit: number) {
    super(`Body larger than ${limit} bytes`);
  }
}

export async function readTextCapped(request: Request, limit: number): Promise<string> {
  const declared = request.headers.get("content-length");
  if (Number(declared ?? 0) > limit) throw new BodyTooLarge(limit);
  // A declared length is enforced by the HTTP layer: the body cannot outgrow it, so read it whole.
  if (declared !== null) return request.text();
  if (!request.body) return "";
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body) {
    size += chunk.byteLength;
    if (size > limit) throw new BodyTooLarge(limit);
    parts.push(chunk);
  }
  return Buffer.concat(parts).toString("utf8");
}

/** `{`, after optional whitespace: how a JSON object starts, and how no form or text body does. */
const JSON_OBJECT_START = /^\s*\{/;

/** A body that is one JSON object (not merely one that starts like one). */
function isJsonObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

/**
 * Whether a body read whole is JSON although its Content-Type does not say so (D14): Go's
 * `http.NewRequest` sends none, `curl -d` sends `application/x-www-form-urlencoded`. A body
 * without a type that starts with `{` is JSON; a "form" is JSON only when it is a whole JSON
 * object, which no real form body (`key=value&…`) is. Reads a copy, so the body stays unread.
 */
export async function isUntypedJson(request: Request, limit: number): Promise<boolean> {
  const type = (request.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  const form = type === "application/x-www-form-urlencoded";
  if ((type && !form) || !request.body) return false;
  let text: string;
  try {
    // @types/node types clone() as undici's Request; at run time it is the same class.
    text = await readTextCapped(request.clone() as Request, limit);
  } catch (err) {
    // Too large to be a body read whole: the body cap answers it, not this guess.
    if (err instanceof BodyTooLarge) return false;
    throw err;
  }
  return JSON_OBJECT_START.test(text) && (!form || isJsonObject(text));
}
