/**
 * Reads a request body up to a limit without trusting Content-Length: a chunked body that grows
 * past the limit is cut off at the limit, never buffered whole.
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
