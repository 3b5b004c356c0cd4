/**
 * The fetch handler around the app: request id, client address, CORS allow-list and one log
 * line per request (method, path without its query, status, ms, id). The query is never logged:
 * it can carry tokens, signatures and vouchers.
 */
import type { Listener } from "./listen.ts";
import type { Logger } from "../log.ts";
import { rememberClientIp, resolveClientIp } from "./client-ip.ts";
import { needsLength } from "./body-limit.ts";
import { requestError } from "./errors.ts";

export interface HandlerOptions {
  handle: (request: Request) => Promise<Response>;
  log: Logger;
  corsOrigins: readonly string[];
  trustProxy: number;
  /** Hears of each answered request with its duration in seconds (the server's metrics). */
  observe?: (request: Request, status: number, seconds: number) => void;
}

const CORS_METHODS = "GET, HEAD, POST, OPTIONS";
const CORS_EXPOSE = "Content-Length, Content-Range, Content-Disposition, ETag, Retry-After, X-Request-Id, X-Stowage-Encryption, X-Stowage-Owner";

export function createHandler({ handle, log, corsOrigins, trustProxy, observe }: HandlerOptions) {
  const allowed = new Set(corsOrigins);
  return async (request: Request, server?: Pick<Listener, "requestIP">): Promise<Response> => {
    const started = performance.now();
    const id = crypto.randomUUID();
    rememberClientIp(request, resolveClientIp(server?.requestIP(request)?.address, request.headers.get("x-forwarded-for"), trustProxy));
    // Parsed once: the length rule and the log line both need it.
    const path = new URL(request.url).pathname;
    const origin = request.headers.get("origin");
    const corsOk = origin !== null && allowed.has(origin);

    let response: Response;
    if (request.method === "OPTIONS" && request.headers.has("access-control-request-method")) {
      response = new Response(null, { status: corsOk ? 204 : 403 });
      if (corsOk) {
        response.headers.set("access-control-allow-methods", CORS_METHODS);
        response.headers.set("access-control-allow-headers", request.headers.get("access-control-request-headers") ?? "");
        response.headers.set("access-control-max-age", "600");
      }
    } else if (needsLength(request, path)) {
      response = requestError.lengthRequired(path).toResponse();
    } else {
      response = await handle(request);
    }
    if (corsOk) {
      response.headers.set("access-control-allow-origin", origin);
      response.headers.set("access-control-expose-headers", CORS_EXPOSE);
      response.headers.append("vary", "Origin");
    }
    response.headers.set("x-request-id", id);
    const ms = performance.now() - started;
    observe?.(request, response.status, ms / 1000);
    log.info("request", { id, method: request.method, path, status: response.status, ms: Math.round(ms * 100) / 100 });
    return response;
  };
}
