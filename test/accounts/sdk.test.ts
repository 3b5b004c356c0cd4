/**
 * The account SDK (src/sdk/account.ts) against the app, through app.handle(): every endpoint,
 * the token bookkeeping, the refresh on an expired access token, and errors as AccountApiError.
 */
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { AccountApiError, createAccountClient, type TokenPair } from "../../src/sdk/account.ts";
import { accountsApp } from "../support/accounts.ts";

const BOT = "42:sdk-test-bot";

describe("account SDK", () => {
  const t = accountsApp({ env: { STOWAGE_MESSENGER_BOT_TOKEN: BOT } });
  const client = (opts: { tokens?: TokenPair; onTokens?: (p: TokenPair | undefined) => void } = {}) =>
    createAccountClient({ baseUrl: "http://localhost:8080/", source: "sdk-test", fetch: (r) => t.app.handle(r), ...opts });

  test("EVM login in one call, then me, user info, records, refresh", async () => {
    const seen: (TokenPair | undefined)[] = [];
    const c = client({ onTokens: (p) => seen.push(p) });
    const key = privateKeyToAccount(generatePrivateKey());
    const login = await c.loginWithEvmAccount(key);
    expect(login.did).toBe(`did:ethr:0x3d9:${key.address}`);
    expect(login.number).toMatch(/^\d+$/);
    expect(c.tokens?.accessToken).toBe(login.accessToken);
    expect(seen).toHaveLength(1);

    expect(await c.me()).toEqual({ uid: key.address, role: "user" });
    expect((await c.userInfo()).did).toBe(login.did);
    expect(await c.getRecord(5)).toBeNull();
    await c.addRecord(5);
    await c.addRecord(6, { note: "renewed" });
    expect(await c.getRecord(5)).toEqual({ action: 5, points: 100, time: t.clock.now() / 1000 });
    expect((await c.userInfo()).points).toBe(150);

    const refreshed = await c.refresh();
    expect(refreshed.refreshToken).not.toBe(login.refreshToken);
    expect(c.tokens).toEqual(refreshed);
    expect(seen).toHaveLength(2);
  });

  test("an email account links a wallet in one call: the client holds the new session, acting for the wallet's DID", async () => {
    const seen: (TokenPair | undefined)[] = [];
    const c = client({ onTokens: (p) => seen.push(p) });
    const email = "linker@example.com";
    await c.sendEmailCode(email);
    await c.loginWithEmailCode(email, t.mail.lastCode(email));
    const before = c.tokens;
    const wallet = privateKeyToAccount(generatePrivateKey());
    const linked = await c.linkWallet(wallet);
    expect(linked.did).toBe(`did:ethr:0x3d9:${wallet.address}`);
    expect(c.tokens).toEqual({ accessToken: linked.accessToken, refreshToken: linked.refreshToken });
    expect(seen.at(-1)).toEqual(c.tokens);
    expect(c.tokens).not.toEqual(before);
    expect(await c.userInfo()).toMatchObject({ email, address: wallet.address, did: linked.did });
    // The wallet's own sign-in now opens this account.
    const walletClient = client();
    await walletClient.loginWithEvmAccount(wallet);
    expect((await walletClient.me()).email).toBe(email);
  });

  test("an expired access token is refreshed once, even by parallel calls", async () => {
    const c = client();
    await c.loginWithEvmAccount(privateKeyToAccount(generatePrivateKey()));
    const first = c.tokens!;
    t.clock.advance(16 * 60_000);
    const [me, info] = await Promise.all([c.me(), c.userInfo()]);
    expect(me.role).toBe("user");
    expect(info.points).toBe(0);
    expect(c.tokens?.accessToken).not.toBe(first.accessToken);
    // One refresh happened: the session is intact and refreshes again.
    await c.refresh();
  });

  test("email: code, code login, register, password login, reset", async () => {
    const c = client();
    const email = "sdk@example.com";
    expect(await c.sendEmailCode(email)).toContain("code");
    await c.loginWithEmailCode(email, t.mail.lastCode(email));
    expect((await c.me()).email).toBe(email);

    await c.sendEmailCode(email);
    const reg = await c.register(email, t.mail.lastCode(email), "sdk password");
    expect(reg.uid).toStartWith("email:");
    expect((await c.loginWithPassword(email, "sdk password")).uid).toBe(reg.uid);

    await c.sendEmailCode(email);
    await c.resetPassword(email, t.mail.lastCode(email), "newer password");
    const err = await c.loginWithPassword(email, "sdk password").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AccountApiError);
    expect(err).toMatchObject({ status: 401, error: "UNAUTHORIZED", message: "Email or password is wrong" });
  });

  test("messenger and browser logins", async () => {
    const c = client();
    const fields = { auth_date: String(Math.floor(t.clock.now() / 1000)), user: JSON.stringify({ id: 5, first_name: "Ann" }) };
    const check = Object.entries(fields)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k}=${v}`)
      .join("\n");
    const hash = createHmac("sha256", createHmac("sha256", "WebAppData").update(BOT).digest()).update(check).digest("hex");
    await c.loginWithMessenger(new URLSearchParams({ ...fields, hash }).toString());
    expect((await c.me()).uid).toBe("messenger:5");

    const browser = await c.loginWithBrowser("x.y.z").catch((e: unknown) => e);
    expect(browser).toMatchObject({ status: 503, error: "NOT_CONFIGURED" });
  });

  test("failures carry the error name, the status and Retry-After", async () => {
    const c = client();
    const notLoggedIn = await c.me().catch((e: unknown) => e);
    expect(notLoggedIn).toMatchObject({ status: 401, error: "UNAUTHORIZED" });
    await c.sendEmailCode("wait@example.com");
    const early = await c.sendEmailCode("wait@example.com").catch((e: unknown) => e);
    expect(early).toMatchObject({ status: 429, error: "RATE_LIMITED", retryAfter: 60 });
    const badChain = await c.evmChallenge(privateKeyToAccount(generatePrivateKey()).address, 1).catch((e: unknown) => e);
    expect(badChain).toMatchObject({ status: 400, error: "PARAM_ERROR" });
  });

  test("a revoked session surfaces as UNAUTHORIZED after the failed refresh", async () => {
    const c = client();
    await c.loginWithEvmAccount(privateKeyToAccount(generatePrivateKey()));
    const stale = c.tokens!;
    await c.refresh();
    await c.refresh();
    // Replaying the first refresh token revokes the session, as a thief's replay would.
    const thief = client({ tokens: stale });
    expect(await thief.refresh().catch((e: unknown) => e)).toMatchObject({ status: 401, error: "UNAUTHORIZED" });
    t.clock.advance(16 * 60_000);
    expect(await c.me().catch((e: unknown) => e)).toMatchObject({ status: 401, error: "UNAUTHORIZED" });
  });

  test("sessions: listed, one revoked, and logout ends this one at the gateway", async () => {
    const key = privateKeyToAccount(generatePrivateKey());
    const here = client();
    const there = client();
    await here.loginWithEvmAccount(key);
    await there.loginWithEvmAccount(key);
    const listed = await here.sessions();
    expect(listed.map((s) => s.current).sort()).toEqual([false, true]);
    expect(listed[0]).toMatchObject({ method: "evm", source: "sdk-test" });

    const other = listed.find((s) => !s.current)?.id as string;
    await here.revokeSession(other);
    expect(await there.me().catch((e: unknown) => e)).toMatchObject({ status: 401, error: "UNAUTHORIZED" });

    const held = here.tokens!;
    await here.logout();
    expect(here.tokens).toBeUndefined();
    // The tokens it held no longer work anywhere: logout ended the session, not only the client's copy.
    expect(await client({ tokens: held }).me().catch((e: unknown) => e)).toMatchObject({ status: 401 });
    // Logging out again (a session already ended) is no error.
    await client({ tokens: held }).logout();
  });
});
