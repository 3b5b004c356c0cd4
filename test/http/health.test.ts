import { expect, test } from "bun:test";
import { Elysia } from "elysia";
import { healthRoutes } from "../../src/http/health.ts";
import { get, readJson, testApp } from "../support/app.ts";

test("GET /healthz reports each component and 200 when all are ok", async () => {
  const { app } = testApp();
  const res = await app.handle(get("/healthz"));
  expect(res.status).toBe(200);
  expect(res.headers.get("cache-control")).toBe("no-store");
  expect(res.headers.get("content-type")).toStartWith("application/json");
  const body = await readJson(res);
  expect(body.status).toBe("ok");
  expect(body.components.database).toMatchObject({ ok: true, ms: expect.any(Number) });
});

test("a failing component makes /healthz 503 and names the failure", async () => {
  const app = new Elysia().use(
    healthRoutes({ database: () => ({ files: 3 }), chain: () => { throw new Error("connection refused"); } }, "test"),
  );
  const res = await app.handle(get("/healthz"));
  expect(res.status).toBe(503);
  const body = await readJson(res);
  expect(body.status).toBe("degraded");
  expect(body.components.database).toMatchObject({ ok: true, files: 3 });
  expect(body.components.chain).toMatchObject({ ok: false, error: "connection refused" });
});

test("a component that hangs is reported as failed instead of hanging /healthz", async () => {
  const app = new Elysia().use(healthRoutes({ ipfs: () => new Promise(() => {}) }, "test"));
  const res = await app.handle(get("/healthz"));
  expect(res.status).toBe(503);
  expect((await readJson(res)).components.ipfs.error).toContain("no answer");
});

// A gateway behind a proxy is reached as `http://api/`, `http://gw:80/`: Elysia found the path
// from the URL's 12th character on, and for a host of three characters or fewer every route was 404.
test("any valid Host reaches the routes: one to three characters, with a port, an IPv6 literal", async () => {
  const { app } = testApp();
  for (const host of ["x", "gw", "api", "gw:80", "a:1", "[::1]", "[::1]:8080", "api.example.com"]) {
    const health = await app.handle(new Request(`http://${host}/healthz?probe=1`));
    const me = await app.handle(new Request(`http://${host}/v2/auth/me`));
    // The route's own answer (a token is needed), not "No such endpoint".
    expect({ host, health: health.status, me: me.status, body: (await readJson(me)).error }).toEqual({ host, health: 200, me: 401, body: expect.stringContaining("access token is required") });
  }
});
