import { expect, test } from "bun:test";
import { createHandler } from "../../src/http/handler.ts";
import { createLogger } from "../../src/log.ts";
import { get } from "../support/app.ts";
import { testApp } from "../support/app.ts";

function setup(corsOrigins: string[] = []) {
  const lines: string[] = [];
  const log = createLogger("info", (l) => lines.push(l));
  const { app } = testApp();
  const handler = createHandler({ handle: (r) => app.handle(r), log, corsOrigins, trustProxy: 0 });
  return { handler, lines };
}

test("one log line per request with status and time, and never the query string", async () => {
  const { handler, lines } = setup();
  const res = await handler(get("/healthz?token=supersecret&sign=0xabc"));
  expect(res.status).toBe(200);
  expect(lines).toHaveLength(1);
  const entry = JSON.parse(lines[0]!);
  expect(entry).toMatchObject({ msg: "request", method: "GET", path: "/healthz", status: 200, ms: expect.any(Number) });
  expect(entry.id).toBe(res.headers.get("x-request-id"));
  expect(lines[0]).not.toContain("supersecret");
  expect(lines[0]).not.toContain("0xabc");
});

test("CORS answers only origins on the allow-list", async () => {
  const { handler } = setup(["https://app.example"]);
  const preflight = (origin: string) =>
    handler(get("/healthz", { method: "OPTIONS", headers: { origin, "access-control-request-method": "GET" } }));
  const ok = await preflight("https://app.example");
  expect(ok.status).toBe(204);
  expect(ok.headers.get("access-control-allow-origin")).toBe("https://app.example");
  const refused = await preflight("https://evil.example");
  expect(refused.status).toBe(403);
  expect(refused.headers.get("access-control-allow-origin")).toBeNull();
  const plain = await handler(get("/healthz", { headers: { origin: "https://app.example" } }));
  expect(plain.headers.get("access-control-allow-origin")).toBe("https://app.example");
});
