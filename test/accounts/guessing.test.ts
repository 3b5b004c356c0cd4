/**
 * Guessing email codes and passwords (D12, D24), and what a stranger can do to an owner:
 * - every per-client limit counts an IPv6 /64 as one client;
 * - failed codes per email are capped a day, with a growing delay before the cap, for clients
 *   the email never signed in from;
 * - a stranger's wrong passwords and codes, and the codes a stranger asks for, neither block the
 *   owner's own client nor void or replace the owner's code;
 * - a wrong code costs no argon2id run, and argon2id runs are bounded per gateway.
 */
import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { accountsApp, type Call } from "../support/accounts.ts";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
let n = 0;
const freshEmail = () => `guess${++n}.${crypto.randomUUID().slice(0, 8)}@example.com`;
let strangers = 0;
/** A client of its own: a fresh IPv6 /64 each time, as an attacker with a /48 has 65,536 of. */
const stranger = () => `2001:db8:${(++strangers).toString(16)}:${(strangers >> 8).toString(16)}::1`;
const wrongOf = (code: string) => (code === "000000" ? "111111" : "000000");

function email(call: Call) {
  return {
    sendCode: (email: string, ip: string) => call("POST", "/v2/login/email/code", { body: { email }, ip }),
    codeLogin: (email: string, code: string, ip: string) => call("POST", "/v2/login/email", { body: { email, code, source: "test" }, ip }),
    passwordLogin: (email: string, password: string, ip: string) => call("POST", "/v2/login/email/password", { body: { email, password }, ip }),
    register: (email: string, code: string, password: string, ip: string) =>
      call("POST", "/v2/login/email/register", { body: { email, code, password, source: "test" }, ip }),
    reset: (email: string, code: string, password: string, ip: string) =>
      call("POST", "/v2/login/email/password/reset", { body: { email, code, new_password: password }, ip }),
  };
}

describe("every per-client limit counts an IPv6 /64 as one client", () => {
  const { call } = accountsApp();
  const api = email(call);

  test("code sends: ten a minute from a whole /64, whichever of its addresses asks", async () => {
    for (let i = 1; i <= 10; i++) expect((await api.sendCode(freshEmail(), `2001:db8:64:1::${i.toString(16)}`)).status).toBe(200);
    const over = await api.sendCode(freshEmail(), "2001:db8:64:1:ffff:ffff:ffff:ffff");
    expect(over).toMatchObject({ status: 429, body: { error: "RATE_LIMITED" } });
    // The same /64 written another way, and the next /64 (another client).
    expect((await api.sendCode(freshEmail(), "2001:DB8:64:1:0:0:0:abc")).status).toBe(429);
    expect((await api.sendCode(freshEmail(), "2001:db8:64:2::1")).status).toBe(200);
  });

  test("login attempts: thirty a minute from a whole /64", async () => {
    for (let i = 1; i <= 30; i++) expect((await api.codeLogin(freshEmail(), "123456", `2001:db8:64:3:${i.toString(16)}::1`)).body.error).toBe("CODE_INVALID");
    expect((await api.codeLogin(freshEmail(), "123456", "2001:db8:64:3:beef::2")).status).toBe(429);
    expect((await api.passwordLogin(freshEmail(), "whatever1", "2001:db8:64:3::9")).status).toBe(429);
  });
});

describe("failed codes per email: a growing delay, then a daily cap, for clients it never signed in from", () => {
  const { call, clock, mail } = accountsApp();
  const api = email(call);

  test("5 at once, then each waits twice as long as the last (from 15 s, at most 15 min), 20 a day, whatever clients try", async () => {
    const target = freshEmail();
    expect((await api.sendCode(target, "192.0.2.20")).status).toBe(200);
    const wrong = wrongOf(mail.lastCode(target));
    for (let i = 0; i < 5; i++) expect((await api.codeLogin(target, wrong, stranger())).body.error).toBe("CODE_INVALID");

    const waits: number[] = [];
    for (let failures = 5; failures < 20; failures++) {
      const early = await api.codeLogin(target, wrong, stranger());
      expect(early).toMatchObject({ status: 429, body: { error: "RATE_LIMITED" } });
      const wait = Number(early.headers.get("retry-after"));
      waits.push(wait);
      clock.advance(wait * 1000 - 1000);
      expect((await api.codeLogin(target, wrong, stranger())).status).toBe(429);
      clock.advance(1000);
      expect((await api.codeLogin(target, wrong, stranger())).body.error).toBe("CODE_INVALID");
    }
    expect(waits).toEqual([15, 30, 60, 120, 240, 480, 900, 900, 900, 900, 900, 900, 900, 900, 900]);

    // Twenty failures: no more today, however long a client waits between tries.
    const spent = waits.reduce((a, b) => a + b, 0) * 1000;
    const capped = await api.codeLogin(target, wrong, stranger());
    expect(capped).toMatchObject({ status: 429, body: { error: "RATE_LIMITED" } });
    expect(capped.body.message).toContain("today");
    expect(Number(capped.headers.get("retry-after"))).toBe((DAY - spent) / 1000);
    clock.advance(HOUR);
    expect((await api.codeLogin(target, wrong, stranger())).status).toBe(429);
    // The next day starts afresh.
    clock.advance(DAY - spent - HOUR);
    expect((await api.codeLogin(target, wrong, stranger())).body.error).toBe("CODE_INVALID");
  });

  test("another email is not held back by this one's failures", async () => {
    const target = freshEmail();
    await api.sendCode(target, "192.0.2.21");
    const wrong = wrongOf(mail.lastCode(target));
    for (let i = 0; i < 5; i++) await api.codeLogin(target, wrong, stranger());
    expect((await api.codeLogin(target, wrong, stranger())).status).toBe(429);
    const other = freshEmail();
    await api.sendCode(other, "192.0.2.22");
    expect((await api.codeLogin(other, mail.lastCode(other), stranger())).status).toBe(200);
  });
});

describe("a stranger does not lock the owner out", () => {
  const { call, clock, mail } = accountsApp();
  const api = email(call);
  const OWNER = "203.0.113.10";

  /** An account whose owner signed in from OWNER (so OWNER is a client the email knows). */
  async function ownedAccount(password?: string) {
    const target = freshEmail();
    clock.advance(MINUTE);
    await api.sendCode(target, OWNER);
    const first = password ? await api.register(target, mail.lastCode(target), password, OWNER) : await api.codeLogin(target, mail.lastCode(target), OWNER);
    expect(first.status).toBe(200);
    clock.advance(MINUTE);
    return target;
  }

  test("wrong codes from other clients never void the owner's code", async () => {
    const target = freshEmail();
    // A first login from this owner's client: none yet, so it gets no exemption.
    expect((await api.sendCode(target, "203.0.113.11")).status).toBe(200);
    const code = mail.lastCode(target);
    for (let i = 0; i < 5; i++) expect((await api.codeLogin(target, wrongOf(code), stranger())).body.error).toBe("CODE_INVALID");
    // The owner waits out the email's delay, as anyone must from a client it does not know yet.
    clock.advance(15_000);
    expect((await api.codeLogin(target, code, "203.0.113.11")).status).toBe(200);
  });

  test("with strangers' wrong codes past the daily cap, the owner's own client still logs in with its code at once", async () => {
    const target = await ownedAccount();
    await api.sendCode(target, OWNER);
    const code = mail.lastCode(target);
    for (let failures = 0; failures < 20; failures++) {
      const r = await api.codeLogin(target, wrongOf(code), stranger());
      if (r.status === 429) {
        clock.advance(Number(r.headers.get("retry-after")) * 1000);
        failures--;
      } else expect(r.body.error).toBe("CODE_INVALID");
    }
    expect((await api.codeLogin(target, wrongOf(code), stranger())).body.message).toContain("today");
    // The code stays open: its ten minutes were spent waiting; ask for a new one, from the owner's client.
    expect((await api.sendCode(target, OWNER)).status).toBe(200);
    expect((await api.codeLogin(target, mail.lastCode(target), OWNER)).status).toBe(200);
  });

  test("a code a stranger asks for does not replace the owner's", async () => {
    const target = freshEmail();
    await api.sendCode(target, "203.0.113.12");
    const owners = mail.lastCode(target);
    clock.advance(MINUTE);
    expect((await api.sendCode(target, stranger())).status).toBe(200);
    expect((await api.codeLogin(target, owners, "203.0.113.12")).status).toBe(200);
  });

  test("strangers who spent the email's hourly codes leave the owner's own client able to get one", async () => {
    const target = await ownedAccount();
    // Five an hour from clients the email does not know; the owner's first code was one of them.
    for (let i = 0; i < 4; i++) expect((await api.sendCode(target, stranger())).status).toBe(200);
    expect((await api.sendCode(target, stranger())).status).toBe(429);
    const sent = await api.sendCode(target, OWNER);
    expect(sent.status).toBe(200);
    expect((await api.codeLogin(target, mail.lastCode(target), OWNER)).status).toBe(200);
  });

  test("strangers' wrong passwords do not block the owner's right one from the owner's client", async () => {
    const target = await ownedAccount("the owner's password");
    // Ten wrong passwords from anyone used to block the email for an hour.
    for (let i = 0; i < 10; i++) expect((await api.passwordLogin(target, `guess ${i}`, stranger())).status).toBe(401);
    const held = await api.passwordLogin(target, "guess 10", stranger());
    expect(held).toMatchObject({ status: 429, body: { error: "RATE_LIMITED" } });
    expect((await api.passwordLogin(target, "the owner's password", OWNER)).status).toBe(200);
  }, 60_000);
});

describe("argon2id: a wrong code costs none, and few run at once", () => {
  afterEach(() => {
    for (const m of mocks.splice(0)) m.mockRestore();
  });
  const mocks: { mockRestore(): void }[] = [];

  test("register and reset with a wrong code hash nothing; with the right one, once", async () => {
    const { call, mail } = accountsApp();
    const api = email(call);
    const hash = spyOn(Bun.password, "hash");
    mocks.push(hash);
    const target = freshEmail();
    await api.sendCode(target, "192.0.2.30");
    const code = mail.lastCode(target);
    expect((await api.register(target, wrongOf(code), "a long enough password", "192.0.2.30")).body.error).toBe("CODE_INVALID");
    expect((await api.reset(target, wrongOf(code), "a long enough password", "192.0.2.30")).body.error).toBe("CODE_INVALID");
    expect((await api.register(freshEmail(), "123456", "a long enough password", "192.0.2.31")).body.error).toBe("CODE_INVALID");
    expect(hash).toHaveBeenCalledTimes(0);
    expect((await api.register(target, code, "a long enough password", "192.0.2.30")).status).toBe(200);
    expect(hash).toHaveBeenCalledTimes(1);
  });

  test("with STOWAGE_PASSWORD_HASHES=2, at most two run at once; a few more wait, the rest are 503 with Retry-After", async () => {
    const { call } = accountsApp({ env: { STOWAGE_PASSWORD_HASHES: "2" } });
    const api = email(call);
    const stored = await Bun.password.hash("unrelated", { algorithm: "argon2id" });
    let running = 0;
    let most = 0;
    let open = false;
    const held: (() => void)[] = [];
    /** A run that lasts until the test opens the gate (a slow argon2id, under the test's control). */
    const slow = <T>(value: T) =>
      new Promise<T>((resolve) => {
        most = Math.max(most, ++running);
        const end = () => {
          running--;
          resolve(value);
        };
        if (open) end();
        else held.push(end);
      });
    // Hashes (the unknown emails' stand-in hash) end at once; checks last until the gate opens.
    const hash = spyOn(Bun.password, "hash").mockImplementation(async () => {
      most = Math.max(most, running + 1);
      return stored;
    });
    const verify = spyOn(Bun.password, "verify").mockImplementation(() => slow(false));
    mocks.push(hash, verify);

    const answers: { status: number; retryAfter: string | null }[] = [];
    const all = Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const r = await api.passwordLogin(freshEmail(), "some password", `192.0.2.${100 + i}`);
        answers.push({ status: r.status, retryAfter: r.headers.get("retry-after") });
      }),
    );
    // With the checks held: two run, sixteen wait, and the other twelve are refused at once. (Bounded:
    // without the bound, every check would start and this would end on `running` alone.)
    const deadline = Date.now() + 20_000;
    while (answers.length < 12 && running <= 2 && Date.now() < deadline) await Bun.sleep(1);
    expect(most).toBeLessThanOrEqual(2);
    expect(answers).toHaveLength(12);
    for (const a of answers) expect(a).toEqual({ status: 503, retryAfter: "1" });
    open = true;
    for (const end of held.splice(0)) end();
    await all;
    expect(most).toBeLessThanOrEqual(2);
    // The waiting ones were checked in turn: answered as a wrong password is.
    expect(answers.filter((a) => a.status === 401)).toHaveLength(18);
  });
});
