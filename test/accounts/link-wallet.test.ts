/**
 * Linking a wallet to an account that has none (GET /v2/user/link-wallet/challenge, POST
 * /v2/user/link-wallet): an email account gains the wallet's address and DID, its new session acts
 * for the DID, and the wallet's sign-in opens that account from then on. And every way to use it
 * for a takeover is refused with nothing changed: a wallet that is another account's (its own, or
 * one it was linked to), an account that has a wallet, a message for another account or for a
 * sign-in, another key's signature, a wallet whose DID has another owner, two links at once.
 */
import { describe, expect, test } from "bun:test";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { accountsApp, bearer, claimsOf, evmLogin, ORIGIN, type Call, type Reply } from "../support/accounts.ts";
import { selfOwned } from "../support/app.ts";
import type { DidResolver } from "../../src/identity/resolver.ts";

const newKey = () => privateKeyToAccount(generatePrivateKey());
const didOf = (key: PrivateKeyAccount) => `did:ethr:0x3d9:${key.address}`;

/** A registry where `taken`'s DID was given to another key: its own address may no longer sign for it. */
function registryWithout(taken: string): DidResolver {
  return { canSign: async (did, signer) => (did.address === taken ? false : selfOwned.canSign(did, signer)) };
}

function setup(resolver?: DidResolver) {
  const app = accountsApp(resolver ? { accounts: { resolver } } : {});
  let n = 0;
  /** An email-code account: its tokens and its email. */
  async function emailAccount(email = `user-${++n}-${crypto.randomUUID().slice(0, 8)}@example.org`) {
    const ip = `email-client-${n}`;
    expect((await app.call("POST", "/v2/login/email/code", { body: { email }, ip })).status).toBe(200);
    const r = await app.call("POST", "/v2/login/email", { body: { email, code: app.mail.lastCode(email), source: "test" }, ip });
    expect(r.status).toBe(200);
    return { email, accessToken: r.body.data.accessToken as string, refreshToken: r.body.data.refreshToken as string };
  }
  /** The link challenge for `address`, asked with `token`. */
  const challenge = (token: string, address: string, origin = ORIGIN) =>
    app.call("GET", `/v2/user/link-wallet/challenge?address=${address}`, { headers: { ...bearer(token), origin } });
  const post = (token: string, message: string, signature: string) => app.call("POST", "/v2/user/link-wallet", { headers: bearer(token), body: { message, signature, source: "test" } });
  /** Challenge, sign with `wallet`, link: the whole round. */
  async function link(token: string, wallet: PrivateKeyAccount): Promise<Reply> {
    const c = await challenge(token, wallet.address);
    if (c.status !== 200) return c;
    return post(token, c.body.data, await wallet.signMessage({ message: c.body.data }));
  }
  const info = async (token: string) => (await app.call("GET", "/v2/user/info", { headers: bearer(token) })).body.data;
  const me = async (token: string) => (await app.call("GET", "/v2/auth/me", { headers: bearer(token) })).body;
  const count = async (address: string) =>
    (await app.database.sql.get<{ n: number }>("SELECT count(*) AS n FROM users WHERE uid = $1 OR address = $1", [address]))?.n;
  return { app, call: app.call as Call, emailAccount, challenge, post, link, info, me, count };
}

describe("linking a wallet to an email account", () => {
  test("the account gets the wallet's address and DID, a session acting for the DID, and the wallet's sign-in opens it", async () => {
    const t = setup();
    const account = await t.emailAccount();
    const wallet = newKey();
    const before = await t.me(account.accessToken);

    // The message names the account, so the wallet's user sees what they agree to.
    const c = await t.challenge(account.accessToken, wallet.address);
    expect(c.status).toBe(200);
    const message = c.body.data as string;
    const number = (await t.app.database.sql.get<{ number: number }>("SELECT number FROM users WHERE email = $1", [account.email]))?.number;
    expect(message).toContain(`Link this wallet to Stowage account ${number} (${account.email})`);
    expect(message.split("\n")[1]).toBe(wallet.address);

    const r = await t.post(account.accessToken, message, await wallet.signMessage({ message }));
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual({ did: didOf(wallet), number: String(number), accessToken: expect.any(String), refreshToken: expect.any(String) });
    // The new session acts for the DID, with the wallet as its key; the one that asked has ended.
    expect(claimsOf(r.body.data.accessToken)).toMatchObject({ sub: before.data.uid, did: didOf(wallet), key: wallet.address });
    expect((await t.call("GET", "/v2/user/info", { headers: bearer(account.accessToken) })).status).toBe(401);
    expect(await t.info(r.body.data.accessToken)).toMatchObject({ email: account.email, address: wallet.address, did: didOf(wallet) });

    // The wallet's sign-in opens this account (no account of its own is made), acting for the DID.
    const signIn = await evmLogin(t.call, wallet);
    expect(signIn.status).toBe(200);
    expect(signIn.body.data).toMatchObject({ did: didOf(wallet), number: String(number) });
    expect((await t.me(signIn.body.data.accessToken)).data).toEqual(before.data);
    expect(await t.count(wallet.address)).toBe(1);

    // The refreshed session still acts for the DID.
    const refreshed = await t.call("POST", "/v2/login/refresh", { headers: { authorization: r.body.data.refreshToken } });
    expect(refreshed.status).toBe(200);
    expect(claimsOf(refreshed.body.data.accessToken)).toMatchObject({ did: didOf(wallet), key: wallet.address });
  });

  test("sessions that signed nothing (email code, other devices) go on after the link, acting for no DID", async () => {
    const t = setup();
    const account = await t.emailAccount();
    // A second device's session, begun before the link.
    const ip = "second-device";
    await t.call("POST", "/v2/login/email/code", { body: { email: account.email }, ip });
    const other = await t.call("POST", "/v2/login/email", { body: { email: account.email, code: t.app.mail.lastCode(account.email), source: "test" }, ip });
    expect(other.status).toBe(200);

    expect((await t.link(account.accessToken, newKey())).status).toBe(200);

    const refreshed = await t.call("POST", "/v2/login/refresh", { headers: { authorization: other.body.data.refreshToken } });
    expect(refreshed.status).toBe(200);
    expect(claimsOf(refreshed.body.data.accessToken).did).toBeUndefined();
    // A new email sign-in likewise: the account has a DID, the session that proved no key does not.
    const again = await t.call("POST", "/v2/login/email/code", { body: { email: account.email }, ip: "third-device" });
    expect(again.status).toBe(200);
    const login = await t.call("POST", "/v2/login/email", { body: { email: account.email, code: t.app.mail.lastCode(account.email), source: "test" }, ip: "third-device" });
    expect(claimsOf(login.body.data.accessToken).did).toBeUndefined();
    expect((await t.info(login.body.data.accessToken)).did).toMatch(/^did:ethr:0x3d9:0x/);
  });
});

describe("linking refuses every takeover, and changes nothing when it does", () => {
  test("a wallet with an account of its own (it signed in before) is not linked", async () => {
    const t = setup();
    const wallet = newKey();
    const own = await evmLogin(t.call, wallet);
    expect(own.status).toBe(200);
    const account = await t.emailAccount();
    const r = await t.link(account.accessToken, wallet);
    expect(r).toMatchObject({ status: 409, body: { result: -1, error: "CONFLICT", message: expect.stringContaining("already belongs to another account") } });
    expect(await t.info(account.accessToken)).toMatchObject({ address: "", did: "" });
    expect((await t.me(own.body.data.accessToken)).data.uid).toBe(wallet.address);
  });

  test("a wallet linked to one account is not linked to another, and its sign-in still opens the first", async () => {
    const t = setup();
    const [first, second] = [await t.emailAccount(), await t.emailAccount()];
    const wallet = newKey();
    const linked = await t.link(first.accessToken, wallet);
    expect(linked.status).toBe(200);
    expect(await t.link(second.accessToken, wallet)).toMatchObject({ status: 409, body: { error: "CONFLICT" } });
    expect(await t.info(second.accessToken)).toMatchObject({ address: "", did: "" });
    const signIn = await evmLogin(t.call, wallet);
    expect((await t.me(signIn.body.data.accessToken)).data.email).toBe(first.email);
  });

  test("an account that has a wallet links no other: a wallet account, and an account linked already", async () => {
    const t = setup();
    const walletAccount = await evmLogin(t.call, newKey());
    expect(await t.challenge(walletAccount.body.data.accessToken, newKey().address)).toMatchObject({ status: 409, body: { error: "CONFLICT", message: expect.stringContaining("already has a wallet") } });

    const account = await t.emailAccount();
    const first = newKey();
    const linked = await t.link(account.accessToken, first);
    expect(await t.link(linked.body.data.accessToken, newKey())).toMatchObject({ status: 409, body: { error: "CONFLICT" } });
    expect((await t.info(linked.body.data.accessToken)).address).toBe(first.address);
  });

  test("a message for another account, or a sign-in message, links nothing; a link message signs in nowhere", async () => {
    const t = setup();
    const [victim, attacker] = [await t.emailAccount(), await t.emailAccount()];
    const wallet = newKey();
    // The wallet signed a link to the victim's account; the attacker posts it for theirs.
    const forVictim = (await t.challenge(victim.accessToken, wallet.address)).body.data as string;
    const signed = await wallet.signMessage({ message: forVictim });
    expect(await t.post(attacker.accessToken, forVictim, signed)).toMatchObject({ status: 401, body: { error: "UNAUTHORIZED", message: expect.stringContaining("issued for something else") } });
    // Nor does it sign in as the wallet.
    expect(await t.call("POST", "/v2/login/evm", { body: { message: forVictim, signature: signed, source: "test" } })).toMatchObject({ status: 401, body: { message: expect.stringContaining("issued for something else") } });
    // A sign-in message the wallet signed links nothing.
    const signInMessage = (await t.call("GET", `/v2/login/evm/challenge?address=${wallet.address}`, { headers: { origin: ORIGIN } })).body.data as string;
    expect(await t.post(attacker.accessToken, signInMessage, await wallet.signMessage({ message: signInMessage }))).toMatchObject({ status: 401 });
    expect(await t.info(attacker.accessToken)).toMatchObject({ address: "", did: "" });
    expect(await t.count(wallet.address)).toBe(0);
    // The victim's own message still links, to the victim's account.
    expect((await t.post(victim.accessToken, forVictim, signed)).status).toBe(200);
  });

  test("another key's signature, a tampered message, a used one and a foreign origin are refused", async () => {
    const t = setup();
    const account = await t.emailAccount();
    const wallet = newKey();
    const message = (await t.challenge(account.accessToken, wallet.address)).body.data as string;
    expect(await t.post(account.accessToken, message, await newKey().signMessage({ message }))).toMatchObject({ status: 401, body: { message: "The signature does not match the message's address" } });
    const fresh = (await t.challenge(account.accessToken, wallet.address)).body.data as string;
    const tampered = fresh.replace("Link this wallet", "Link that wallet");
    expect(await t.post(account.accessToken, tampered, await wallet.signMessage({ message: tampered }))).toMatchObject({ status: 401, body: { message: expect.stringContaining("differs from the challenge") } });
    expect(await t.challenge(account.accessToken, wallet.address, "https://evil.example")).toMatchObject({ status: 403 });
    const ok = (await t.challenge(account.accessToken, wallet.address)).body.data as string;
    const signature = await wallet.signMessage({ message: ok });
    const linked = await t.post(account.accessToken, ok, signature);
    expect(linked.status).toBe(200);
    expect(await t.post(linked.body.data.accessToken, ok, signature)).toMatchObject({ status: 401, body: { message: expect.stringContaining("already used") } });
    expect(await t.count(wallet.address)).toBe(1);
  });

  test("without an access token there is no challenge and no link", async () => {
    const t = setup();
    const wallet = newKey();
    expect(await t.call("GET", `/v2/user/link-wallet/challenge?address=${wallet.address}`, { headers: { origin: ORIGIN } })).toMatchObject({ status: 401, body: { error: "UNAUTHORIZED" } });
    expect(await t.call("POST", "/v2/user/link-wallet", { body: { message: "x", signature: "0x00", source: "test" } })).toMatchObject({ status: 401 });
  });

  test("a wallet whose DID the registry gives to another key is not linked", async () => {
    const wallet = newKey();
    const t = setup(registryWithout(wallet.address));
    const account = await t.emailAccount();
    expect(await t.link(account.accessToken, wallet)).toMatchObject({ status: 401, body: { message: expect.stringContaining("may no longer sign for its own DID") } });
    expect(await t.info(account.accessToken)).toMatchObject({ address: "", did: "" });
  });

  test("two accounts linking one wallet at once: one is linked, the other refused", async () => {
    const t = setup();
    const accounts = await Promise.all([1, 2, 3].map(() => t.emailAccount()));
    const wallet = newKey();
    const messages = await Promise.all(accounts.map(async (a) => (await t.challenge(a.accessToken, wallet.address)).body.data as string));
    const signatures = await Promise.all(messages.map((message) => wallet.signMessage({ message })));
    const results = await Promise.all(accounts.map((a, i) => t.post(a.accessToken, messages[i] as string, signatures[i] as string)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409]);
    expect(await t.count(wallet.address)).toBe(1);
  });

  test("a link and the wallet's first sign-in at once: the wallet ends with one account, whichever came first", async () => {
    const t = setup();
    const account = await t.emailAccount();
    const wallet = newKey();
    const message = (await t.challenge(account.accessToken, wallet.address)).body.data as string;
    const signature = await wallet.signMessage({ message });
    const [linked, signedIn] = await Promise.all([t.post(account.accessToken, message, signature), evmLogin(t.call, wallet)]);
    expect(signedIn.status).toBe(200);
    expect(await t.count(wallet.address)).toBe(1);
    const opened = (await t.me(signedIn.body.data.accessToken)).data.uid;
    if (linked.status === 200) expect(opened).toMatch(/^email:/);
    else expect([linked.status, opened]).toEqual([409, wallet.address]);
  });
});
