/**
 * The baseline: a bare Elysia app, so that the difference to Stowage is the cost of Stowage's
 * request path (the fetch wrapper with request id, client address, CORS and request log; the
 * error handler and OpenAPI plugins; validation, database lookups and the health checks).
 *
 * Without an argument (bench/healthz.ts): only GET /healthz, answering a JSON body of the same
 * shape and size as Stowage's (and the same cache-control header), with no health check behind it.
 *
 * With FILE (bench/small.ts): also the small authenticated requests (`/v2/auth/me`, `/dfs/space`,
 * `/dfs/listobjects`), with the very JSON bodies Stowage answered for the same user, after
 * verifying the Bearer access token as Stowage must (jose `jwtVerify`, HS256, the same key, so the
 * same token opens both; `typ: access`, `sub`, `jti`, and a `did` on the storage routes); `/healthz`
 * then answers Stowage's own body.
 *
 * Prints "listening on URL" once ready; exits on SIGTERM/SIGINT and on EOF of stdin (see
 * servers/lifetime.ts).
 *
 * Run: bun bench/servers/elysia.ts [FILE]   (FILE: JSON { jwtKey: "0x…", bodies: { path: body } })
 */
import { readFileSync } from "node:fs";
import { Elysia } from "elysia";
import { runUntilStopped } from "./lifetime.ts";

interface Spec {
  jwtKey: string;
  bodies: Record<string, unknown>;
}

const specFile = process.argv[2];
const spec = specFile === undefined ? undefined : (JSON.parse(readFileSync(specFile, "utf8")) as Spec);

const body = (spec: Spec, path: string) => {
  const b = spec.bodies[path];
  if (b === undefined) throw new Error(`no body given for ${path}`);
  return b;
};

const health = spec ? body(spec, "/healthz") : { status: "ok", version: "0.1.0", components: { database: { ok: true, ms: 0.01, installation: crypto.randomUUID() } } };
const app = new Elysia();
app.get("/healthz", ({ set }) => {
  set.headers["cache-control"] = "no-store";
  return health;
});
if (spec) await addAuthenticated(app, spec);

/** The authenticated routes of bench/small.ts. jose is imported here only, so the /healthz-only
 * baseline loads no more than Elysia. */
async function addAuthenticated(app: Elysia, spec: Spec) {
  const { jwtVerify } = await import("jose");
  const keyBytes = Uint8Array.from(Buffer.from(spec.jwtKey.replace(/^0x/, ""), "hex"));
  // Imported once, as Stowage does (jose would import raw bytes again on every verify).
  const key = await crypto.subtle.importKey("raw", keyBytes, { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);

  /** The token's claims, or undefined when it is missing or not a valid access token. */
  async function verified(authorization: string | undefined, needDid: boolean) {
    const token = authorization?.startsWith("Bearer ") ? authorization.slice(7) : undefined;
    if (!token) return undefined;
    try {
      const { payload } = await jwtVerify(token, key, { algorithms: ["HS256"] });
      if (payload.typ !== "access" || typeof payload.sub !== "string" || typeof payload.jti !== "string") return undefined;
      if (needDid && typeof payload.did !== "string") return undefined;
      return payload;
    } catch {
      return undefined;
    }
  }

  const unauthorized = () => new Response(JSON.stringify({ error: "invalid token" }), { status: 401, headers: { "content-type": "application/json" } });
  const me = body(spec, "/v2/auth/me");
  const space = body(spec, "/dfs/space");
  const list = body(spec, "/dfs/listobjects");
  app
    .get("/v2/auth/me", async ({ headers }) => ((await verified(headers.authorization, false)) ? me : unauthorized()))
    .get("/dfs/space", async ({ headers, set }) => {
      if (!(await verified(headers.authorization, true))) return unauthorized();
      set.headers["cache-control"] = "no-store";
      return space;
    })
    .get("/dfs/listobjects", async ({ headers }) => ((await verified(headers.authorization, true)) ? list : unauthorized()));
}

app.listen({ hostname: "127.0.0.1", port: 0 });
console.log(`listening on http://127.0.0.1:${app.server?.port}`);

await runUntilStopped(() => app.stop());
