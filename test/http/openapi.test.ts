import { expect, test } from "bun:test";
import { OPENAPI_PATH } from "../../src/app.ts";
import { get, readJson, testApp } from "../support/app.ts";

test("the OpenAPI document lists every registered route", async () => {
  const { app } = testApp();
  const res = await app.handle(get(`${OPENAPI_PATH}/json`));
  expect(res.status).toBe(200);
  const doc = await readJson(res);
  const routes = app.routes.filter((r) => !r.path.startsWith(OPENAPI_PATH));
  expect(routes.length).toBeGreaterThan(0);
  const missing = routes
    .filter((r) => !doc.paths?.[r.path.replace(/:(\w+)/g, "{$1}")]?.[r.method.toLowerCase()])
    .map((r) => `${r.method} ${r.path}`);
  expect(missing).toEqual([]);
});

test("the OpenAPI page is served", async () => {
  const { app } = testApp();
  const res = await app.handle(get(OPENAPI_PATH));
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/html");
});
