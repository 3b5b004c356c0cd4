import { expect, test } from "bun:test";
import { OPENAPI_PATH, buildApp } from "../../src/app.ts";
import { createDirectory } from "../../src/directory/index.ts";
import { testGateway } from "../support/storage.ts";
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

test("the whole app's OpenAPI document lists every route of every capability", async () => {
  const gw = await testGateway({ quota: true, ipfs: false });
  const directory = createDirectory({ sql: gw.database.sql, chainId: 985, address: gw.chain.context.contracts.directory, fromBlock: gw.chain.deployBlock });
  const app = buildApp({
    config: gw.config,
    log: gw.log,
    health: {},
    chain: gw.chain.context,
    accounts: gw.accounts,
    storage: gw.storage,
    quota: gw.quota,
    directory,
  });
  const doc = await readJson(await app.handle(get(`${OPENAPI_PATH}/json`)));
  const routes = app.routes.filter((r) => !r.path.startsWith(OPENAPI_PATH));
  // Every capability is there: storage, quota, chain, accounts, directory, health.
  for (const path of ["/login", "/:type", "/:type/listobjects", "/:type/space", "/:type/buyspace", "/rpc", "/chain", "/v2/login/evm", "/challenge", "/healthz"]) {
    expect(routes.some((r) => r.path === path)).toBe(true);
  }
  const missing = routes
    .filter((r) => !doc.paths?.[r.path.replace(/:(\w+)/g, "{$1}")]?.[r.method.toLowerCase()])
    .map((r) => `${r.method} ${r.path}`);
  expect(missing).toEqual([]);
});
