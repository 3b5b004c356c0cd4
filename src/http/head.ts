/**
 * HEAD requests, answered by the GET handlers. Elysia 1.4.30 answers HEAD on a path that has a
 * GET route by running the GET handler and then overwriting Content-Length with the length of the
 * body that handler returned: 0 for a download's HEAD answer, which has no body, so a client could
 * not learn a file's size (its own `.head()` routes are never reached). The server's fetch handler
 * therefore sends HEAD into the app as a GET marked here (handlers ask `isHead` and answer without
 * a body), and drops the body itself, keeping a Content-Length the handler set.
 */
import { clientIp, rememberClientIp } from "./client-ip.ts";

const heads = new WeakSet<Request>();

/** Whether the request came in as HEAD (the app may see it as a marked GET). */
export function isHead(request: Request): boolean {
  return request.method === "HEAD" || heads.has(request);
}

/** Answers a HEAD request through the app's GET handler. */
export async function handleHead(request: Request, handle: (request: Request) => Promise<Response>): Promise<Response> {
  const get = new Request(request.url, { method: "GET", headers: request.headers, signal: request.signal });
  heads.add(get);
  rememberClientIp(get, clientIp(request));
  const res = await handle(get);
  const headers = new Headers(res.headers);
  if (res.body && !headers.has("content-length")) headers.set("content-length", String(await lengthOf(res.body)));
  else await res.body?.cancel();
  return new Response(null, { status: res.status, statusText: res.statusText, headers });
}

/** Counts a body's bytes without keeping them (what Elysia does for HEAD). */
async function lengthOf(body: ReadableStream<Uint8Array>): Promise<number> {
  let length = 0;
  for await (const chunk of body) length += chunk.byteLength;
  return length;
}
