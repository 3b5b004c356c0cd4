/**
 * Two gateways over one database (D16): each has its own account services, limiter and HTTP app,
 * as two processes behind a load balancer would, and they share only the database (SQLite file
 * on the default pass, PostgreSQL on the STOWAGE_TEST_DB=postgres pass) and the JWT key. What
 * must hold across them: the login limits count every gateway's attempts, and a code, a nonce or
 * a refresh token's place in its session is used once, however the requests are spread.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { buildApp } from "../../src/app.ts";
import { createAccountServices } from "../../src/accounts/index.ts";
import { ENDED_SYNC_MS } from "../../src/accounts/tokens.ts";
import { parseConfig } from "../../src/config.ts";
import { openDatabase } from "../../src/db/open.ts";
import { openPostgres } from "../../src/db/postgres.ts";
import type { Sql } from "../../src/db/sql.ts";
import { rememberClientIp } from "../../src/http/client-ip.ts";
import { silentLogger } from "../../src/log.ts";
import { selfOwned } from "../support/app.ts";
import { ORIGIN, memoryMailer, testClock, type Call } from "../support/accounts.ts";
import { TEST_DB, testDatabaseUrl } from "../support/db.ts";
import { tempDir } from "../support/tmp.ts";

const clock = testClock();
const mail = memoryMailer();
const jwtKey = crypto.getRandomValues(new Uint8Array(32));
const closers: (() => unknown)[] = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

/**
 * The database the two gateways share: on PostgreSQL a pool each, as two processes would have;
 * on SQLite one `Sql`, whose queue is what orders the transactions of a process (a second
 * connection in the same process would block the thread in BEGIN IMMEDIATE while the first
 * connection's transaction waits for that thread; SQLite is the one-gateway mode, D16).
 */
async function sharedDatabase(dirs: [string, string]): Promise<[Sql, Sql]> {
  if (TEST_DB === "postgres") {
    const url = await testDatabaseUrl();
    const [a, b] = await Promise.all([openPostgres(url, { max: 4 }), openPostgres(url, { max: 4 })]);
    closers.push(a.close, b.close);
    return [a.sql, b.sql];
  }
  const one = openDatabase(join(dirs[0], "stowage.db"));
  closers.push(one.close);
  return [one.sql, one.sql];
}

function gateway(dataDir: string, sql: Sql): Call {
  const config = parseConfig([], { STOWAGE_DATA_DIR: dataDir, STOWAGE_ALLOWED_ORIGINS: ORIGIN });
  const accounts = createAccountServices({ config, sql, log: silentLogger, secrets: { jwtKey }, resolver: selfOwned, mailer: mail.mailer, now: clock.now });
  const app = buildApp({ config, log: silentLogger, health: {}, accounts });
  let calls = 0;
  return async (method, path, { body, headers = {}, ip } = {}) => {
    const init: RequestInit = { method, headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) } };
    if (body !== undefined) init.body = JSON.stringify(body);
    const request = new Request(`http://stowage.test${path}`, init);
    rememberClientIp(request, ip ?? `client-${++calls}-${crypto.randomUUID()}`);
    const res = await app.handle(request);
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
  };
}

const dirs: [string, string] = [tempDir("gw-a"), tempDir("gw-b")];
const [sqlA, sqlB] = await sharedDatabase(dirs);
const a = gateway(dirs[0], sqlA);
const b = gateway(dirs[1], sqlB);
const both = [a, b];

let n = 0;
const freshEmail = () => `gw${++n}.${crypto.randomUUID().slice(0, 8)}@example.com`;
const sendCode = (call: Call, email: string, ip?: string) => call("POST", "/v2/login/email/code", { body: { email }, ip });
const codeLogin = (call: Call, email: string, code: string) => call("POST", "/v2/login/email", { body: { email, code, source: "test" } });
const refresh = (call: Call, token: string) => call("POST", "/v2/login/refresh", { headers: { authorization: token } });

test("the gateways share one database", () => {
  expect(sqlA.dialect).toBe(TEST_DB);
  expect(sqlB.dialect).toBe(TEST_DB);
});

describe("login limits count every gateway's attempts", () => {
  test("30 login attempts a minute per IP, alternating between the gateways", async () => {
    const ip = "192.0.2.78";
    const attempt = (call: Call, i: number) => call("POST", "/v2/login/email", { body: { email: `z${i}@example.com`, code: "123456", source: "t" }, ip });
    for (let i = 0; i < 30; i++) expect((await attempt(both[i % 2] as Call, i)).body.error).toBe("CODE_INVALID");
    for (const call of both) {
      const over = await attempt(call, 30);
      expect(over).toMatchObject({ status: 429, body: { error: "RATE_LIMITED" } });
      expect(Number(over.headers.get("retry-after"))).toBeGreaterThan(0);
    }
    clock.advance(60_000);
    expect((await attempt(b, 31)).body.error).toBe("CODE_INVALID");
  });

  test("50 parallel attempts from one address over both gateways: exactly 30 are let through", async () => {
    const ip = "192.0.2.79";
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => (both[i % 2] as Call)("POST", "/v2/login/email", { body: { email: `p${i}@example.com`, code: "123456", source: "t" }, ip })),
    );
    expect(answers.filter((r) => r.status === 429)).toHaveLength(20);
    expect(answers.filter((r) => r.body.error === "CODE_INVALID")).toHaveLength(30);
    clock.advance(60_000);
  });
});

describe("accounts made by both gateways at once", () => {
  const evmLogin = async (call: Call, key: ReturnType<typeof privateKeyToAccount>) => {
    const challenge = await call("GET", `/v2/login/evm/challenge?address=${key.address}`, { headers: { origin: ORIGIN } });
    const message = challenge.body.data as string;
    return call("POST", "/v2/login/evm", { body: { message, signature: await key.signMessage({ message }), source: "test" } });
  };

  test("20 new wallets logging in at once get 20 distinct numbers", async () => {
    const keys = Array.from({ length: 20 }, () => privateKeyToAccount(generatePrivateKey()));
    const answers = await Promise.all(keys.map((key, i) => evmLogin(both[i % 2] as Call, key)));
    expect(answers.map((r) => r.status)).toEqual(keys.map(() => 200));
    const numbers = answers.map((r) => r.body.data.number as string);
    expect(new Set(numbers).size).toBe(20);
  });

  test("one wallet logging in 10 times at once is one account", async () => {
    const key = privateKeyToAccount(generatePrivateKey());
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => evmLogin(both[i % 2] as Call, key)));
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
    expect(new Set(answers.map((r) => r.body.data.number)).size).toBe(1);
    expect(await sqlA.all("SELECT id FROM users WHERE uid = $1", [key.address])).toHaveLength(1);
  });
});

describe("used once, whichever gateway is asked", () => {
  test("an email code used in parallel at both gateways logs in once", async () => {
    const email = freshEmail();
    expect((await sendCode(a, email)).status).toBe(200);
    const code = mail.lastCode(email);
    const answers = await Promise.all([a, b, a, b].map((call) => codeLogin(call, email, code)));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(1);
    expect(answers.filter((r) => r.body.error === "CODE_INVALID")).toHaveLength(3);
    clock.advance(60_000);
  });

  test("codes asked for one email by one client at once at both gateways: one is sent, the rest wait their minute", async () => {
    const email = freshEmail();
    const answers = await Promise.all([a, b, a, b, a, b].map((call) => sendCode(call, email, "192.0.2.80")));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(1);
    expect(answers.filter((r) => r.status === 429)).toHaveLength(5);
    expect(mail.sent.filter((m) => m.to === email)).toHaveLength(1);
    clock.advance(60_000);
  });

  test("a sign-in message's nonce logs in once", async () => {
    const key = privateKeyToAccount(generatePrivateKey());
    const challenge = await a("GET", `/v2/login/evm/challenge?address=${key.address}`, { headers: { origin: ORIGIN } });
    expect(challenge.status).toBe(200);
    const message = challenge.body.data as string;
    const signature = await key.signMessage({ message });
    const answers = await Promise.all([b, a, b, a].map((call) => call("POST", "/v2/login/evm", { body: { message, signature, source: "test" } })));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(1);
    expect(answers.filter((r) => r.status === 401)).toHaveLength(3);
  });

  test("two refresh tokens that exclude each other, used in parallel at both gateways: one wins, the session ends", async () => {
    const email = freshEmail();
    await sendCode(b, email);
    const login = await codeLogin(b, email, mail.lastCode(email));
    const first = login.body.data.refreshToken as string;
    // Lazy rotation: the first token may be refreshed again until a child is used, so it has two
    // children, and using one of them makes the other a replay.
    const [one, two] = [(await refresh(a, first)).body.data.refreshToken as string, (await refresh(b, first)).body.data.refreshToken as string];
    const answers = await Promise.all([refresh(a, one), refresh(b, two)]);
    const won = answers.filter((r) => r.status === 200);
    expect(won).toHaveLength(1);
    expect(answers.filter((r) => r.status === 401)).toHaveLength(1);
    // The loser was a replay: the whole session is revoked, the winner's new token included.
    const after = await refresh(a, won[0]?.body.data.refreshToken as string);
    expect(after).toMatchObject({ status: 401 });
    expect(after.body.message).toContain("revoked");
  });

  test("20 parallel refreshes with one token at both gateways: each child is a branch only one of which can be used", async () => {
    const email = freshEmail();
    await sendCode(a, email);
    const login = await codeLogin(a, email, mail.lastCode(email));
    const token = login.body.data.refreshToken as string;
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => refresh(both[i % 2] as Call, token)));
    // The token is the head, so every refresh with it is good (lazy rotation, D3) …
    expect(answers.filter((r) => r.status === 200)).toHaveLength(20);
    const children = answers.map((r) => r.body.data.refreshToken as string);
    // … but of its children used in parallel, exactly one becomes the head.
    const uses = await Promise.all(children.map((child, i) => refresh(both[i % 2] as Call, child)));
    expect(uses.filter((r) => r.status === 200)).toHaveLength(1);
  });
});

describe("a session ended at one gateway ends at all", () => {
  const me = (call: Call, token: string) => call("GET", "/v2/auth/me", { headers: { authorization: `Bearer ${token}` } });

  test("logout at one: the refresh token is refused at once everywhere, the access token at once there and within seconds at the other", async () => {
    const email = freshEmail();
    await sendCode(a, email);
    const login = (await codeLogin(a, email, mail.lastCode(email))).body.data as { accessToken: string; refreshToken: string };
    // The other gateway has just read which sessions ended, so its list is as old as it may get.
    expect((await me(b, login.accessToken)).status).toBe(200);
    expect((await a("POST", "/v2/auth/logout", { headers: { authorization: `Bearer ${login.accessToken}` } })).status).toBe(200);
    expect((await me(a, login.accessToken)).status).toBe(401);
    expect((await refresh(b, login.refreshToken)).status).toBe(401);
    clock.advance(ENDED_SYNC_MS);
    expect((await me(b, login.accessToken)).body).toEqual({ success: false, error: "This session has ended (logged out or revoked); log in again" });
  });

  test("a session revoked from the list at one gateway: its access token refused at the other within seconds", async () => {
    const email = freshEmail();
    await sendCode(b, email, "192.0.2.81");
    const kept = (await codeLogin(b, email, mail.lastCode(email))).body.data as { accessToken: string };
    clock.advance(60_000);
    await sendCode(b, email, "192.0.2.81");
    const gone = (await codeLogin(b, email, mail.lastCode(email))).body.data as { accessToken: string };
    expect((await me(b, gone.accessToken)).status).toBe(200);
    const list = await a("GET", "/v2/auth/sessions", { headers: { authorization: `Bearer ${kept.accessToken}` } });
    const id = list.body.data.find((s: { current: boolean }) => !s.current).id as string;
    expect((await a("DELETE", `/v2/auth/sessions/${id}`, { headers: { authorization: `Bearer ${kept.accessToken}` } })).status).toBe(200);
    clock.advance(ENDED_SYNC_MS);
    expect((await me(b, gone.accessToken)).status).toBe(401);
    expect((await me(b, kept.accessToken)).status).toBe(200);
  });
});
