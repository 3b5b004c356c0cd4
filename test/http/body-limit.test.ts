/** Bodies read whole are capped whatever their type; only streaming routes take more. */
import { expect, test } from "bun:test";
import { createHandler } from "../../src/http/handler.ts";
import { MAX_PARSED_BODY } from "../../src/http/body-limit.ts";
import { silentLogger } from "../../src/log.ts";
import { readJson, testApp } from "../support/app.ts";

const { app } = testApp();
const handler = createHandler({ handle: (r) => app.handle(r), log: silentLogger, corsOrigins: [], trustProxy: 0 });
const big = new Uint8Array(MAX_PARSED_BODY + 1);

for (const type of ["application/octet-stream", "text/csv", "application/json", "image/png"]) {
  test(`a ${type} body over the cap is 413 before it is read`, async () => {
    const res = await app.handle(new Request("http://stowage.test/v2/login/email/code", { method: "POST", headers: { "content-type": type, "content-length": String(big.length) }, body: big }));
    expect(res.status).toBe(413);
    expect(await readJson(res)).toMatchObject({ result: -1, error: "PAYLOAD_TOO_LARGE" });
  });
}

test("a chunked body of any type without Content-Length is 411, in the API's own shape", async () => {
  const chunked = () => new ReadableStream({ pull: (c) => (c.enqueue(new Uint8Array(10)), c.close()) });
  const account = await handler(new Request("http://stowage.test/v2/login/email/code", { method: "POST", headers: { "content-type": "application/octet-stream" }, body: chunked(), duplex: "half" } as RequestInit));
  expect(account.status).toBe(411);
  expect(await readJson(account)).toMatchObject({ result: -1, error: "PARAM_ERROR" });
  const storage = await handler(new Request("http://stowage.test/login", { method: "POST", headers: { "content-type": "text/plain" }, body: chunked(), duplex: "half" } as RequestInit));
  expect(storage.status).toBe(411);
  expect(await readJson(storage)).toMatchObject({ HTTPStatusCode: 411 });
});
