/**
 * A handler served over HTTP on 127.0.0.1 by the server's own listener (src/http/listen.ts, Bun's
 * node:http), for tests whose client is a real HTTP client (the command line, the SDK over fetch):
 * what they talk to is what `stowage serve` answers with, keep-alive included. The handler is set
 * late (`serve.handle = …`) where the app needs the listener's URL to be built.
 *
 * @example
 *   const server = await serveOverHttp()
 *   const app = buildApp(… STOWAGE_PUBLIC_URL: server.url …)
 *   server.handle = (r) => app.handle(r)
 */
import { afterAll } from "bun:test";
import { listen } from "../../src/http/listen.ts";

export async function serveOverHttp(handle: (r: Request) => Promise<Response> | Response = () => new Response("starting", { status: 503 })) {
  const served = { handle, url: "" };
  const listener = await listen({
    hostname: "127.0.0.1",
    port: 0,
    maxRequestBodySize: 1024 * 1024 * 1024,
    fetch: (r) => served.handle(r),
    error: (err) => new Response(`internal error: ${err.message}`, { status: 500 }),
  });
  afterAll(() => listener.stop(true));
  served.url = `http://127.0.0.1:${listener.port}`;
  return served;
}
