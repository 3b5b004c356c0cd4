/**
 * Tokens (D3), /v2/auth/me (spec 2.11, 7.2) and /v2/user/info (2.12), through app.handle().
 * Logins here are EVM logins with plain keys: they need no chain.
 */
import { describe, expect, test } from "bun:test";
import { SignJWT } from "jose";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { RegistryUnavailable, type DidResolver } from "../../src/identity/resolver.ts";
import { accountsApp, bearer, claimsOf, evmLogin } from "../support/accounts.ts";

const MINUTE = 60_000;
const newKey = () => privateKeyToAccount(generatePrivateKey());

describe("tokens", () => {
  const t = accountsApp();
  const { call, clock } = t;

  test("a login answers an access and a refresh token with the claims of D3", async () => {
    const key = newKey();
    const r = await evmLogin(call, key);
    expect(r.status).toBe(200);
    const { accessToken, refreshToken, did } = r.body.data;
    const access = claimsOf(accessToken);
    const refresh = claimsOf(refreshToken);
    // `key`: the key that signed in for the DID, asked of the registry at every use.
    expect(access).toMatchObject({ sub: key.address, did, key: key.address, typ: "access" });
    expect(refresh).toMatchObject({ sub: key.address, did, key: key.address, typ: "refresh" });
    expect(access.exp - access.iat).toBe(15 * 60);
    expect(refresh.exp - refresh.iat).toBe(30 * 24 * 3600);
    expect(access.iat).toBe(clock.now() / 1000);
    expect(access.jti).not.toBe(refresh.jti);
  });

  test("refresh tokens are stored only as hashes", async () => {
    const { refreshToken } = (await evmLogin(call, newKey())).body.data;
    const rows = await t.database.sql.all("SELECT * FROM refresh_tokens");
    expect(rows.length).toBeGreaterThan(0);
    const dump = JSON.stringify(rows);
    expect(dump).not.toContain(refreshToken);
    expect(dump).not.toContain(refreshToken.split(".")[2]);
  });

  test("refresh answers a new pair; the old token works until the new one is used, then reuse revokes the session", async () => {
    const r1 = (await evmLogin(call, newKey())).body.data.refreshToken;
    const first = await call("POST", "/v2/login/refresh", { headers: { authorization: r1 } });
    expect(first.status).toBe(200);
    expect(first.body.result).toBe(1);
    const { accessToken: a2, refreshToken: r2 } = first.body.data;
    expect((await call("GET", "/v2/auth/me", { headers: bearer(a2) })).body.success).toBe(true);

    // r2 not used yet: r1 still refreshes (a client that lost the answer can retry).
    const retry = await call("POST", "/v2/login/refresh", { headers: { authorization: r1 } });
    expect(retry.status).toBe(200);

    const second = await call("POST", "/v2/login/refresh", { headers: { authorization: r2 } });
    expect(second.status).toBe(200);
    const r3 = second.body.data.refreshToken;
    // r2 stays valid until r3 is used.
    expect((await call("POST", "/v2/login/refresh", { headers: { authorization: r2 } })).status).toBe(200);

    const reuse = await call("POST", "/v2/login/refresh", { headers: { authorization: r1 } });
    expect(reuse.status).toBe(401);
    expect(reuse.body).toMatchObject({ result: -1, error: "UNAUTHORIZED" });
    expect(reuse.body.message).toContain("revoked");
    // The whole family is gone, the newest token included.
    const after = await call("POST", "/v2/login/refresh", { headers: { authorization: r3 } });
    expect(after.status).toBe(401);
    expect(after.body.message).toContain("revoked");
  });

  test("a sibling token issued from an old token dies once the other sibling is used", async () => {
    const r1 = (await evmLogin(call, newKey())).body.data.refreshToken;
    const a = (await call("POST", "/v2/login/refresh", { headers: { authorization: r1 } })).body.data.refreshToken;
    const b = (await call("POST", "/v2/login/refresh", { headers: { authorization: r1 } })).body.data.refreshToken;
    expect((await call("POST", "/v2/login/refresh", { headers: { authorization: a } })).status).toBe(200);
    const stolen = await call("POST", "/v2/login/refresh", { headers: { authorization: b } });
    expect(stolen.status).toBe(401);
    expect(stolen.body.message).toContain("already replaced");
  });

  test("reuse in one session leaves the account's other sessions alone", async () => {
    const key = newKey();
    const s1 = (await evmLogin(call, key)).body.data.refreshToken;
    const s2 = (await evmLogin(call, key)).body.data.refreshToken;
    const next = (await call("POST", "/v2/login/refresh", { headers: { authorization: s1 } })).body.data.refreshToken;
    await call("POST", "/v2/login/refresh", { headers: { authorization: next } });
    expect((await call("POST", "/v2/login/refresh", { headers: { authorization: s1 } })).status).toBe(401);
    expect((await call("POST", "/v2/login/refresh", { headers: { authorization: s2 } })).status).toBe(200);
  });

  test("only typ refresh refreshes, only typ access opens endpoints", async () => {
    const { accessToken, refreshToken } = (await evmLogin(call, newKey())).body.data;
    const refreshWithAccess = await call("POST", "/v2/login/refresh", { headers: { authorization: accessToken } });
    expect(refreshWithAccess.status).toBe(401);
    expect(refreshWithAccess.body.message).toBe("This is not a refresh token");
    const meWithRefresh = await call("GET", "/v2/auth/me", { headers: bearer(refreshToken) });
    expect(meWithRefresh).toMatchObject({ status: 401, body: { success: false, error: "This is not an access token" } });
    expect((await call("GET", "/v2/user/info", { headers: bearer(refreshToken) })).status).toBe(401);
  });

  test("refresh without a token, with garbage, or with a token of another server is refused", async () => {
    for (const authorization of [undefined, "nonsense", "a.b.c"]) {
      const r = await call("POST", "/v2/login/refresh", { headers: authorization ? { authorization } : {} });
      expect(r.status).toBe(401);
      expect(r.body.error).toBe("UNAUTHORIZED");
    }
    const other = accountsApp();
    const foreign = (await evmLogin(other.call, newKey())).body.data.refreshToken;
    expect((await call("POST", "/v2/login/refresh", { headers: { authorization: foreign } })).status).toBe(401);
  });

  test("tokens expire: access after 15 minutes, refresh after 30 days", async () => {
    const { accessToken, refreshToken } = (await evmLogin(call, newKey())).body.data;
    clock.advance(15 * MINUTE - 1000);
    expect((await call("GET", "/v2/auth/me", { headers: bearer(accessToken) })).status).toBe(200);
    clock.advance(1000);
    const me = await call("GET", "/v2/auth/me", { headers: bearer(accessToken) });
    expect(me).toMatchObject({ status: 401, body: { success: false, error: "The token has expired" } });
    // Refreshing slides the session on; an unused refresh token runs out.
    expect((await call("POST", "/v2/login/refresh", { headers: { authorization: refreshToken } })).status).toBe(200);
    clock.advance(30 * 24 * 60 * MINUTE);
    const late = await call("POST", "/v2/login/refresh", { headers: { authorization: refreshToken } });
    expect(late.status).toBe(401);
    expect(late.body.message).toBe("The token has expired");
  });
});

describe("a token acts for its DID while its key may sign for it", () => {
  // The registry as the test says: an address signs for its own DID unless the test took it away
  // (what an owner change does); test/storage/owner-change.test.ts does it on a real chain.
  const strangers = new Set<string>();
  const resolver: DidResolver = { canSign: async (did, signer) => did.address === signer && !strangers.has(signer) };
  const t = accountsApp({ accounts: { resolver } });
  const { call, clock } = t;
  const me = (token: string) => call("GET", "/v2/auth/me", { headers: bearer(token) });
  const refresh = (token: string) => call("POST", "/v2/login/refresh", { headers: { authorization: token } });

  test("once the key may not, its access token opens nothing and its session ends at refresh, for good", async () => {
    const key = newKey();
    const { accessToken, refreshToken } = (await evmLogin(call, key)).body.data;
    expect((await me(accessToken)).status).toBe(200);
    strangers.add(key.address);
    const refused = await me(accessToken);
    expect(refused).toMatchObject({ status: 401, body: { success: false } });
    expect(refused.body.error).toMatch(/may no longer sign for its DID/);
    expect((await call("GET", "/v2/user/info", { headers: bearer(accessToken) })).status).toBe(401);
    const r = await refresh(refreshToken);
    expect(r.status).toBe(401);
    expect(r.body.message).toMatch(/revoked/);
    // The session was revoked, not refused once: the key coming back does not revive it, nor the
    // access tokens of the ended session.
    strangers.delete(key.address);
    expect((await refresh(refreshToken)).status).toBe(401);
    expect((await me(accessToken)).body).toEqual({ success: false, error: "This session has ended (logged out or revoked); log in again" });
  });

  test("a wallet sign-in is refused, and makes no account, when its address may not sign for its DID", async () => {
    const key = newKey();
    strangers.add(key.address);
    const r = await evmLogin(call, key);
    expect(r.status).toBe(401);
    expect(r.body).toMatchObject({ result: -1, error: "UNAUTHORIZED" });
    expect(r.body.message).toMatch(/another owner/);
    expect(await t.database.sql.get("SELECT uid FROM users WHERE uid = $1", [key.address])).toBeUndefined();
  });

  test("a session that recorded no key refreshes on its address's word; a token with a DID and no key stands for the DID's own address", async () => {
    const key = newKey();
    const { refreshToken, did } = (await evmLogin(call, key)).body.data;
    await t.database.sql.run("UPDATE refresh_families SET signer = NULL WHERE user_id = (SELECT id FROM users WHERE uid = $1)", [key.address]);
    const r = await refresh(refreshToken);
    expect(r.status).toBe(200);
    expect(claimsOf(r.body.data.accessToken)).toMatchObject({ did, key: key.address });

    const keyless = await new SignJWT({ typ: "access", did })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setSubject(key.address)
      .setJti(crypto.randomUUID())
      .setIssuedAt(clock.now() / 1000)
      .setExpirationTime(clock.now() / 1000 + 600)
      .sign(t.secrets.jwtKey);
    expect((await me(keyless)).status).toBe(200);
    strangers.add(key.address);
    expect((await me(keyless)).status).toBe(401);
    expect((await refresh(r.body.data.refreshToken)).status).toBe(401);
  });

  test("a login that proved no key (email) carries no DID", async () => {
    const email = `nodid-${crypto.randomUUID()}@example.com`;
    await call("POST", "/v2/login/email/code", { body: { email } });
    const r = await call("POST", "/v2/login/email", { body: { email, code: t.mail.lastCode(email), source: "test" } });
    expect(r.status).toBe(200);
    const claims = claimsOf(r.body.data.accessToken);
    expect(claims.did).toBeUndefined();
    expect(claims.key).toBeUndefined();
  });
});

describe("verified access tokens are remembered until their exp, no longer", () => {
  const { call, clock } = accountsApp();

  test("a token used again and again is refused at its expiry second, a forged twin of it always, and each answers its own account", async () => {
    const [k1, k2] = [newKey(), newKey()];
    const a1 = (await evmLogin(call, k1)).body.data.accessToken;
    const a2 = (await evmLogin(call, k2)).body.data.accessToken;
    for (let i = 0; i < 3; i++) {
      expect((await call("GET", "/v2/auth/me", { headers: bearer(a1) })).body.data.uid).toBe(k1.address);
      expect((await call("GET", "/v2/auth/me", { headers: bearer(a2) })).body.data.uid).toBe(k2.address);
    }
    // One character of the signature changed: another text, verified (and refused) on its own.
    const [head, body, sig] = a1.split(".") as [string, string, string];
    const forged = `${head}.${body}.${sig.slice(0, -2)}${sig.endsWith("AA") ? "BB" : "AA"}`;
    expect((await call("GET", "/v2/auth/me", { headers: bearer(forged) })).status).toBe(401);
    // Its claims with another key's account: the signature no longer matches either.
    const swapped = `${head}.${a2.split(".")[1]}.${sig}`;
    expect((await call("GET", "/v2/auth/me", { headers: bearer(swapped) })).status).toBe(401);
    const exp = claimsOf(a1).exp * 1000;
    clock.advance(exp - clock.now() - 1);
    expect((await call("GET", "/v2/auth/me", { headers: bearer(a1) })).status).toBe(200);
    clock.advance(1);
    const late = await call("GET", "/v2/auth/me", { headers: bearer(a1) });
    expect(late).toMatchObject({ status: 401, body: { success: false, error: "The token has expired" } });
    // And stays refused (the entry is gone; jose refuses it again).
    expect((await call("GET", "/v2/auth/me", { headers: bearer(a1) })).status).toBe(401);
  });
});

describe("/v2/auth/me and /v2/user/info", () => {
  const admin = newKey();
  const { call } = accountsApp({ env: { ADMIN_ADDRESSES: `0x0000000000000000000000000000000000000001, ${admin.address.toLowerCase()}` } });

  test("me takes a Bearer header or ?token= and answers the current user", async () => {
    const key = newKey();
    const { accessToken } = (await evmLogin(call, key)).body.data;
    const viaHeader = await call("GET", "/v2/auth/me", { headers: bearer(accessToken) });
    expect(viaHeader).toMatchObject({ status: 200, body: { success: true, data: { uid: key.address, role: "user" } } });
    const viaQuery = await call("GET", `/v2/auth/me?token=${accessToken}`);
    expect(viaQuery.body).toEqual(viaHeader.body);
  });

  test("role is admin for an address in ADMIN_ADDRESSES, whatever its letter case", async () => {
    const { accessToken } = (await evmLogin(call, admin)).body.data;
    expect((await call("GET", "/v2/auth/me", { headers: bearer(accessToken) })).body.data).toEqual({ uid: admin.address, role: "admin" });
  });

  test("me with no, a malformed or a forged token answers success false and an error", async () => {
    const cases: [Record<string, string>, string][] = [
      [{}, "An access token is required (Authorization: Bearer <token>)"],
      [{ authorization: "Bearer not-a-jwt" }, "The token is invalid"],
      [{ authorization: "Basic dXNlcjpwYXNz" }, "An access token is required (Authorization: Bearer <token>)"],
    ];
    for (const [headers, error] of cases) {
      expect(await call("GET", "/v2/auth/me", { headers })).toMatchObject({ status: 401, body: { success: false, error } });
    }
    const { accessToken } = (await evmLogin(call, newKey())).body.data;
    // The same signature over claims that name someone else.
    const [head, , sig] = accessToken.split(".");
    const forged = `${head}.${Buffer.from(JSON.stringify({ ...claimsOf(accessToken), sub: admin.address })).toString("base64url")}.${sig}`;
    expect((await call("GET", "/v2/auth/me", { headers: bearer(forged) })).body).toEqual({ success: false, error: "The token is invalid" });
  });

  test("user info answers every field of spec 2.12 the account has", async () => {
    const key = newKey();
    const login = (await evmLogin(call, key)).body.data;
    const r = await call("GET", "/v2/user/info", { headers: bearer(login.accessToken) });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      result: 1,
      data: { name: "", icon: "", address: key.address, did: `did:ethr:0x3d9:${key.address}`, points: 0, social_info: false },
    });
    expect(login.did).toBe(`did:ethr:0x3d9:${key.address}`);
  });

  test("user info without a valid token is UNAUTHORIZED in the account error shape", async () => {
    const r = await call("GET", "/v2/user/info");
    expect(r).toMatchObject({ status: 401, body: { result: -1, error: "UNAUTHORIZED" } });
    const q = await call("GET", "/v2/user/info", { headers: bearer("x.y.z") });
    expect(q.body).toEqual({ result: -1, error: "UNAUTHORIZED", message: "The token is invalid" });
  });
});

describe("the DID registry down: a token's check answers 503, never a 500 or a refusal", () => {
  let down = false;
  const resolver: DidResolver = {
    canSign: async (did, signer) => {
      if (down) throw new RegistryUnavailable("connect ECONNREFUSED");
      return did.address === signer;
    },
  };
  const t = accountsApp({ accounts: { resolver } });
  const { call } = t;

  test("user info and /v2/auth/me answer 503 with Retry-After while the registry is unreachable, then work again", async () => {
    const { accessToken } = (await evmLogin(call, newKey())).body.data;
    down = true;
    try {
      const info = await call("GET", "/v2/user/info", { headers: bearer(accessToken) });
      expect(info).toMatchObject({ status: 503, body: { result: -1, error: "UNAVAILABLE" } });
      expect(info.headers.get("retry-after")).toBe("5");
      const me = await call("GET", "/v2/auth/me", { headers: bearer(accessToken) });
      expect(me).toMatchObject({ status: 503, body: { success: false } });
      expect(me.body.error).toMatch(/DID registry did not answer/);
    } finally {
      down = false;
    }
    expect((await call("GET", "/v2/user/info", { headers: bearer(accessToken) })).status).toBe(200);
  });
});
