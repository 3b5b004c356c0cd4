import { describe, expect, test } from "bun:test";
import { t } from "elysia";
import { StorageError, accountError, requestError, storageError } from "../../src/http/errors.ts";
import { get, postJson, readJson, testApp } from "../support/app.ts";

// Routes that fail on purpose, registered after the app's error handler like every real route.
const { app } = testApp();
app
  .get("/dfs/fail-address", () => { throw storageError.address(); })
  .get("/dfs/fail-type", () => { throw storageError.unsupportedType(); })
  .get("/dfs/fail-list", () => { throw storageError.listFailed("disk unreadable"); })
  .get("/dfs/fail-delete", () => { throw new StorageError(403, "Permission denied", { body: { Status: "Failure" } }); })
  .get("/dfs/crash", () => { throw new Error("secret internals at /var/lib"); })
  .get("/dfs/limited", () => { throw storageError.rateLimited(7); })
  .post("/dfs/typed", ({ body }) => body, { body: t.Object({ size: t.Numeric() }) })
  .get("/v2/fail", () => { throw accountError("VERIFY_ACTION_FAILED", "action 6 needs action 5 first"); })
  .get("/v2/crash", () => { throw new Error("secret internals"); })
  .post("/v2/typed", ({ body }) => body, { body: t.Object({ email: t.String() }) });

const json = async (r: Response) => ({ status: r.status, body: await readJson(r) });

describe("storage error model", () => {
  test.each([
    ["/dfs/fail-address", 517, "Address"],
    ["/dfs/fail-type", 518, "Storage"],
    ["/dfs/fail-list", 516, "Storage"],
  ])("%s answers %d with the spec's code", async (path, status, code) => {
    const r = await json(await app.handle(get(path)));
    expect(r.status).toBe(status);
    expect(r.body).toEqual({ Code: code, Description: expect.any(String), HTTPStatusCode: status });
  });

  test("extra body fields (delete's Status) are kept", async () => {
    const r = await json(await app.handle(get("/dfs/fail-delete")));
    expect(r).toEqual({ status: 403, body: { Status: "Failure", Code: "AccessDenied", Description: "Permission denied", HTTPStatusCode: 403 } });
  });

  test("an unexpected error is a 500 that reveals nothing of its cause", async () => {
    const r = await json(await app.handle(get("/dfs/crash")));
    expect(r).toEqual({ status: 500, body: { Code: "InternalError", Description: "Internal error, try again", HTTPStatusCode: 500 } });
  });

  test("a validation failure is a 400 naming the field", async () => {
    const r = await json(await app.handle(postJson("/dfs/typed", { size: "many" })));
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ Code: "InvalidArgument", HTTPStatusCode: 400 });
    expect(r.body.Description).toContain("size");
  });

  test("malformed JSON is a 400, not a 500", async () => {
    const r = await app.handle(new Request("http://stowage.test/dfs/typed", { method: "POST", headers: { "content-type": "application/json" }, body: "{oops" }));
    expect(r.status).toBe(400);
    expect((await readJson(r)).Code).toBe("InvalidArgument");
  });

  test("rate limiting carries Retry-After", async () => {
    const r = await app.handle(get("/dfs/limited"));
    expect(r.status).toBe(429);
    expect(r.headers.get("retry-after")).toBe("7");
  });

  test("an unknown storage path is a 404 in the storage shape", async () => {
    const r = await json(await app.handle(get("/nothing/here")));
    expect(r).toEqual({ status: 404, body: { Code: "NotFound", Description: "No such endpoint", HTTPStatusCode: 404 } });
  });
});

describe("account error model", () => {
  test("a typed failure answers result -1 with its name and status", async () => {
    const r = await json(await app.handle(get("/v2/fail")));
    expect(r).toEqual({ status: 400, body: { result: -1, error: "VERIFY_ACTION_FAILED", message: "action 6 needs action 5 first" } });
  });

  test("a validation failure is PARAM_ERROR naming the field", async () => {
    const r = await json(await app.handle(postJson("/v2/typed", { email: 42 })));
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ result: -1, error: "PARAM_ERROR" });
    expect(r.body.message).toContain("email");
  });

  test("an unexpected error is INTERNAL_ERROR without internals", async () => {
    const r = await json(await app.handle(get("/v2/crash")));
    expect(r).toEqual({ status: 500, body: { result: -1, error: "INTERNAL_ERROR", message: "Internal error, try again" } });
  });

  test("an unknown /v2 path is a 404 in the account shape", async () => {
    const r = await json(await app.handle(get("/v2/nope")));
    expect(r).toEqual({ status: 404, body: { result: -1, error: "NOT_FOUND", message: "No such endpoint" } });
  });
});

// Errors render themselves: every layer (error handler, fetch handler, listener, server start) answers with toResponse().
describe("errors render themselves", () => {
  test("a storage error: its status, its body, its headers", async () => {
    const r = storageError.rateLimited(7).toResponse();
    expect(r.status).toBe(429);
    expect(r.headers.get("retry-after")).toBe("7");
    expect(r.headers.get("cache-control")).toBe("no-store");
    expect(r.headers.get("content-type")).toContain("application/json");
    expect(await r.json()).toEqual({ Code: "RateLimited", Description: "Too many requests", HTTPStatusCode: 429 });
  });

  test("an account error: its status and body", async () => {
    const r = accountError("RATE_LIMITED", "slow down", { "Retry-After": "3" }).toResponse();
    expect(r.status).toBe(429);
    expect(r.headers.get("retry-after")).toBe("3");
    expect(r.headers.get("cache-control")).toBe("no-store");
    expect(await r.json()).toEqual({ result: -1, error: "RATE_LIMITED", message: "slow down" });
  });

  test("411 is answered in the model of the path, as before any route runs", async () => {
    const storage = requestError.lengthRequired("/login").toResponse();
    expect(storage.status).toBe(411);
    expect(await storage.json()).toEqual({ Code: "InvalidArgument", Description: "Content-Length is required for this body", HTTPStatusCode: 411 });
    const account = requestError.lengthRequired("/v2/login/email").toResponse();
    expect(account.status).toBe(411);
    expect(await account.json()).toEqual({ result: -1, error: "PARAM_ERROR", message: "Content-Length is required for this body" });
  });

  test("the server's own answers: 503 while starting, 500 from the listener", async () => {
    expect(await storageError.unavailable("starting").toResponse().json()).toEqual({ Code: "Unavailable", Description: "starting", HTTPStatusCode: 503 });
    expect(await storageError.internal().toResponse().json()).toEqual({ Code: "InternalError", Description: "Internal error, try again", HTTPStatusCode: 500 });
  });
});
