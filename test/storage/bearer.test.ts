// The Bearer guard of storage routes (spec 5.4, spec 7 "Token is null; invalid token payload;
// invalid token"; D2, D3): the account API's access tokens of accounts with a DID, nothing else.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SignJWT } from "jose";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { clientKeyOf } from "../../src/http/client-key.ts";
import { get, readJson } from "../support/app.ts";
import { testGateway } from "../support/storage.ts";

const gw = await testGateway({ ipfs: false });
const { account, client } = await gw.user();
const entry = await client.upload("dfs", new TextEncoder().encode("guarded"), { name: "g.txt" });
const session = await gw.session(account);

/** Every storage route that takes the Bearer token, as a request with `authorization`. */
const routes = {
  upload: async (authorization?: string) => {
    const req = await gw.uploadRequest(session, { requestID: 1, bytes: new TextEncoder().encode("x") });
    const headers = new Headers(req.headers);
    if (authorization === undefined) headers.delete("authorization");
    else headers.set("authorization", authorization);
    return new Request(req.url, { method: "POST", headers, body: req.body });
  },
  list: async (authorization?: string) => get("/dfs/listobjects", { headers: authorization ? { authorization } : {} }),
  delete: async (authorization?: string) => {
    const signature = await gw.sign.request(account, { did: session.did, token: session.token, requestID: 2, action: "delete", payload: String(entry.ID) });
    const q = new URLSearchParams({ id: String(entry.ID), did: session.did, token: session.token, requestID: "2", payload: String(entry.ID), signature });
    return get(`/dfs/delete?${q}`, { headers: authorization ? { authorization } : {} });
  },
  traffichash: async (authorization?: string) => get("/traffichash?size=1", { headers: authorization ? { authorization } : {} }),
};

async function expectGuard(authorization: string | undefined, description: RegExp) {
  for (const [name, make] of Object.entries(routes)) {
    const res = await gw.app.handle(await make(authorization));
    const body = await readJson(res);
    expect({ name, status: res.status }).toEqual({ name, status: 401 });
    expect(body).toMatchObject({ Code: "Authentication", HTTPStatusCode: 401 });
    expect(body.Description).toMatch(description);
    // Delete failures carry Status: "Failure" (spec 4.1 rule 4, D9).
    if (name === "delete") expect(body.Status).toBe("Failure");
  }
  // Nothing happened: the file is there, and the signed ids were not claimed.
  expect((await client.list("dfs")).Object).toEqual([entry]);
  expect((await readJson(await gw.app.handle(get(`/login?did=${session.did}`)))).requestID).toBe("0");
}

/** An access token as the server makes them, with chosen claims, signed with `key`. */
const jwt = (claims: Record<string, unknown>, o: { key?: Uint8Array; exp?: number; sub?: string } = {}) =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setSubject(o.sub ?? account.address)
    .setJti(crypto.randomUUID())
    .setIssuedAt()
    .setExpirationTime(o.exp ?? Math.floor(Date.now() / 1000) + 600)
    .sign(o.key ?? gw.secrets.jwtKey);

describe("storage routes refuse with 401", () => {
  test("no token: 'Token is null' (also with another scheme or an empty Bearer)", async () => {
    await expectGuard(undefined, /^Token is null$/);
    await expectGuard("Basic dXNlcjpwYXNz", /^Token is null$/);
    await expectGuard("Bearer ", /^Token is null$/);
    await expectGuard(session.accessToken, /^Token is null$/);
  });

  test("a garbage token: 'invalid token'", async () => {
    await expectGuard("Bearer garbage", /^invalid token/);
    await expectGuard(`Bearer ${session.accessToken.slice(0, -4)}AAAA`, /^invalid token/);
  });

  test("a token signed with another key, or expired", async () => {
    await expectGuard(`Bearer ${await jwt({ typ: "access", did: session.did }, { key: crypto.getRandomValues(new Uint8Array(32)) })}`, /^invalid token/);
    await expectGuard(`Bearer ${await jwt({ typ: "access", did: session.did }, { exp: Math.floor(Date.now() / 1000) - 60 })}`, /expired/);
  });

  test("an access token whose session was logged out: 'its session has ended', at once", async () => {
    const other = await gw.session(account);
    const out = await gw.app.handle(new Request("http://stowage.test/v2/auth/logout", { method: "POST", headers: { authorization: `Bearer ${other.accessToken}` } }));
    expect(out.status).toBe(200);
    await expectGuard(`Bearer ${other.accessToken}`, /^invalid token: its session has ended$/);
  });

  test("a refresh token used as an access token: 'invalid token payload'", async () => {
    const other = await gw.session(account);
    await expectGuard(`Bearer ${other.refreshToken}`, /^invalid token payload: not an access token$/);
  });

  test("a token of an account without a DID (email login): 401 saying so; once it links a wallet, 200", async () => {
    const email = `nodid-${Date.now()}@example.com`;
    await gw.accounts.email.sendCode(email, clientKeyOf("203.0.113.7"));
    const mailDir = join(gw.dataDir, "mail");
    const mail = readdirSync(mailDir).map((f) => readFileSync(join(mailDir, f), "utf8")).find((m) => m.includes(email));
    const code = /Your Stowage code: (\d{6})/.exec(mail ?? "")?.[1];
    expect(code).toBeDefined();
    const pair = await gw.accounts.email.loginWithCode({ email, code: code as string, source: "test" }, clientKeyOf("203.0.113.7"));
    await expectGuard(`Bearer ${pair.accessToken}`, /acts for no DID .*links one first \(POST \/v2\/user\/link-wallet\)/);

    // Once it links a wallet, the link's session passes the guard, acting for the wallet's DID,
    // and the wallet's DID login (POST /login) opens this same account.
    const wallet = privateKeyToAccount(generatePrivateKey());
    const user = await gw.accounts.users.byEmail(email);
    const from = clientKeyOf("203.0.113.7");
    const message = await gw.accounts.link.challenge(user!, { address: wallet.address, origin: "http://localhost:8080" }, from);
    const linked = await gw.accounts.link.link(user!, pair.accessToken, { message, signature: await wallet.signMessage({ message }), source: "test" }, from);
    const listed = await gw.app.handle(get("/dfs/listobjects", { headers: { authorization: `Bearer ${linked.accessToken}` } }));
    expect(listed.status).toBe(200);
    expect((await readJson(listed)).Address).toBe(wallet.address);
    const viaLogin = await gw.session(wallet);
    const me = await readJson(await gw.app.handle(get("/v2/auth/me", { headers: { authorization: `Bearer ${viaLogin.accessToken}` } })));
    expect(me.data).toMatchObject({ uid: user!.uid, email });
  });

  test("an access token whose did claim is malformed or of another chain", async () => {
    await expectGuard(`Bearer ${await jwt({ typ: "access", did: "did:ethr:0x1:0x0000000000000000000000000000000000000001" })}`, /invalid token payload/);
    await expectGuard(`Bearer ${await jwt({ typ: "access", did: "not a did" })}`, /invalid token payload/);
  });
});

test("the guard passes a good token (the routes above work with it)", async () => {
  expect((await gw.app.handle(await routes.list(`Bearer ${session.accessToken}`))).status).toBe(200);
  expect((await gw.app.handle(await routes.traffichash(`Bearer ${session.accessToken}`))).status).toBe(200);
  // The scheme's case does not matter.
  expect((await gw.app.handle(await routes.upload(`bearer ${session.accessToken}`))).status).toBe(200);
});
