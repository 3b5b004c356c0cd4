/**
 * Rate limits (D12): the keyed limiters themselves (in memory, and in the shared database for the
 * login limits, D16), and the limits of the login and code endpoints (per IP and per email, 429
 * with Retry-After; off with STOWAGE_RATE_LIMITS=off).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createRateLimiter } from "../../src/http/rate-limit.ts";
import { createSharedRateLimiter } from "../../src/http/shared-rate-limit.ts";
import { accountsApp, ORIGIN } from "../support/accounts.ts";
import { testDatabase } from "../support/db.ts";
import { tempDir } from "../support/tmp.ts";

describe("rate limiter", () => {
  const limit = { name: "l", max: 3, windowMs: 10_000 };

  test("allows max hits a window, then answers the seconds until the window ends", () => {
    let t = 0;
    const limiter = createRateLimiter({ now: () => t });
    for (let i = 0; i < 3; i++) expect(limiter.hit(limit, "a")).toEqual({ ok: true });
    t = 2_500;
    expect(limiter.hit(limit, "a")).toEqual({ ok: false, retryAfter: 8 });
    expect(limiter.hit(limit, "b")).toEqual({ ok: true });
    t = 10_000;
    expect(limiter.hit(limit, "a")).toEqual({ ok: true });
  });

  test("limits with one key do not share counts", () => {
    const limiter = createRateLimiter({ now: () => 0 });
    for (let i = 0; i < 3; i++) limiter.hit(limit, "a");
    expect(limiter.hit(limit, "a").ok).toBe(false);
    expect(limiter.hit({ ...limit, name: "other" }, "a").ok).toBe(true);
  });

  test("a refused hit is not counted, so a client that waits gets in", () => {
    let t = 0;
    const limiter = createRateLimiter({ now: () => t });
    const one = { name: "one", max: 1, windowMs: 1000 };
    limiter.hit(one, "k");
    for (let i = 0; i < 5; i++) expect(limiter.hit(one, "k").ok).toBe(false);
    t = 1000;
    expect(limiter.hit(one, "k").ok).toBe(true);
  });

  test("switched off, nothing is limited", () => {
    const limiter = createRateLimiter({ enabled: false });
    for (let i = 0; i < 100; i++) expect(limiter.hit(limit, "a").ok).toBe(true);
  });

  test("expired windows are swept, so memory follows the live keys", () => {
    let t = 0;
    const limiter = createRateLimiter({ now: () => t });
    for (let i = 0; i < 10_000; i++) limiter.hit(limit, `k${i}`);
    t = 20_000;
    limiter.hit(limit, "new");
    // Every old key was swept: each starts a fresh window.
    for (let i = 0; i < 3; i++) expect(limiter.hit(limit, "k1").ok).toBe(true);
  });
});

describe("shared rate limiter", () => {
  const database = testDatabase(tempDir("limits"));
  afterAll(() => database.close());
  const { sql } = database;
  const limit = { name: "shared", max: 3, windowMs: 10_000 };
  let t = 1_000_000;
  const limiter = createSharedRateLimiter(sql, { now: () => t });
  const rows = async () => (await sql.all<{ key: string }>("SELECT key FROM rate_counters ORDER BY key")).map((r) => r.key);

  test("allows max hits a window from its first hit, then answers the seconds until it ends", async () => {
    for (let i = 0; i < 3; i++) expect(await limiter.hit(limit, "a")).toEqual({ ok: true });
    t += 2_000;
    expect(await limiter.hit(limit, "a")).toEqual({ ok: false, retryAfter: 8 });
    expect(await limiter.hit(limit, "b")).toEqual({ ok: true });
    expect(await limiter.hit({ ...limit, name: "other" }, "a")).toEqual({ ok: true });
    t += 8_000;
    expect(await limiter.hit(limit, "a")).toEqual({ ok: true });
  });

  test("hits through two limiters on one database, in parallel, are counted once each", async () => {
    const other = createSharedRateLimiter(sql, { now: () => t });
    const wide = { name: "parallel", max: 25, windowMs: 60_000 };
    const verdicts = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 ? limiter : other).hit(wide, "k")));
    expect(verdicts.filter((v) => v.ok)).toHaveLength(25);
  });

  test("unhit gives one event back", async () => {
    const one = { name: "unhit", max: 1, windowMs: 60_000 };
    expect((await limiter.hit(one, "k")).ok).toBe(true);
    expect((await limiter.hit(one, "k")).ok).toBe(false);
    await limiter.unhit(one, "k");
    await limiter.unhit(one, "k");
    expect((await limiter.hit(one, "k")).ok).toBe(true);
  });

  test("rows of windows over an hour old are swept", async () => {
    expect(await rows()).toContain("shared:a");
    t += 2 * 60 * 60_000;
    await limiter.hit(limit, "fresh");
    expect(await rows()).toEqual(["shared:fresh"]);
  });

  test("switched off, it counts nothing and writes nothing", async () => {
    const off = createSharedRateLimiter(sql, { now: () => t, enabled: false });
    for (let i = 0; i < 10; i++) expect((await off.hit(limit, "off")).ok).toBe(true);
    expect(await rows()).not.toContain("shared:off");
  });
});

describe("limits of the account endpoints", () => {
  // Every login kind configured, so each meets its limit rather than NOT_CONFIGURED.
  const { call, clock, mail } = accountsApp({
    env: {
      STOWAGE_MESSENGER_BOT_TOKEN: "1:test",
      STOWAGE_BROWSER_JWKS_URL: "http://127.0.0.1:9/jwks.json",
      STOWAGE_BROWSER_ISSUER: "https://issuer.test",
      STOWAGE_BROWSER_AUDIENCE: "stowage",
    },
  });
  const sendCode = (email: string, ip: string) => call("POST", "/v2/login/email/code", { body: { email }, ip });

  test("10 code sends a minute per IP", async () => {
    for (let i = 0; i < 10; i++) expect((await sendCode(`ip${i}@example.com`, "198.51.100.1")).status).toBe(200);
    const over = await sendCode("ip10@example.com", "198.51.100.1");
    expect(over).toMatchObject({ status: 429, body: { result: -1, error: "RATE_LIMITED" } });
    expect(Number(over.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(Number(over.headers.get("retry-after"))).toBeLessThanOrEqual(60);
    expect((await sendCode("ip10@example.com", "198.51.100.2")).status).toBe(200);
    clock.advance(60_000);
    expect((await sendCode("ip11@example.com", "198.51.100.1")).status).toBe(200);
  });

  test("5 code sends an hour per email, from any IPs", async () => {
    const email = "often@example.com";
    for (let i = 0; i < 5; i++) {
      expect((await sendCode(email, `203.0.113.${i}`)).status).toBe(200);
      clock.advance(61_000);
    }
    const over = await sendCode(email, "203.0.113.99");
    expect(over.status).toBe(429);
    expect(Number(over.headers.get("retry-after"))).toBe(3600 - 5 * 61);
    expect(mail.sent.filter((m) => m.to === email)).toHaveLength(5);
  });

  test("30 login attempts a minute per IP, across every login endpoint", async () => {
    const ip = "192.0.2.7";
    for (let i = 0; i < 30; i++) {
      const r = await call("POST", "/v2/login/email", { body: { email: `x${i}@example.com`, code: "123456", source: "t" }, ip });
      expect(r.body.error).toBe("CODE_INVALID");
    }
    const attempts = [
      call("POST", "/v2/login/email", { body: { email: "y@example.com", code: "123456", source: "t" }, ip }),
      call("POST", "/v2/login/email/password", { body: { email: "y@example.com", password: "whatever1" }, ip }),
      call("POST", "/v2/login/evm", { body: { message: "m", signature: "0x00", source: "t" }, ip }),
      call("POST", "/v2/login/messenger", { body: { initdata: "auth_date=1&hash=00", source: "t" }, ip }),
      call("POST", "/v2/login/browser", { body: { source: "t" }, headers: { authorization: "x.y.z" }, ip }),
      call("POST", "/v2/login/email/register", { body: { email: "y@example.com", code: "123456", password: "whatever1", source: "t" }, ip }),
      call("POST", "/v2/login/email/password/reset", { body: { email: "y@example.com", code: "123456", new_password: "whatever1" }, ip }),
    ];
    for (const r of await Promise.all(attempts)) {
      expect(r.status).toBe(429);
      expect(r.headers.get("retry-after")).toBeTruthy();
    }
  });

  test("60 refreshes a minute per IP", async () => {
    const ip = "192.0.2.10";
    for (let i = 0; i < 60; i++) expect((await call("POST", "/v2/login/refresh", { headers: { authorization: "x.y.z" }, ip })).status).toBe(401);
    expect((await call("POST", "/v2/login/refresh", { headers: { authorization: "x.y.z" }, ip })).status).toBe(429);
  });

  test("30 challenges a minute per IP", async () => {
    const ip = "192.0.2.8";
    const challenge = () => call("GET", "/v2/login/evm/challenge?address=0x000000000000000000000000000000000000dEaD", { headers: { origin: ORIGIN }, ip });
    for (let i = 0; i < 30; i++) expect((await challenge()).status).toBe(200);
    expect((await challenge()).status).toBe(429);
  });
});

test("STOWAGE_RATE_LIMITS=off lifts the limits, but not the minute between two codes for one email", async () => {
  const { call } = accountsApp({ env: { STOWAGE_RATE_LIMITS: "off" } });
  for (let i = 0; i < 40; i++) expect((await call("POST", "/v2/login/email/code", { body: { email: `off${i}@example.com` }, ip: "192.0.2.9" })).status).toBe(200);
  expect((await call("POST", "/v2/login/email/code", { body: { email: "off0@example.com" }, ip: "192.0.2.9" })).status).toBe(429);
});
