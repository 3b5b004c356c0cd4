/**
 * Action records and points (spec 4.2 rows 13, 14, rules 2-4; spec 7 rules 3, 4; D12).
 */
import { describe, expect, test } from "bun:test";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { accountsApp, bearer, evmLogin } from "../support/accounts.ts";

const DAY = 24 * 60 * 60_000;

describe("action records", () => {
  // Tokens that outlive the days this test moves the clock through.
  const t = accountsApp({ env: { STOWAGE_ACCESS_TOKEN_TTL: "365d" } });
  const { call, clock } = t;
  const userRow = async (uid: string) => (await t.database.sql.get<{ id: number; points: number }>("SELECT id, points FROM users WHERE uid = $1", [uid]))!;
  const login = async () => {
    const key = privateKeyToAccount(generatePrivateKey());
    const token = (await evmLogin(call, key)).body.data.accessToken as string;
    return { key, auth: bearer(token), token };
  };
  const add = (auth: Record<string, string>, actionid: unknown) => call("POST", "/v2/data/record/add", { body: { actionid }, headers: auth });
  const record = (auth: Record<string, string>, id: string | number) => call("GET", `/v2/data/record/${id}`, { headers: auth });
  const points = async (auth: Record<string, string>) => (await call("GET", "/v2/user/info", { headers: auth })).body.data.points;

  test("no record yet: result 1 and data null", async () => {
    const { auth } = await login();
    expect(await record(auth, 5)).toMatchObject({ status: 200, body: { result: 1, data: null } });
    expect((await record(auth, 6)).body).toEqual({ result: 1, data: null });
  });

  test("action 5 records the first subscription once, for 100 points", async () => {
    const { auth } = await login();
    const r = await add(auth, 5);
    expect(r).toMatchObject({ status: 200, body: { result: 1 } });
    expect((await record(auth, 5)).body).toEqual({ result: 1, data: { action: 5, points: 100, time: clock.now() / 1000 } });
    expect(await points(auth)).toBe(100);
    const again = await add(auth, 5);
    expect(again).toMatchObject({ status: 409, body: { result: -1, error: "USER_ADD_ACTION_FAILED" } });
    expect(await points(auth)).toBe(100);
  });

  test("action 6 needs action 5 first", async () => {
    const { auth } = await login();
    const r = await add(auth, 6);
    expect(r).toMatchObject({ status: 400, body: { result: -1, error: "VERIFY_ACTION_FAILED" } });
    expect(r.body.message).toContain("record action 5 first");
    expect(await points(auth)).toBe(0);
  });

  test("action 6 renews for 50 points, at most once per STOWAGE_RENEWAL_DAYS (30); record 6 answers the latest", async () => {
    const { auth } = await login();
    await add(auth, 5);
    clock.advance(DAY);
    expect((await add(auth, 6)).status).toBe(200);
    const firstRenewal = clock.now() / 1000;
    expect(await points(auth)).toBe(150);

    clock.advance(30 * DAY - 1000);
    const early = await add(auth, 6);
    expect(early).toMatchObject({ status: 400, body: { error: "VERIFY_ACTION_FAILED" } });
    expect(early.body.message).toContain("can be recorded again from");
    expect((await record(auth, 6)).body.data).toEqual({ action: 6, points: 50, time: firstRenewal });

    clock.advance(1000);
    expect((await add(auth, 6)).status).toBe(200);
    expect((await record(auth, 6)).body.data).toEqual({ action: 6, points: 50, time: clock.now() / 1000 });
    expect(await points(auth)).toBe(200);
    // Action 5 still answers the first subscription.
    expect((await record(auth, 5)).body.data.time).toBeLessThan(firstRenewal);
  });

  test("20 parallel adds of a once-only action make one record and count its points once", async () => {
    const { key, auth } = await login();
    const answers = await Promise.all(Array.from({ length: 20 }, () => add(auth, 5)));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.body.error === "USER_ADD_ACTION_FAILED")).toHaveLength(19);
    const user = await userRow(key.address);
    expect(await t.database.sql.all("SELECT id FROM action_records WHERE user_id = $1 AND action = 5", [user.id])).toHaveLength(1);
    expect(user.points).toBe(100);
  });

  test("20 parallel renewals make one record; the others read 'too soon', as one after the other, on either database", async () => {
    const { key, auth } = await login();
    await add(auth, 5);
    const answers = await Promise.all(Array.from({ length: 20 }, () => add(auth, 6)));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.body.error === "VERIFY_ACTION_FAILED")).toHaveLength(19);
    const user = await userRow(key.address);
    expect(user.points).toBe(150);
  });

  test("records are per user", async () => {
    const a = await login();
    const b = await login();
    await add(a.auth, 5);
    expect((await record(b.auth, 5)).body.data).toBeNull();
    expect((await add(b.auth, 5)).status).toBe(200);
  });

  test("an invalid or unknown action id is a parameter error", async () => {
    const { auth } = await login();
    for (const id of ["0", "-1", "abc", "1.5", "99999999999"]) {
      expect(await record(auth, id)).toMatchObject({ status: 400, body: { result: -1, error: "PARAM_ERROR" } });
    }
    expect((await record(auth, 99)).body.error).toBe("PARAM_ERROR");
    for (const id of [0, -3, 2.5, "x", null, 99]) expect((await add(auth, id)).body.error).toBe("PARAM_ERROR");
    const missing = await call("POST", "/v2/data/record/add", { body: { opts: { any: "thing" } }, headers: auth });
    expect(missing).toMatchObject({ status: 400, body: { result: -1, error: "PARAM_ERROR" } });
    expect(missing.body.message).toContain("actionid");
    expect(await points(auth)).toBe(0);
  });

  test("opts is accepted, and actionid may come as a numeric string", async () => {
    const { auth } = await login();
    expect((await call("POST", "/v2/data/record/add", { body: { actionid: "5", opts: { channel: "x" } }, headers: auth })).status).toBe(200);
  });

  test("both endpoints need a valid access token", async () => {
    expect(await call("GET", "/v2/data/record/5")).toMatchObject({ status: 401, body: { result: -1, error: "UNAUTHORIZED" } });
    expect(await add({}, 5)).toMatchObject({ status: 401, body: { result: -1, error: "UNAUTHORIZED" } });
    const { key } = await login();
    const refresh = (await evmLogin(call, key)).body.data.refreshToken;
    expect((await add(bearer(refresh), 5)).status).toBe(401);
  });
});

test("STOWAGE_RENEWAL_DAYS sets the gap between renewals", async () => {
  const { call, clock } = accountsApp({ env: { STOWAGE_RENEWAL_DAYS: "7", STOWAGE_ACCESS_TOKEN_TTL: "30d" } });
  const auth = bearer((await evmLogin(call, privateKeyToAccount(generatePrivateKey()))).body.data.accessToken);
  const add = (actionid: number) => call("POST", "/v2/data/record/add", { body: { actionid }, headers: auth });
  await add(5);
  expect((await add(6)).status).toBe(200);
  clock.advance(7 * DAY - 1000);
  expect((await add(6)).body.error).toBe("VERIFY_ACTION_FAILED");
  clock.advance(1000);
  expect((await add(6)).status).toBe(200);
});
