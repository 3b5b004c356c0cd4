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
