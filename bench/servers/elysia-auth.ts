/**
 * The baseline of bench/small.ts: a bare Elysia app that answers the small authenticated requests
 * (`/v2/auth/me`, `/dfs/space`, `/dfs/listobjects`) with the very JSON bodies Stowage answered for
 * the same user, after verifying the Bearer access token as Stowage must (jose `jwtVerify`, HS256,
 * the same key, so the same token opens both; `typ: access`, `sub`, `jti`, and a `did` on the
 * storage routes), and `/healthz` with Stowage's body and no check behind it. What it leaves out
 * is what the comparison prices: Stowage's fetch wrapper, plugins, validation, database lookups
 * and health checks.
 *
 * Prints "listening on URL" once ready; exits on SIGTERM/SIGINT and on EOF of stdin (see
 * servers/stowage.ts for why).
 *
 * Run: bun bench/servers/elysia-auth.ts FILE   (FILE: JSON { jwtKey: "0x…", bodies: { path: body } })
 */
import { readFileSync } from "node:fs";
import { Elysia } from "elysia";
import { jwtVerify } from "jose";

const spec = JSON.parse(readFileSync(process.argv[2] ?? "", "utf8")) as { jwtKey: string; bodies: Record<string, unknown> };
const keyBytes = Uint8Array.from(Buffer.from(spec.jwtKey.replace(/^0x/, ""), "hex"));
// Imported once, as Stowage does (jose would import raw bytes again on every verify).
const key = await crypto.subtle.importKey("raw", keyBytes, { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);

const body = (path: string) => {
  const b = spec.bodies[path];
  if (b === undefined) throw new Error(`no body given for ${path}`);
  return b;
};

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
const me = body("/v2/auth/me");
const space = body("/dfs/space");
const list = body("/dfs/listobjects");
const health = body("/healthz");

const app = new Elysia()
  .get("/healthz", ({ set }) => {
    set.headers["cache-control"] = "no-store";
    return health;
  })
  .get("/v2/auth/me", async ({ headers }) => ((await verified(headers.authorization, false)) ? me : unauthorized()))
  .get("/dfs/space", async ({ headers, set }) => {
    if (!(await verified(headers.authorization, true))) return unauthorized();
    set.headers["cache-control"] = "no-store";
    return space;
  })
  .get("/dfs/listobjects", async ({ headers }) => ((await verified(headers.authorization, true)) ? list : unauthorized()));
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
