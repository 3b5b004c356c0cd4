/**
 * Sessions end (D3): POST /v2/auth/logout, the list of one's sessions and their revocation
 * (GET and DELETE /v2/auth/sessions), and a session's maximum age however often it is refreshed.
 * An ended session's refresh tokens are refused at once, and so are its access tokens on the
 * gateway that ended it (gateways.test.ts: on the others within seconds).
 */
import { describe, expect, test } from "bun:test";
import { SignJWT } from "jose";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { accountsApp, bearer, claimsOf, evmLogin, type Call } from "../support/accounts.ts";

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const newKey = () => privateKeyToAccount(generatePrivateKey());
const refresh = (call: Call, token: string) => call("POST", "/v2/login/refresh", { headers: { authorization: token } });
const me = (call: Call, token: string) => call("GET", "/v2/auth/me", { headers: bearer(token) });
const logout = (call: Call, authorization?: string) => call("POST", "/v2/auth/logout", { headers: authorization ? { authorization } : {} });
const sessions = (call: Call, token: string) => call("GET", "/v2/auth/sessions", { headers: bearer(token) });
const revoke = (call: Call, token: string, id: string) => call("DELETE", `/v2/auth/sessions/${id}`, { headers: bearer(token) });

describe("logout", () => {
  const t = accountsApp();
  const { call } = t;

  test("with the access token: the session's refresh token is refused after, and its access token at once; the account's other sessions go on", async () => {
    const key = newKey();
    const one = (await evmLogin(call, key)).body.data;
    const other = (await evmLogin(call, key)).body.data;
    expect((await me(call, one.accessToken)).status).toBe(200);

    expect(await logout(call, `Bearer ${one.accessToken}`)).toMatchObject({ status: 200, body: { result: 1 } });
    const refused = await refresh(call, one.refreshToken);
    expect(refused).toMatchObject({ status: 401, body: { result: -1, error: "UNAUTHORIZED" } });
    expect(refused.body.message).toContain("revoked");
    expect(await me(call, one.accessToken)).toMatchObject({ status: 401, body: { success: false, error: "This session has ended (logged out or revoked); log in again" } });
    expect((await call("GET", "/v2/user/info", { headers: bearer(one.accessToken) })).status).toBe(401);

    expect((await me(call, other.accessToken)).status).toBe(200);
    expect((await refresh(call, other.refreshToken)).status).toBe(200);
    // Logging out of an ended session is no error (a client retrying a lost answer).
    expect((await logout(call, `Bearer ${one.accessToken}`)).status).toBe(200);
  });

  test("with the refresh token, bare or as Bearer, and from a refreshed session", async () => {
    const first = (await evmLogin(call, newKey())).body.data;
    await logout(call, first.refreshToken);
    expect((await refresh(call, first.refreshToken)).status).toBe(401);
    expect((await me(call, first.accessToken)).status).toBe(401);

    const login = (await evmLogin(call, newKey())).body.data;
    const next = (await refresh(call, login.refreshToken)).body.data;
    expect((await logout(call, `Bearer ${next.refreshToken}`)).status).toBe(200);
    // Every token of the session: the first access token, and the refresh token it was replaced by.
    expect((await me(call, login.accessToken)).status).toBe(401);
    expect((await me(call, next.accessToken)).status).toBe(401);
    expect((await refresh(call, next.refreshToken)).status).toBe(401);
  });

  test("without a token, with garbage, a forged token or an access token that names no session: 401, and nothing ends", async () => {
    const s = (await evmLogin(call, newKey())).body.data;
    for (const authorization of [undefined, "Bearer nonsense", "a.b.c"]) {
      expect(await logout(call, authorization)).toMatchObject({ status: 401, body: { result: -1, error: "UNAUTHORIZED" } });
    }
    const [head, , sig] = s.accessToken.split(".");
    const forged = `${head}.${Buffer.from(JSON.stringify({ ...claimsOf(s.accessToken), sid: crypto.randomUUID() })).toString("base64url")}.${sig}`;
    expect((await logout(call, `Bearer ${forged}`)).status).toBe(401);
    // An access token signed by this server without a session id.
    const old = await new SignJWT({ typ: "access" })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setSubject(claimsOf(s.accessToken).sub)
      .setJti(crypto.randomUUID())
      .setIssuedAt(claimsOf(s.accessToken).iat)
      .setExpirationTime(claimsOf(s.accessToken).exp)
      .sign(t.secrets.jwtKey);
    expect(await logout(call, `Bearer ${old}`)).toMatchObject({ status: 401, body: { message: "This access token names no session; log out with the refresh token instead" } });
    expect((await me(call, s.accessToken)).status).toBe(200);
    expect((await refresh(call, s.refreshToken)).status).toBe(200);
  });

  test("a password reset ends the sessions' access tokens at once too", async () => {
    const email = `reset.${crypto.randomUUID().slice(0, 8)}@example.com`;
    await call("POST", "/v2/login/email/code", { body: { email } });
    const reg = await call("POST", "/v2/login/email/register", { body: { email, code: t.mail.lastCode(email), password: "the old password", source: "t" } });
    expect(reg.status).toBe(200);
    t.clock.advance(MINUTE);
    await call("POST", "/v2/login/email/code", { body: { email } });
    expect((await call("POST", "/v2/login/email/password/reset", { body: { email, code: t.mail.lastCode(email), new_password: "the new password" } })).status).toBe(200);
    expect((await me(call, reg.body.data.accessToken)).status).toBe(401);
  });
});

describe("the session list, and revoking one", () => {
  const { call, clock, mail } = accountsApp();
  const codeLogin = async (email: string, source: string, useragent: string) => {
    clock.advance(MINUTE);
    await call("POST", "/v2/login/email/code", { body: { email }, ip: "192.0.2.40" });
    const r = await call("POST", "/v2/login/email", { body: { email, code: mail.lastCode(email), source, useragent }, ip: "192.0.2.40" });
    expect(r.status).toBe(200);
    return { ...(r.body.data as { accessToken: string; refreshToken: string }), at: Math.floor(clock.now() / 1000) };
  };

  test("lists each live session with its start, last use, end, source and user agent, the asking one marked current", async () => {
    const email = `list.${crypto.randomUUID().slice(0, 8)}@example.com`;
    const phone = await codeLogin(email, "app", "Phone/1.0");
    const laptop = await codeLogin(email, "web", "Laptop/2.0");
    clock.advance(10 * MINUTE);
    const used = (await refresh(call, laptop.refreshToken)).body.data;
    const usedAt = Math.floor(clock.now() / 1000);

    const list = await sessions(call, phone.accessToken);
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      result: 1,
      data: [
        { id: expect.any(String), method: "email", source: "web", useragent: "Laptop/2.0", createdAt: laptop.at, lastUsedAt: usedAt, expiresAt: usedAt + 30 * 86400, current: false },
        { id: expect.any(String), method: "email", source: "app", useragent: "Phone/1.0", createdAt: phone.at, lastUsedAt: phone.at, expiresAt: phone.at + 30 * 86400, current: true },
      ],
    });
    const fromLaptop = await sessions(call, used.accessToken);
    expect(fromLaptop.body.data.map((s: { current: boolean }) => s.current)).toEqual([true, false]);
    // Another account sees only its own.
    const stranger = (await evmLogin(call, newKey())).body.data;
    expect((await sessions(call, stranger.accessToken)).body.data).toHaveLength(1);
  });

  test("revoking one ends it at once; it leaves the list; revoking it again, or another account's, is 404", async () => {
    const email = `revoke.${crypto.randomUUID().slice(0, 8)}@example.com`;
    const mine = await codeLogin(email, "web", "Mine/1.0");
    const lost = await codeLogin(email, "app", "Lost/1.0");
    const lostId = (await sessions(call, mine.accessToken)).body.data.find((s: { useragent: string }) => s.useragent === "Lost/1.0").id as string;

    const stranger = (await evmLogin(call, newKey())).body.data;
    expect(await revoke(call, stranger.accessToken, lostId)).toMatchObject({ status: 404, body: { result: -1, error: "NOT_FOUND" } });
    expect((await refresh(call, lost.refreshToken)).status).toBe(200);

    expect(await revoke(call, mine.accessToken, lostId)).toMatchObject({ status: 200, body: { result: 1 } });
    expect((await refresh(call, lost.refreshToken)).status).toBe(401);
    expect((await me(call, lost.accessToken)).status).toBe(401);
    expect((await sessions(call, mine.accessToken)).body.data.map((s: { useragent: string }) => s.useragent)).toEqual(["Mine/1.0"]);
    expect(await revoke(call, mine.accessToken, lostId)).toMatchObject({ status: 404, body: { error: "NOT_FOUND" } });
    expect((await revoke(call, mine.accessToken, "x".repeat(65))).status).toBe(400);
    expect((await revoke(call, "garbage", lostId)).status).toBe(401);

    // The current session may end itself too.
    const myId = (await sessions(call, mine.accessToken)).body.data[0].id as string;
    expect((await revoke(call, mine.accessToken, myId)).status).toBe(200);
    expect((await sessions(call, mine.accessToken)).status).toBe(401);
  });

  test("a session idle past its refresh token's lifetime is no longer listed", async () => {
    const email = `idle.${crypto.randomUUID().slice(0, 8)}@example.com`;
    await codeLogin(email, "app", "Idle/1.0");
    clock.advance(30 * DAY);
    const fresh = await codeLogin(email, "web", "Fresh/1.0");
    expect((await sessions(call, fresh.accessToken)).body.data.map((s: { useragent: string }) => s.useragent)).toEqual(["Fresh/1.0"]);
  });
});

describe("a session's maximum age", () => {
  test("by default 90 days from its login, however often it is refreshed; no token outlives it", async () => {
    const { call, clock } = accountsApp();
    const login = (await evmLogin(call, newKey())).body.data;
    const end = claimsOf(login.accessToken).iat + 90 * 86400;
    let token = login.refreshToken as string;
    for (let day = 20; day < 90; day += 20) {
      clock.advance(20 * DAY);
      const r = await refresh(call, token);
      expect(r.status).toBe(200);
      token = r.body.data.refreshToken;
      expect(claimsOf(token).exp).toBeLessThanOrEqual(end);
      expect(claimsOf(r.body.data.accessToken).exp).toBeLessThanOrEqual(end);
    }
    // Day 80: the refresh token now ends with the session, ten days on, not thirty.
    expect(claimsOf(token).exp).toBe(end);
    clock.advance(10 * DAY);
    const late = await refresh(call, token);
    expect(late).toMatchObject({ status: 401, body: { result: -1, error: "UNAUTHORIZED" } });
  });

  test("STOWAGE_SESSION_MAX_AGE sets it", async () => {
    const { call, clock } = accountsApp({ env: { STOWAGE_SESSION_MAX_AGE: "1h", STOWAGE_REFRESH_TOKEN_TTL: "30d" } });
    const login = (await evmLogin(call, newKey())).body.data;
    expect(claimsOf(login.refreshToken).exp - claimsOf(login.refreshToken).iat).toBe(3600);
    clock.advance(59 * MINUTE);
    const r = await refresh(call, login.refreshToken);
    expect(r.status).toBe(200);
    expect(claimsOf(r.body.data.accessToken).exp).toBe(claimsOf(login.accessToken).iat + 3600);
    clock.advance(MINUTE);
    expect((await refresh(call, r.body.data.refreshToken)).status).toBe(401);
    expect((await me(call, r.body.data.accessToken)).status).toBe(401);
  });
});
