/**
 * The baseline: a bare Elysia app with only GET /healthz, answering a JSON body of the same
 * shape and size as Stowage's (and the same cache-control header), with no health check behind
 * it. The difference to Stowage is thus the cost of Stowage's request path: the fetch wrapper
 * (request id, client address, CORS, request log), the error handler and OpenAPI plugins, and
 * the checks run by /healthz (a SQLite `select 1` under a timer).
 *
 * Prints "listening on URL" once ready; exits on SIGTERM/SIGINT and on EOF of stdin (see
 * servers/stowage.ts for why).
 *
 * Run: bun bench/servers/elysia.ts
 */
import { Elysia } from "elysia";

const installation = crypto.randomUUID();
const app = new Elysia().get("/healthz", ({ set }) => {
  set.headers["cache-control"] = "no-store";
  return { status: "ok", version: "0.1.0", components: { database: { ok: true, ms: 0.01, installation } } };
});
app.listen({ hostname: "127.0.0.1", port: 0 });
console.log(`listening on http://127.0.0.1:${app.server?.port}`);

const shutdown = async () => {
  await app.stop();
  process.exit(0);
};
process.on("SIGTERM", () => void shutdown());
process.on("SIGINT", () => void shutdown());
for await (const _ of Bun.stdin.stream()) {
  // Never written to: only EOF ends this loop.
}
await shutdown();
