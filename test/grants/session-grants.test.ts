/**
 * Session grants (D19): a wallet signs once `SessionGrant(key, validUntil)`, registered with
 * POST /v2/session-grants; the session key then signs uploads, deletes and vouchers for the DID,
 * and nothing else: not a login, not a key mint; not after validUntil, not after revocation,
 * not when someone other than the DID's keys signed the grant.
 */
import { describe, expect, test } from "bun:test";
import { Elysia } from "elysia";
import { generatePrivateKey, privateKeyToAccount, type LocalAccount } from "viem/accounts";
import type { Address } from "viem";
import { createGrants, grantsRoutes, type Grants } from "../../src/grants/index.ts";
import { errorHandler } from "../../src/http/error-handler.ts";
import { sessionGrantTypes } from "../../src/sdk/grants.ts";
import { canonicalDid, type Did } from "../../src/identity/did.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { get, postJson, readJson, type Json } from "../support/app.ts";
import { BASE, newToken, type Session, testGateway } from "../support/storage.ts";

let grants: Grants | undefined;
// The storage service is built before the grants service (which needs its database): it asks through this.
const sessionKeys = { allows: (did: Did, signer: Address) => (grants as Grants).allows(did, signer) };
const gw = await testGateway({ extra: { sessionKeys } });
let clock = Date.now();
grants = createGrants({ sql: gw.database.sql, resolver: gw.resolver, domain: gw.domain, now: () => clock });
const routes = new Elysia().use(errorHandler(gw.log)).use(grantsRoutes({ grants, tokens: gw.accounts.tokens, chainId: gw.chain.context.chain.id }));
const nowS = () => Math.floor(clock / 1000);
const bearer = (s: Session) => ({ authorization: `Bearer ${s.accessToken}` });

const signGrant = (by: LocalAccount, key: Address, validUntil: number) =>
  by.signTypedData({ domain: gw.domain, types: sessionGrantTypes, primaryType: "SessionGrant", message: { key, validUntil: BigInt(validUntil) } });

async function register(s: Session, key: LocalAccount, o: { validUntil?: number; by?: LocalAccount } = {}) {
  const validUntil = o.validUntil ?? nowS() + 3600;
  const signature = await signGrant(o.by ?? s.account, key.address, validUntil);
  return routes.handle(postJson("/v2/session-grants", { key: key.address, validUntil, signature }, bearer(s)));
}

/** The owner's session, signed by `key` instead of the owner (the Bearer token stays the owner's). */
const as = (s: Session, key: LocalAccount): Session => ({ ...s, account: key });

async function upload(s: Session, requestID: number, bytes = crypto.getRandomValues(new Uint8Array(2000)), kind = "dfs") {
  return gw.app.handle(await gw.uploadRequest(s, { requestID, bytes, kind }));
}

async function download(s: Session, key: LocalAccount, cid: string, bytes: number, kind = "dfs") {
  const size = (await gw.storage!.vouchers.usedBy(key.address)) + bytes + 1;
  const sign = await gw.sign.voucher(key, size);
  return gw.app.handle(get(`/${kind}/${cid}?size=${size}&sign=${sign}&did=${encodeURIComponent(s.did)}`));
}

async function remove(s: Session, requestID: number, id: number) {
  const signature = await gw.sign.request(s.account, { did: s.did, token: s.token, requestID, action: "delete", payload: String(id) });
  const q = new URLSearchParams({ id: String(id), did: s.did, token: s.token, requestID: String(requestID), payload: String(id), signature });
  return gw.app.handle(get(`/dfs/delete?${q}`, { headers: bearer(s) }));
}

async function refusal(res: Response, status: number) {
  const body: Json = await readJson(res);
  expect({ status: res.status, body }).toMatchObject({ status });
  return body;
}

const fresh = () => privateKeyToAccount(generatePrivateKey());
const owner = async () => gw.session(await gw.chain.anvil.newAccount());

describe("a granted session key", () => {
  test("signs uploads (dfs and ipfs), vouchers for downloads, and deletes; refused before the grant", async () => {
    const s = await owner();
    const key = fresh();
    const bytes = crypto.getRandomValues(new Uint8Array(3000));
    // Before the grant the key is nobody's: the signed request is refused.
    const before = await refusal(await upload(as(s, key), 1, bytes), 401);
    expect(before.Description).toMatch(/not the DID's owner or a valid delegate/);

    const reg = await register(s, key);
    expect(reg.status).toBe(200);
    expect((await readJson(reg)).data).toMatchObject({ key: key.address, signer: s.account.address });

    const up = await upload(as(s, key), 2, bytes);
    expect(up.status).toBe(200);
    const entry: Json = await readJson(up);
    const onIpfs = await upload(as(s, key), 3, bytes, "ipfs");
    expect(onIpfs.status).toBe(200);
    expect((await readJson(onIpfs)).Cid).toBe(entry.Cid);

    for (const kind of ["dfs", "ipfs"]) {
      const res = await download(s, key, entry.Cid, bytes.byteLength, kind);
      expect(res.status).toBe(200);
      expect(new Uint8Array(await res.arrayBuffer())).toEqual(bytes);
    }
    const del = await remove(as(s, key), 4, entry.ID);
    expect(await readJson(del)).toEqual({ Status: "Success" });
    const list: Json = await readJson(await gw.app.handle(get("/dfs/listobjects", { headers: bearer(s) })));
    expect(list.Object).toEqual([]);
  });

  test("is refused for a login and for minting an access key (action keys)", async () => {
    const s = await owner();
    const key = fresh();
    expect((await register(s, key)).status).toBe(200);
    const token = newToken();
    const timestamp = nowS();
    const signature = await gw.sign.login(key, { did: s.did, token, timestamp });
    await refusal(await gw.app.handle(postJson("/login", { did: s.did, token, timestamp, signature }, { accept: "application/json" })), 401);

    const payload = "rw:*:0";
    const mintSig = await gw.sign.request(key, { did: s.did, token: s.token, requestID: 1, action: "keys", payload });
    const mint = await gw.app.handle(postJson("/v2/keys", { did: s.did, token: s.token, requestID: "1", payload, signature: mintSig }, bearer(s)));
    const body = await refusal(mint, 401);
    expect(body.result).toBe(-1);
    // The same request signed by the owner mints: the refusal was the key's.
    const ownerSig = await gw.sign.request(s.account, { did: s.did, token: s.token, requestID: 2, action: "keys", payload });
    expect((await gw.app.handle(postJson("/v2/keys", { did: s.did, token: s.token, requestID: "2", payload, signature: ownerSig }, bearer(s)))).status).toBe(200);
  });

  test("is refused after validUntil, for uploads and for vouchers", async () => {
    const s = await owner();
    const key = fresh();
    expect((await register(s, key, { validUntil: nowS() + 60 })).status).toBe(200);
    const bytes = crypto.getRandomValues(new Uint8Array(1000));
    const up = await upload(as(s, key), 1, bytes);
    expect(up.status).toBe(200);
    const { Cid } = await readJson(up);
    clock += 60_000;
    await refusal(await upload(as(s, key), 2, bytes), 401);
    await refusal(await download(s, key, Cid, bytes.byteLength), 403);
    clock = Date.now();
  });

  test("is refused once revoked, and a revoked key cannot be granted again", async () => {
    const s = await owner();
    const key = fresh();
    expect((await register(s, key)).status).toBe(200);
    const listed: Json = await readJson(await routes.handle(get("/v2/session-grants", { headers: bearer(s) })));
    expect(listed.data.map((g: Json) => g.key)).toEqual([key.address]);
    const del = await routes.handle(new Request(`${BASE}/v2/session-grants/${key.address}`, { method: "DELETE", headers: bearer(s) }));
    expect(await readJson(del)).toEqual({ result: 1 });
    await refusal(await upload(as(s, key), 1), 401);
    await refusal(await register(s, key), 401);
    expect((await readJson(await routes.handle(get("/v2/session-grants", { headers: bearer(s) })))).data).toEqual([]);
  });
});

describe("the SDK with a session key (as the console uses it)", () => {
  test("the wallet signs the login, the key uploads and downloads in a row from its own voucher counter", async () => {
    const ownerAccount = await gw.chain.anvil.newAccount();
    const key = fresh();
    const did = canonicalDid(ownerAccount.address, gw.chain.context.chain.id);
    const store = await connectStorage({ baseUrl: BASE, account: key, did, loginSigner: ownerAccount, fetch: gw.fetch });
    await store.login();
    const s: Session = { account: ownerAccount, did, token: newToken(), accessToken: store.accessToken as string, refreshToken: "" };
    expect((await register(s, key)).status).toBe(200);
    // Each transfer's voucher starts from the key's counter (GET /traffichash?payer=): signed
    // from the account's, the second one fell short by what the first had moved.
    const bytes = crypto.getRandomValues(new Uint8Array(5000));
    const first = await store.upload("dfs", bytes, { name: "a.bin" });
    const second = await store.upload("dfs", bytes, { name: "b.bin" });
    expect(second.Cid).toBe(first.Cid);
    for (let i = 0; i < 2; i++) expect(new Uint8Array(await (await store.download("dfs", first.Cid, { size: bytes.byteLength })).arrayBuffer())).toEqual(bytes);
    const counter: Json = await readJson(await gw.app.handle(get(`/traffichash?size=0&payer=${key.address}`, { headers: bearer(s) })));
    expect(Number(counter.used)).toBeGreaterThanOrEqual(4 * bytes.byteLength);
  });

  test("GET /traffichash?payer= answers only for the account or its keys", async () => {
    const s = await owner();
    const stranger = fresh();
    await refusal(await gw.app.handle(get(`/traffichash?size=0&payer=${stranger.address}`, { headers: bearer(s) })), 401);
    await refusal(await gw.app.handle(get(`/traffichash?size=0&payer=nope`, { headers: bearer(s) })), 400);
    expect((await gw.app.handle(get(`/traffichash?size=0&payer=${s.account.address}`, { headers: bearer(s) }))).status).toBe(200);
  });
});

describe("registering a grant", () => {
  test("refuses a grant signed by a key that is not the DID's, a validUntil past or beyond 24 h, and a token without DID", async () => {
    const s = await owner();
    const key = fresh();
    await refusal(await register(s, key, { by: fresh() }), 401);
    await refusal(await register(s, key, { validUntil: nowS() - 1 }), 400);
    await refusal(await register(s, key, { validUntil: nowS() + 25 * 3600 }), 400);
    const bad = await routes.handle(postJson("/v2/session-grants", { key: "0x12", validUntil: nowS() + 60, signature: "0x00" }, bearer(s)));
    await refusal(bad, 400);
    // Nothing was stored by the refusals: the key signs nothing.
    await refusal(await upload(as(s, key), 1), 401);
    const email = await routes.handle(postJson("/v2/session-grants", {}, { authorization: "Bearer nope" }));
    await refusal(email, 401);
  });
});
