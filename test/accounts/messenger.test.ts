/**
 * Messenger Mini App login (spec 4.2 row 3, D12) with initdata signed the way the messenger signs
 * it, under a test bot token: valid, tampered, too old, missing hash, wrong bot, not configured.
 */
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { accountsApp, bearer } from "../support/accounts.ts";

const BOT_TOKEN = "123456:TEST-bot-token-for-stowage";
const DAY = 24 * 60 * 60_000;

/** What the messenger hands a Mini App, signed independently of the server's code. */
function initData(fields: Record<string, string>, botToken = BOT_TOKEN): string {
  const checkString = Object.keys(fields)
    .sort()
    .map((k) => `${k}=${fields[k]}`)
    .join("\n");
  const secret = createHmac("sha256", "WebAppData").update(botToken).digest();
  const hash = createHmac("sha256", secret).update(checkString).digest("hex");
  return new URLSearchParams({ ...fields, hash }).toString();
}

const alice = { id: 777000111, first_name: "Alice", last_name: "Liddell", username: "alice", photo_url: "https://t.example/a.jpg", language_code: "en" };

describe("messenger login", () => {
  const { call, clock } = accountsApp({ env: { STOWAGE_MESSENGER_BOT_TOKEN: BOT_TOKEN } });
  const authDate = () => String(Math.floor(clock.now() / 1000));
  const login = (initdata: string) => call("POST", "/v2/login/messenger", { body: { initdata, source: "mini-app" } });

  test("valid initdata logs in and fills messenger_info with strings", async () => {
    const r = await login(initData({ query_id: "AAE1", user: JSON.stringify(alice), auth_date: authDate() }));
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ result: 1, data: { accessToken: expect.any(String), refreshToken: expect.any(String) } });
    const info = await call("GET", "/v2/user/info", { headers: bearer(r.body.data.accessToken) });
    expect(info.body.data).toEqual({
      name: "Alice Liddell",
      icon: alice.photo_url,
      address: "",
      did: "",
      points: 0,
      social_info: false,
      messenger_info: {
        messenger_id: "777000111",
        messenger_first_name: "Alice",
        messenger_last_name: "Liddell",
        messenger_username: "alice",
        messenger_photo: alice.photo_url,
      },
    });
    const me = await call("GET", "/v2/auth/me", { headers: bearer(r.body.data.accessToken) });
    expect(me.body.data).toEqual({ uid: "messenger:777000111", username: "Alice Liddell", role: "user" });
  });

  test("the same initdata again within the age limit logs in again, to the same account", async () => {
    const data = initData({ user: JSON.stringify(alice), auth_date: authDate() });
    const uid = async (token: string) => (await call("GET", "/v2/auth/me", { headers: bearer(token) })).body.data.uid;
    const first = await uid((await login(data)).body.data.accessToken);
    clock.advance(DAY / 2);
    const second = await login(data);
    expect(second.status).toBe(200);
    expect(await uid(second.body.data.accessToken)).toBe(first);
  });

  test("a later login brings the names up to date", async () => {
    await login(initData({ user: JSON.stringify(alice), auth_date: authDate() }));
    const renamed = { ...alice, first_name: "Alicia", last_name: "" };
    const r = await login(initData({ user: JSON.stringify(renamed), auth_date: authDate() }));
    const info = await call("GET", "/v2/user/info", { headers: bearer(r.body.data.accessToken) });
    expect(info.body.data.name).toBe("Alicia");
    expect(info.body.data.messenger_info.messenger_first_name).toBe("Alicia");
  });

  test("tampered initdata is refused", async () => {
    const data = initData({ user: JSON.stringify(alice), auth_date: authDate() });
    const tampered = data.replace(encodeURIComponent('"id":777000111'), encodeURIComponent('"id":777000112'));
    expect(tampered).not.toBe(data);
    const r = await login(tampered);
    expect(r).toMatchObject({ status: 401, body: { result: -1, error: "UNAUTHORIZED", message: "initdata is not signed by this server's bot" } });
  });

  test("initdata signed for another bot is refused", async () => {
    const r = await login(initData({ user: JSON.stringify(alice), auth_date: authDate() }, "999:another-bot"));
    expect(r.status).toBe(401);
    expect(r.body.message).toBe("initdata is not signed by this server's bot");
  });

  test("initdata older than STOWAGE_MESSENGER_MAX_AGE (1 day) is refused", async () => {
    const data = initData({ user: JSON.stringify(alice), auth_date: authDate() });
    clock.advance(DAY + 1000);
    const r = await login(data);
    expect(r).toMatchObject({ status: 401, body: { error: "UNAUTHORIZED", message: "initdata is too old; reopen the app" } });
  });

  test("initdata without a hash is refused", async () => {
    const r = await login(new URLSearchParams({ user: JSON.stringify(alice), auth_date: authDate() }).toString());
    expect(r).toMatchObject({ status: 401, body: { error: "UNAUTHORIZED", message: "initdata carries no hash" } });
  });

  test("signed initdata without a user is a PARAM_ERROR", async () => {
    const r = await login(initData({ auth_date: authDate(), query_id: "x" }));
    expect(r).toMatchObject({ status: 400, body: { error: "PARAM_ERROR" } });
  });

  test("missing initdata or source is a PARAM_ERROR", async () => {
    expect((await call("POST", "/v2/login/messenger", { body: { source: "x" } })).body.error).toBe("PARAM_ERROR");
    expect((await call("POST", "/v2/login/messenger", { body: { initdata: "a=b" } })).body.error).toBe("PARAM_ERROR");
  });
});

test("messenger login without a bot token says it is not configured", async () => {
  const { call } = accountsApp();
  const r = await call("POST", "/v2/login/messenger", { body: { initdata: "auth_date=1&hash=00", source: "x" } });
  expect(r).toMatchObject({ status: 503, body: { result: -1, error: "NOT_CONFIGURED" } });
  expect(r.body.message).toContain("STOWAGE_MESSENGER_BOT_TOKEN");
});
