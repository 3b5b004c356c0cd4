/**
 * Email login (spec 4.2 rows 1, 2, 7, 8, 9; D12): codes, register, password login, reset, and
 * the rule that no answer tells whether an email has an account.
 */
import { describe, expect, test } from "bun:test";
import { accountsApp, bearer } from "../support/accounts.ts";

const MINUTE = 60_000;
let n = 0;
const freshEmail = () => `user${++n}.${crypto.randomUUID().slice(0, 8)}@example.com`;

describe("email codes", () => {
  const t = accountsApp();
  const { call, clock, mail } = t;
  const sendCode = (email: string, ip?: string) => call("POST", "/v2/login/email/code", { body: { email }, ip });
  const codeLogin = (email: string, code: string, ip?: string) => call("POST", "/v2/login/email", { body: { email, code, source: "test", useragent: "bun" }, ip });

  test("a code is mailed (subject and text) and logs in, making the account on first use", async () => {
    const email = freshEmail();
    const sent = await sendCode(email);
    expect(sent).toMatchObject({ status: 200, body: { result: 1, message: expect.any(String) } });
    const code = mail.lastCode(email);
    expect(code).toMatch(/^\d{6}$/);
    expect(mail.sent.at(-1)?.text).toContain(code);

    const login = await codeLogin(email, code);
    expect(login.status).toBe(200);
    expect(login.body).toEqual({ result: 1, data: { accessToken: expect.any(String), refreshToken: expect.any(String) } });
    const me = await call("GET", "/v2/auth/me", { headers: bearer(login.body.data.accessToken) });
    expect(me.body).toEqual({ success: true, data: { uid: expect.stringMatching(/^email:/), email, username: email.split("@")[0], role: "user" } });

    // The same address logs in to the same account, and letter case does not matter.
    await sendCode(` ${email.toUpperCase()} `);
    const again = await codeLogin(email.toUpperCase(), mail.lastCode(email));
    const me2 = await call("GET", "/v2/auth/me", { headers: bearer(again.body.data.accessToken) });
    expect(me2.body.data.uid).toBe(me.body.data.uid);
  });

  test("the answer to a code request is the same for a registered and an unknown email", async () => {
    const known = freshEmail();
    await sendCode(known);
    await codeLogin(known, mail.lastCode(known));
    clock.advance(MINUTE);
    const a = await sendCode(known);
    const b = await sendCode(freshEmail());
    expect(a.status).toBe(b.status);
    expect(a.body).toEqual(b.body);
  });

  test("a code works once", async () => {
    const email = freshEmail();
    await sendCode(email);
    const code = mail.lastCode(email);
    expect((await codeLogin(email, code)).status).toBe(200);
    const second = await codeLogin(email, code);
    expect(second).toMatchObject({ status: 400, body: { result: -1, error: "CODE_INVALID" } });
  });

  test("five wrong tries from the client that asked void its code", async () => {
    const email = freshEmail();
    const ip = "198.51.100.50";
    await sendCode(email, ip);
    const code = mail.lastCode(email);
    const wrong = code === "000000" ? "111111" : "000000";
    for (let i = 0; i < 5; i++) expect((await codeLogin(email, wrong, ip)).body.error).toBe("CODE_INVALID");
    // Five failures from a client the email never signed in from: the next try waits 15 s.
    clock.advance(15_000);
    expect((await codeLogin(email, code, ip)).body.error).toBe("CODE_INVALID");
  });

  test("four wrong tries do not", async () => {
    const email = freshEmail();
    const ip = "198.51.100.51";
    await sendCode(email, ip);
    const code = mail.lastCode(email);
    const wrong = code === "000000" ? "111111" : "000000";
    for (let i = 0; i < 4; i++) await codeLogin(email, wrong, ip);
    expect((await codeLogin(email, code, ip)).status).toBe(200);
  });

  test("a code asked for on one device logs in on another", async () => {
    const email = freshEmail();
    await sendCode(email, "198.51.100.52");
    expect((await codeLogin(email, mail.lastCode(email), "203.0.113.52")).status).toBe(200);
  });

  test("a code expires after 10 minutes", async () => {
    const email = freshEmail();
    await sendCode(email);
    const code = mail.lastCode(email);
    clock.advance(10 * MINUTE);
    expect((await codeLogin(email, code)).body.error).toBe("CODE_INVALID");
  });

  test("a client's new code waits 60 s while its last is open, then replaces it", async () => {
    const email = freshEmail();
    const ip = "198.51.100.53";
    await sendCode(email, ip);
    const first = mail.lastCode(email);
    clock.advance(20_000);
    const early = await sendCode(email, ip);
    expect(early.status).toBe(429);
    expect(early.body.error).toBe("RATE_LIMITED");
    expect(early.headers.get("retry-after")).toBe("40");
    clock.advance(40_000);
    expect((await sendCode(email, ip)).status).toBe(200);
    const second = mail.lastCode(email);
    if (second !== first) expect((await codeLogin(email, first, ip)).body.error).toBe("CODE_INVALID");
    expect((await codeLogin(email, second, ip)).status).toBe(200);
    // Once the code is used, a new one may be asked for at once.
    expect((await sendCode(email, ip)).status).toBe(200);
  });

  test("codes are stored only as keyed hashes", async () => {
    const email = freshEmail();
    await sendCode(email);
    const code = mail.lastCode(email);
    const rows = await t.database.sql.all("SELECT * FROM email_codes");
    expect(JSON.stringify(rows)).not.toContain(code);
  });

  test("a mail that cannot be sent is a 503, and its code is void", async () => {
    const email = freshEmail();
    mail.state.fail = true;
    try {
      const r = await sendCode(email);
      expect(r).toMatchObject({ status: 503, body: { result: -1, error: "UNAVAILABLE" } });
    } finally {
      mail.state.fail = false;
    }
    const open = await t.database.sql.all("SELECT id FROM email_codes WHERE email = $1 AND closed_at IS NULL", [email]);
    expect(open).toEqual([]);
    // Nothing open means no 60-second wait either.
    expect((await sendCode(email)).status).toBe(200);
  });

  test("bad input is a PARAM_ERROR and stores nothing", async () => {
    const countCodes = async () => (await t.database.sql.get<{ n: number }>("SELECT count(*) AS n FROM email_codes"))?.n;
    const before = await countCodes();
    for (const body of [{}, { email: "not-an-email" }, { email: 42 }, { email: `${"a".repeat(250)}@example.com` }]) {
      const r = await call("POST", "/v2/login/email/code", { body });
      expect(r).toMatchObject({ status: 400, body: { result: -1, error: "PARAM_ERROR" } });
    }
    expect((await call("POST", "/v2/login/email", { body: { email: freshEmail(), code: "123456" } })).body.error).toBe("PARAM_ERROR");
    expect(await countCodes()).toBe(before);
  });
});

describe("register, password login, reset", () => {
  const t = accountsApp();
  const { call, clock, mail } = t;
  const codeFor = async (email: string) => {
    clock.advance(MINUTE);
    await call("POST", "/v2/login/email/code", { body: { email } });
    return mail.lastCode(email);
  };
  const register = async (email: string, password: string) =>
    call("POST", "/v2/login/email/register", { body: { email, code: await codeFor(email), password, source: "test" } });
  const passwordLogin = (email: string, password: string, ip?: string) => call("POST", "/v2/login/email/password", { body: { email, password }, ip });

  test("register answers uid, number and tokens; the password then logs in to the same account", async () => {
    const email = freshEmail();
    const r = await register(email, "correct horse");
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      result: 1,
      data: { uid: expect.stringMatching(/^email:/), number: expect.stringMatching(/^\d{6,}$/), accessToken: expect.any(String), refreshToken: expect.any(String) },
      error: "",
    });
    expect(Number(r.body.data.number)).toBeGreaterThanOrEqual(100001);
    const login = await passwordLogin(email, "correct horse");
    expect(login.status).toBe(200);
    expect(login.body.data).toMatchObject({ uid: r.body.data.uid, number: r.body.data.number });
    expect(login.body.error).toBe("");
    const info = await call("GET", "/v2/user/info", { headers: bearer(login.body.data.accessToken) });
    expect(info.body.data).toMatchObject({ email, points: 0, address: "", did: "" });
  });

  test("passwords are stored as argon2id hashes", async () => {
    const email = freshEmail();
    await register(email, "a fine password");
    const row = await t.database.sql.get<{ passwordHash: string }>('SELECT password_hash AS "passwordHash" FROM users WHERE email = $1', [email]);
    expect(row?.passwordHash).toStartWith("$argon2id$");
    expect(row?.passwordHash).not.toContain("a fine password");
  });

  test("a password must be 8 to 128 characters, counted as characters", async () => {
    for (const bad of ["1234567", "x".repeat(129), "🔑".repeat(7)]) {
      const r = await register(freshEmail(), bad);
      expect(r).toMatchObject({ status: 400, body: { result: -1, error: "PARAM_ERROR" } });
    }
    for (const good of ["12345678", "x".repeat(128), "🔑".repeat(8)]) expect((await register(freshEmail(), good)).status).toBe(200);
  });

  test("a bad password leaves the code usable (bad input changes nothing)", async () => {
    const email = freshEmail();
    const code = await codeFor(email);
    expect((await call("POST", "/v2/login/email/register", { body: { email, code, password: "short", source: "t" } })).status).toBe(400);
    expect((await call("POST", "/v2/login/email/register", { body: { email, code, password: "long enough", source: "t" } })).status).toBe(200);
  });

  test("registering needs a valid code", async () => {
    const r = await call("POST", "/v2/login/email/register", { body: { email: freshEmail(), code: "123456", password: "long enough", source: "t" } });
    expect(r).toMatchObject({ status: 400, body: { result: -1, error: "CODE_INVALID" } });
  });

  test("an account made by code login can add a password; one with a password cannot register again", async () => {
    const email = freshEmail();
    const byCode = await call("POST", "/v2/login/email", { body: { email, code: await codeFor(email), source: "t" } });
    const uid = (await call("GET", "/v2/auth/me", { headers: bearer(byCode.body.data.accessToken) })).body.data.uid;
    const reg = await register(email, "now with a password");
    expect(reg.body.data.uid).toBe(uid);
    const again = await register(email, "another password");
    expect(again).toMatchObject({ status: 409, body: { result: -1, error: "CONFLICT" } });
  });

  test("a wrong password and an unknown email read the same", async () => {
    const email = freshEmail();
    await register(email, "the right one");
    const wrong = await passwordLogin(email, "the wrong one");
    const unknown = await passwordLogin(freshEmail(), "the right one");
    const noPassword = freshEmail();
    await call("POST", "/v2/login/email", { body: { email: noPassword, code: await codeFor(noPassword), source: "t" } });
    const passwordless = await passwordLogin(noPassword, "anything at all");
    for (const r of [wrong, unknown, passwordless]) expect(r).toMatchObject({ status: 401, body: { result: -1, error: "UNAUTHORIZED", message: "Email or password is wrong" } });
  });

  test("ten wrong passwords an hour from one client block that client for the email, right password included, until the hour is over", async () => {
    const email = freshEmail();
    const ip = "198.51.100.54";
    await register(email, "the right one");
    for (let i = 0; i < 10; i++) expect((await passwordLogin(email, `wrong ${i}`, ip)).status).toBe(401);
    const blocked = await passwordLogin(email, "the right one", ip);
    expect(blocked.status).toBe(429);
    expect(blocked.body.error).toBe("RATE_LIMITED");
    expect(blocked.body.message).toContain("from your network");
    expect(Number(blocked.headers.get("retry-after"))).toBeGreaterThan(0);
    clock.advance(60 * MINUTE);
    expect((await passwordLogin(email, "the right one", ip)).status).toBe(200);
    // Thirteen argon2id hashes: seconds on a loaded two-core machine.
  }, 30_000);

  test("25 wrong passwords at once from clients the email never signed in from: no more than ten are checked, the rest are 429", async () => {
    const email = freshEmail();
    await register(email, "the right one");
    const answers = await Promise.all(Array.from({ length: 25 }, (_, i) => passwordLogin(email, `guess ${i}`)));
    expect(answers.filter((a) => a.status === 401)).toHaveLength(10);
    expect(answers.filter((a) => a.status === 429)).toHaveLength(15);
    // The email now backs off such clients for the rest of its day.
    clock.advance(24 * 60 * MINUTE);
  }, 30_000);

  test("a reset sets the new password and ends every session", async () => {
    const email = freshEmail();
    const reg = await register(email, "old password");
    const reset = await call("POST", "/v2/login/email/password/reset", { body: { email, code: await codeFor(email), new_password: "new password" } });
    expect(reset).toMatchObject({ status: 200, body: { result: 1 } });
    expect((await passwordLogin(email, "old password")).status).toBe(401);
    expect((await passwordLogin(email, "new password")).status).toBe(200);
    const refresh = await call("POST", "/v2/login/refresh", { headers: { authorization: reg.body.data.refreshToken } });
    expect(refresh.status).toBe(401);
    expect(refresh.body.message).toContain("revoked");
  });

  test("a reset needs a valid code and a valid password", async () => {
    const email = freshEmail();
    await register(email, "old password");
    const noCode = await call("POST", "/v2/login/email/password/reset", { body: { email, code: "000000", new_password: "new password" } });
    expect(noCode.body.error).toBe("CODE_INVALID");
    const short = await call("POST", "/v2/login/email/password/reset", { body: { email, code: await codeFor(email), new_password: "short" } });
    expect(short.body.error).toBe("PARAM_ERROR");
    const missing = await call("POST", "/v2/login/email/password/reset", { body: { email, code: "000000" } });
    expect(missing.body.error).toBe("PARAM_ERROR");
    expect((await passwordLogin(email, "old password")).status).toBe(200);
  });
});
