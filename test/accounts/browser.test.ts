/**
 * Browser wallet login (spec 4.2 row 4, D2, D12) against a JWKS this test serves on 127.0.0.1:
 * valid, wrong issuer, wrong audience, expired, without expiry, wrong key, not configured,
 * provider down.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { SignJWT, exportJWK, generateKeyPair, type JWTPayload } from "jose";
import { privateKeyToAccount, generatePrivateKey } from "viem/accounts";
import { accountsApp, bearer } from "../support/accounts.ts";

const ISSUER = "https://wallet.provider.test";
const AUDIENCE = "stowage-test";

type Key = Awaited<ReturnType<typeof generateKeyPair>>;

async function startJwks() {
  const key = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(key.publicKey)), kid: "key-1", alg: "ES256", use: "sig" };
  let fetches = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch() {
      fetches++;
      return Response.json({ keys: [jwk] });
    },
  });
  return { key, url: `http://127.0.0.1:${server.port}/.well-known/jwks.json`, fetches: () => fetches, stop: () => server.stop(true) };
}

const jwks = await startJwks();
afterAll(() => jwks.stop());

describe("browser wallet login", () => {
  const wallet = privateKeyToAccount(generatePrivateKey());
  const { call, clock } = accountsApp({
    env: {
      STOWAGE_BROWSER_JWKS_URL: jwks.url,
      STOWAGE_BROWSER_ISSUER: ISSUER,
      STOWAGE_BROWSER_AUDIENCE: AUDIENCE,
      // The provider's address claim must not make anyone admin: only a signature proves an address.
      ADMIN_ADDRESSES: wallet.address,
    },
  });

  /** A provider token; `ttl: null` leaves out `exp`. */
  const token = (claims: JWTPayload = {}, opts: { key?: Key; kid?: string; iss?: string; aud?: string; ttl?: number | null } = {}) => {
    const now = Math.floor(clock.now() / 1000);
    const jwt = new SignJWT({ preferred_username: "satoshi", picture: "https://img.test/s.png", address: wallet.address, ...claims })
      .setProtectedHeader({ alg: "ES256", kid: opts.kid ?? "key-1" })
      .setSubject("user-42")
      .setIssuer(opts.iss ?? ISSUER)
      .setAudience(opts.aud ?? AUDIENCE)
      .setIssuedAt(now);
    if (opts.ttl !== null) jwt.setExpirationTime(now + (opts.ttl ?? 3600));
    return jwt.sign((opts.key ?? jwks.key).privateKey);
  };
  const login = (authorization: string | undefined) =>
    call("POST", "/v2/login/browser", { body: { source: "browser-extension", useragent: "test" }, headers: authorization ? { authorization } : {} });

  test("a valid provider token logs in to a namespaced account with browser_info", async () => {
    const r = await login(await token());
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ result: 1, data: { accessToken: expect.any(String), refreshToken: expect.any(String) } });
    const me = await call("GET", "/v2/auth/me", { headers: bearer(r.body.data.accessToken) });
    expect(me.body.data).toEqual({ uid: "browser:user-42", username: "satoshi", role: "user" });
    const info = await call("GET", "/v2/user/info", { headers: bearer(r.body.data.accessToken) });
    expect(info.body.data).toEqual({
      name: "satoshi",
      icon: "https://img.test/s.png",
      address: "",
      did: "",
      points: 0,
      social_info: false,
      browser_info: { browser_id: "user-42", browser_username: "satoshi", browser_address: wallet.address },
    });
  });

  test("the same subject is the same account; a Bearer prefix is forgiven", async () => {
    const a = await login(await token());
    const b = await login(`Bearer ${await token()}`);
    expect(b.status).toBe(200);
    const uid = async (t: string) => (await call("GET", "/v2/auth/me", { headers: bearer(t) })).body.data.uid;
    expect(await uid(b.body.data.accessToken)).toBe(await uid(a.body.data.accessToken));
  });

  test.each([
    ["a wrong issuer", () => token({}, { iss: "https://evil.test" }), "iss"],
    ["a wrong audience", () => token({}, { aud: "someone-else" }), "aud"],
    ["an expired token", () => token({}, { ttl: -60 }), "exp"],
    ["a token without an expiry (no exp, D14), though otherwise valid", () => token({}, { ttl: null }), "exp"],
    // Hostile input: the claim type says number, the token says otherwise.
    ["a token whose exp is not a number", () => token({ exp: "tomorrow" as unknown as number }, { ttl: null }), "exp"],
  ])("%s is refused", async (_, make, claim) => {
    const r = await login(await make());
    expect(r).toMatchObject({ status: 401, body: { result: -1, error: "UNAUTHORIZED" } });
    expect(r.body.message).toStartWith("The browser wallet token is invalid");
    expect(r.body.message).toContain(claim);
  });

  test("a token signed by another key is refused, with the provider's key id or another", async () => {
    const other = await generateKeyPair("ES256");
    for (const kid of ["key-1", "key-2"]) {
      const r = await login(await token({}, { key: other, kid }));
      expect(r).toMatchObject({ status: 401, body: { error: "UNAUTHORIZED" } });
    }
  });

  test("a missing or malformed token is refused", async () => {
    expect((await login(undefined)).body.message).toBe("The browser wallet token is required in the Authorization header");
    expect((await login("not.a.jwt")).status).toBe(401);
  });

  test("the key set is fetched once and then cached", async () => {
    const before = jwks.fetches();
    await login(await token());
    await login(await token());
    expect(jwks.fetches()).toBe(before);
  });
});

test("browser login without a configured provider says so clearly", async () => {
  const { call } = accountsApp({ env: { STOWAGE_BROWSER_JWKS_URL: jwks.url } });
  const r = await call("POST", "/v2/login/browser", { body: { source: "x" }, headers: { authorization: "x.y.z" } });
  expect(r).toMatchObject({ status: 503, body: { result: -1, error: "NOT_CONFIGURED" } });
  for (const name of ["STOWAGE_BROWSER_JWKS_URL", "STOWAGE_BROWSER_ISSUER", "STOWAGE_BROWSER_AUDIENCE"]) expect(r.body.message).toContain(name);
});

test("a provider whose key set does not answer is a 503, not a refusal of the user", async () => {
  const down = await startJwks();
  down.stop();
  const { call, clock } = accountsApp({ env: { STOWAGE_BROWSER_JWKS_URL: down.url, STOWAGE_BROWSER_ISSUER: ISSUER, STOWAGE_BROWSER_AUDIENCE: AUDIENCE } });
  const now = Math.floor(clock.now() / 1000);
  const jwt = await new SignJWT({}).setProtectedHeader({ alg: "ES256", kid: "key-1" }).setSubject("u").setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime(now + 60).sign(down.key.privateKey);
  const r = await call("POST", "/v2/login/browser", { body: { source: "x" }, headers: { authorization: jwt } });
  expect(r).toMatchObject({ status: 503, body: { result: -1, error: "UNAVAILABLE" } });
});
