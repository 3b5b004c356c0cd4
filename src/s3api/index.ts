/**
 * The S3-compatible API's own listener (D18, STOWAGE_S3_API_PORT): the same HTTP listener as the
 * main port (http/listen.ts: streamed bodies keep their Content-Length, a client that leaves
 * cancels its download), in front of the S3 handler alone, so nothing on this port answers in the
 * storage or account API's JSON. Expired multipart uploads are aborted now and then.
 */
import { listen } from "../http/listen.ts";
import type { Logger } from "../log.ts";
import { S3Error } from "./errors.ts";
import { createS3Api, type S3ApiDeps } from "./router.ts";
import { errorResponse } from "./xml.ts";

export { createS3Api, type S3Api, type S3ApiDeps } from "./router.ts";

/** How often expired multipart uploads are looked for. */
const EXPIRE_EVERY_MS = 10 * 60_000;

export async function startS3Api(opts: { hostname: string; port: number; maxBody: number; minBodyRate?: number; log: Logger } & S3ApiDeps) {
  const api = createS3Api(opts);
  const server = await listen({
    hostname: opts.hostname,
    port: opts.port,
    // aws-chunked framing adds ~90 bytes per 64 KiB chunk on top of the object.
    maxRequestBodySize: Math.ceil(opts.maxBody * 1.01) + 1024 * 1024,
    minBodyRate: opts.minBodyRate,
    // The target as sent: S3 signs the path without resolving dot segments, as the URL parser does.
    fetch: (request, listener) => api.handle(request, listener.requestTarget(request)),
    error(err) {
      opts.log.error("S3 listener error", { err: err.message });
      return errorResponse(new S3Error("InternalError", "We encountered an internal error. Please try again."), "/", "0");
    },
    malformed: (path) => errorResponse(new S3Error("InvalidRequest", "The request's host or headers are not valid HTTP"), path, "0"),
  });
  const expire = () => void api.expire().catch((err) => opts.log.warn("expiring multipart uploads failed", { err: (err as Error).message }));
  expire();
  const timer = setInterval(expire, EXPIRE_EVERY_MS);
  timer.unref();
  return {
    port: server.port,
    url: `http://${opts.hostname}:${server.port}`,
    async stop() {
      clearInterval(timer);
      await server.stop(true);
    },
  };
}
