/**
 * Session grants (D19): a wallet signs once an EIP-4361 (Sign-In with Ethereum) message from an
 * allowed origin, whose ERC-5573 ReCap names the DID and what the key may sign, registered with
 * POST /v2/session-grants (which opens the key's storage session); the session key then signs
 * what its ReCap names — uploads, deletes, vouchers — and nothing else: not a login, not a key
 * mint, not the age identity; not after its expiry, not after revocation, not for another DID,
 * not when someone other than the DID's keys signed it. The retired EIP-712 grant is refused.
 */
import { describe, expect, test } from "bun:test";
import { Elysia } from "elysia";
import { generatePrivateKey, privateKeyToAccount, type LocalAccount } from "viem/accounts";
import type { Address } from "viem";
import { createSiweMessage } from "viem/siwe";
import { siweSignatureValid } from "../../src/accounts/evm.ts";
import { buildApp } from "../../src/app.ts";
import { createEncryption } from "../../src/encryption/index.ts";
import { createGrants, grantsRoutes, type Grants } from "../../src/grants/index.ts";
import { MAX_NONCES_PER_DID } from "../../src/grants/service.ts";
import { errorHandler } from "../../src/http/error-handler.ts";
import type { Did } from "../../src/identity/did.ts";
import { connectGateway } from "../../src/sdk/chain.ts";
import { replacePayload } from "../../src/sdk/encryption.ts";
import { GRANT_STATEMENT, grantSessionKey, sessionGrantMessage, sessionGrantsClient, sessionKeyUri, type GrantAbility } from "../../src/sdk/grants.ts";
import { encodeRecap, recapStatement } from "../../src/sdk/recap.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { cidOfStream } from "../../src/sdk/cid.ts";
import { createSessions, openSession } from "../../src/authorities/sessions.ts";
import { appFetch, get, postJson, readJson, type Json } from "../support/app.ts";
import { BASE, newToken, type Session, testGateway } from "../support/storage.ts";

/** The gateway's one allowed origin (STOWAGE_ALLOWED_ORIGINS' default). */
const ORIGIN = "http://localhost:8080";

let grants: Grants | undefined;
// The storage service is built before the grants service (which needs its database): it asks through this.
const sessionKeys = { allows: (did: Did, signer: Address, ability: GrantAbility) => (grants as Grants).allows(did, signer, ability) };
// A short resolver cache, so that a revoked delegate's grant is seen to end within a second.
const gw = await testGateway({ extra: { sessionKeys }, resolverCacheMs: 1000 });
const chainId = gw.chain.context.chain.id;
let clock = Date.now();
grants = createGrants({
  sql: gw.database.sql,
  resolver: gw.resolver,
  chainId,
  allowedOrigins: gw.config.allowedOrigins,
  verifySignature: (address, message, signature) => siweSignatureValid({ publicClient: gw.chain.context.publicClient, log: gw.log }, address, message, signature),
  openSession: async (did, token) => void (await openSession(gw.database.sql, did, token, Math.floor(clock / 1000))),
  now: () => clock,
});
const routes = new Elysia().use(errorHandler(gw.log)).use(grantsRoutes({ grants, tokens: gw.accounts.tokens, chainId }));
const bearer = (s: Session) => ({ authorization: `Bearer ${s.accessToken}` });

const nonceFor = async (s: Session): Promise<string> => {
  const res = await routes.handle(postJson("/v2/session-grants/nonce", {}, bearer(s)));
  expect(res.status).toBe(200);
  return (await readJson(res)).data.nonce;
};

interface GrantOptions {
  by?: LocalAccount;
  did?: string;
  origin?: string;
  seconds?: number;
  abilities?: readonly GrantAbility[];
  nonce?: string;
  issuedAt?: Date;
}

/** The SDK's grant message for `key`, signed by the owner (or `by`): what the console sends. */
async function signedGrant(s: Session, key: LocalAccount, o: GrantOptions = {}) {
  const by = o.by ?? s.account;
  const issuedAt = o.issuedAt ?? new Date(clock);
  const message = sessionGrantMessage({
    origin: o.origin ?? ORIGIN,
    address: by.address,
    did: o.did ?? s.did,
    key: key.address,
    chainId,
    nonce: o.nonce ?? (await nonceFor(s)),
    issuedAt,
    expirationTime: new Date(issuedAt.getTime() + (o.seconds ?? 3600) * 1000),
    ...(o.abilities ? { abilities: o.abilities } : {}),
  });
  return { message, signature: await by.signMessage({ message }) };
}

const post = (s: Session, body: unknown) => routes.handle(postJson("/v2/session-grants", body, bearer(s)));

async function register(s: Session, key: LocalAccount, o: GrantOptions = {}) {
  return post(s, await signedGrant(s, key, o));
}

/** Registers a grant and answers the key's session: the owner's Bearer token, the key signing with the grant's token. */
async function granted(s: Session, key: LocalAccount, o: GrantOptions = {}): Promise<Session> {
  const res = await register(s, key, o);
  const body: Json = await readJson(res);
  expect({ status: res.status, body }).toMatchObject({ status: 200 });
  return { ...s, account: key, token: body.data.token };
}

async function upload(s: Session, requestID: number, bytes = crypto.getRandomValues(new Uint8Array(2000)), kind = "dfs") {
  return gw.app.handle(await gw.uploadRequest(s, { requestID, bytes, kind }));
}

async function download(s: Session, key: LocalAccount, cid: string, bytes: number, kind = "dfs") {
  const size = (await gw.storage!.vouchers.usedBy(key.address)) + bytes + 1;
  const sign = await gw.sign.voucher(key, size, cid);
  return gw.app.handle(get(`/${kind}/${cid}?size=${size}&sign=${sign}&did=${encodeURIComponent(s.did)}`));
}

async function remove(s: Session, requestID: number, id: number) {
  const signature = await gw.sign.request(s.account, { did: s.did, token: s.token, requestID, action: "delete", payload: String(id) });
  const q = new URLSearchParams({ id: String(id), did: s.did, token: s.token, requestID: String(requestID), payload: String(id), signature });
  return gw.app.handle(get(`/dfs/delete?${q}`, { headers: bearer(s) }));
}

async function refusal(res: Response, status: number, message?: RegExp) {
  const body: Json = await readJson(res);
  expect({ status: res.status, body }).toMatchObject({ status });
  if (message) expect(body.message ?? body.Description).toMatch(message);
  return body;
}

const fresh = () => privateKeyToAccount(generatePrivateKey());
const owner = async () => gw.session(await gw.chain.anvil.newAccount());
const listed = async (s: Session): Promise<Json[]> => (await readJson(await routes.handle(get("/v2/session-grants", { headers: bearer(s) })))).data;

describe("a granted session key", () => {
  test("signs uploads (dfs and ipfs), vouchers for downloads and deletes in the session its grant opened; refused before the grant", async () => {
    const s = await owner();
    const key = fresh();
    const bytes = crypto.getRandomValues(new Uint8Array(3000));
    // Before the grant the key is nobody's: the signed request is refused.
    const before = await refusal(await upload({ ...s, account: key }, 1, bytes), 401);
    expect(before.Description).toMatch(/not the DID's owner or a valid delegate/);

    const reg = await register(s, key);
    expect(reg.status).toBe(200);
    const data: Json = (await readJson(reg)).data;
    expect(data).toMatchObject({ key: key.address, signer: s.account.address, abilities: ["delete", "upload", "voucher"], origin: ORIGIN });
    expect(data.token).toMatch(/^0x[0-9a-f]{64}$/);
    // The key signs in the session the registration opened: no login by anyone.
    const k: Session = { ...s, account: key, token: data.token };

    const up = await upload(k, 1, bytes);
    expect(up.status).toBe(200);
    const entry: Json = await readJson(up);
    const onIpfs = await upload(k, 2, bytes, "ipfs");
    expect(onIpfs.status).toBe(200);
    expect((await readJson(onIpfs)).Cid).toBe(entry.Cid);

    for (const kind of ["dfs", "ipfs"]) {
      const res = await download(s, key, entry.Cid, bytes.byteLength, kind);
      expect(res.status).toBe(200);
      expect(new Uint8Array(await res.arrayBuffer())).toEqual(bytes);
    }
    const del = await remove(k, 3, entry.ID);
    expect(await readJson(del)).toEqual({ Status: "Success" });
    const list: Json = await readJson(await gw.app.handle(get("/dfs/listobjects", { headers: bearer(s) })));
    expect(list.Object).toEqual([]);
  });

  test("signs only what its ReCap names: an upload-only key is refused a delete and a voucher", async () => {
    const s = await owner();
    const key = fresh();
    const k = await granted(s, key, { abilities: ["upload"] });
    expect((await listed(s)).map((g) => g.abilities)).toEqual([["upload"]]);
    const bytes = crypto.getRandomValues(new Uint8Array(1500));
    // An upload carries a voucher too: the owner signs that one, the key the request.
    const size = (await gw.storage!.vouchers.usedBy(s.account.address)) + bytes.byteLength + 1;
    const up = await gw.app.handle(await gw.uploadRequest(k, { requestID: 1, bytes, fields: { size: String(size), sign: await gw.sign.voucher(s.account, size, await cidOfStream(new Blob([bytes]).stream())) } }));
    expect(up.status).toBe(200);
    const entry: Json = await readJson(up);
    await refusal(await remove(k, 2, entry.ID), 401, /live grant for this/);
    await refusal(await download(s, key, entry.Cid, bytes.byteLength), 403);
    // The same delete, signed by the owner, goes through: the refusal was the key's rights.
    expect(await readJson(await remove(s, 1, entry.ID))).toEqual({ Status: "Success" });
  });

  test("is refused for a login, for minting an access key (action keys) and for replacing the age identity (action age)", async () => {
    const s = await owner();
    const key = fresh();
    const k = await granted(s, key);
    const token = newToken();
    const timestamp = Math.floor(clock / 1000);
    const signature = await gw.sign.login(key, { did: s.did, token, timestamp });
    await refusal(await gw.app.handle(postJson("/login", { did: s.did, token, timestamp, signature }, { accept: "application/json" })), 401);

    const payload = "rw:*:0";
    const mintSig = await gw.sign.request(key, { did: s.did, token: k.token, requestID: 1, action: "keys", payload });
    const mint = await gw.app.handle(postJson("/v2/keys", { did: s.did, token: k.token, requestID: "1", payload, signature: mintSig }, bearer(s)));
    expect((await refusal(mint, 401)).result).toBe(-1);
    // The same request signed by the owner mints: the refusal was the key's.
    const ownerSig = await gw.sign.request(s.account, { did: s.did, token: k.token, requestID: 2, action: "keys", payload });
    expect((await gw.app.handle(postJson("/v2/keys", { did: s.did, token: k.token, requestID: "2", payload, signature: ownerSig }, bearer(s)))).status).toBe(200);

    // The age identity's replacement, with storage sessions that do know the session keys: refused all the same.
    const encryption = createEncryption({ sql: gw.database.sql, sessions: createSessions({ sql: gw.database.sql, resolver: gw.resolver, domain: gw.domain, chainId, sessionKeys }) });
    const ageApp = buildApp({ config: gw.config, log: gw.log, health: {}, chain: gw.chain.context, accounts: gw.accounts, encryption });
    const salt = `0x${"ab".repeat(32)}`;
    const put = (body: unknown) => ageApp.handle(new Request(`${BASE}/v2/keys/age`, { method: "PUT", headers: { ...bearer(s), "content-type": "application/json" }, body: JSON.stringify(body) }));
    expect((await put({ wrapped: "first", salt })).status).toBe(200);
    const agePayload = replacePayload("second", salt);
    const ageSig = await gw.sign.request(key, { did: s.did, token: k.token, requestID: 3, action: "age", payload: agePayload });
    await refusal(await put({ wrapped: "second", salt, replace: true, did: s.did, token: k.token, requestID: "3", payload: agePayload, signature: ageSig }), 401, /not the DID's owner/);
  });

  test("is refused after its expiry, for uploads and for vouchers", async () => {
    const s = await owner();
    const key = fresh();
    const k = await granted(s, key, { seconds: 60 });
    const bytes = crypto.getRandomValues(new Uint8Array(1000));
    const up = await upload(k, 1, bytes);
    expect(up.status).toBe(200);
    const { Cid } = await readJson(up);
    clock += 60_000;
    try {
      await refusal(await upload(k, 2, bytes), 401);
      await refusal(await download(s, key, Cid, bytes.byteLength), 403);
    } finally {
      clock = Date.now();
    }
  });

  test("is refused once revoked, and a revoked key cannot be granted again", async () => {
    const s = await owner();
    const key = fresh();
    const k = await granted(s, key);
    expect((await listed(s)).map((g) => g.key)).toEqual([key.address]);
    const del = await routes.handle(new Request(`${BASE}/v2/session-grants/${key.address}`, { method: "DELETE", headers: bearer(s) }));
    expect(await readJson(del)).toEqual({ result: 1 });
    await refusal(await upload(k, 1), 401);
    await refusal(await register(s, key), 401, /revoked/);
    expect(await listed(s)).toEqual([]);
  });

  test("signed by a delegate: holds while the delegate may sign for the DID", async () => {
    const ownerAccount = await gw.chain.anvil.newAccount();
    const delegate = await gw.chain.anvil.newAccount();
    const chain = await connectGateway(BASE, { account: ownerAccount, fetch: gw.fetch });
    await chain.addDelegate(delegate.address, 3600n);
    const s = await gw.session(ownerAccount);
    const key = fresh();
    const k = await granted(s, key, { by: delegate });
    expect((await listed(s))[0]?.signer).toBe(delegate.address);
    expect((await upload(k, 1)).status).toBe(200);
    await chain.revokeDelegate(delegate.address);
    // The resolver caches answers for up to a second here: the refusal comes within that, plus the
    // registry read of a loaded machine. Either of the upload's two signatures may be the first
    // refused: its signed request (401) or its voucher (517, the voucher's payer is no key of the DID).
    const deadline = Date.now() + 15_000;
    let status = 200;
    for (let id = 2; status === 200 && Date.now() < deadline; id++) {
      status = (await upload(k, id)).status;
      if (status === 200) await Bun.sleep(250);
    }
    expect([401, 517]).toContain(status);
  });
});

describe("the SDK with a session key (as the console uses it)", () => {
  test("one wallet signature (the grant), then the key uploads and downloads in a row from its own voucher counter", async () => {
    const ownerAccount = await gw.chain.anvil.newAccount();
    const s = await gw.session(ownerAccount);
    const key = fresh();
    const app = buildApp({ config: gw.config, log: gw.log, health: {}, chain: gw.chain.context, accounts: gw.accounts, storage: gw.storage, grants });
    const fetch = appFetch(app);
    const store = await connectStorage({ baseUrl: BASE, account: key, did: s.did, fetch, accessToken: s.accessToken });
    const client = sessionGrantsClient({ baseUrl: BASE, accessToken: () => s.accessToken, fetch });
    const prompts: string[] = [];
    const reg = await grantSessionKey({
      grants: client,
      origin: ORIGIN,
      address: ownerAccount.address,
      did: s.did,
      key: key.address,
      chainId,
      signMessage: (message) => {
        prompts.push(message.split("\n")[0] as string);
        return ownerAccount.signMessage({ message });
      },
    });
    expect(prompts).toEqual([`${ORIGIN} wants you to sign in with your Ethereum account:`]);
    store.useSession(reg.token);
    // Each transfer's voucher starts from the key's counter (GET /traffichash?payer=): signed
    // from the account's, the second one fell short by what the first had moved.
    const bytes = crypto.getRandomValues(new Uint8Array(5000));
    const first = await store.upload("dfs", bytes, { name: "a.bin" });
    const second = await store.upload("dfs", bytes, { name: "b.bin" });
    expect(second.Cid).toBe(first.Cid);
    for (let i = 0; i < 2; i++) expect(new Uint8Array(await (await store.download("dfs", first.Cid, { size: bytes.byteLength })).arrayBuffer())).toEqual(bytes);
    const counter: Json = await readJson(await gw.app.handle(get(`/traffichash?size=0&payer=${key.address}`, { headers: bearer(s) })));
    expect(Number(counter.used)).toBeGreaterThanOrEqual(4 * bytes.byteLength);
    expect((await client.list()).map((g) => g.key)).toEqual([key.address]);
  });

  test("GET /traffichash?payer= answers only for the account or its keys", async () => {
    const s = await owner();
    const stranger = fresh();
    await refusal(await gw.app.handle(get(`/traffichash?size=0&payer=${stranger.address}`, { headers: bearer(s) })), 401);
    await refusal(await gw.app.handle(get(`/traffichash?size=0&payer=nope`, { headers: bearer(s) })), 400);
    expect((await gw.app.handle(get(`/traffichash?size=0&payer=${s.account.address}`, { headers: bearer(s) }))).status).toBe(200);
  });
});

/** After a refusal the key signs nothing: no grant was stored, no session opened. */
async function nothingGranted(s: Session, key: LocalAccount) {
  expect((await listed(s)).filter((g) => g.key === key.address)).toEqual([]);
  expect(await grants!.allows({ canonical: s.did } as Did, key.address, "upload")).toBe(false);
}

describe("registering a grant", () => {
  test("the retired EIP-712 SessionGrant(key, validUntil) is refused with an error naming the format that replaced it", async () => {
    const s = await owner();
    const key = fresh();
    const validUntil = Math.floor(clock / 1000) + 3600;
    const signature = await s.account.signTypedData({
      domain: gw.domain,
      types: { SessionGrant: [{ name: "key", type: "address" }, { name: "validUntil", type: "uint64" }] },
      primaryType: "SessionGrant",
      message: { key: key.address, validUntil: BigInt(validUntil) },
    });
    await refusal(await post(s, { key: key.address, validUntil, signature }), 400, /EIP-712 SessionGrant.*no longer accepted.*EIP-4361/);
    await refusal(await upload({ ...s, account: key }, 1), 401);
    await nothingGranted(s, key);
  });

  test("a grant for DID X signed by a key that cannot sign for X is refused", async () => {
    const s = await owner();
    const key = fresh();
    const stranger = fresh();
    await refusal(await register(s, key, { by: stranger }), 401, /may not sign for/);
    await nothingGranted(s, key);
  });

  test("a grant is bound to the DID it names: presented with another DID's token it is refused, even when its signer may sign for both", async () => {
    const x = await gw.chain.anvil.newAccount();
    const yOwner = await gw.chain.anvil.newAccount();
    // X's owner is also a delegate of Y: its signature counts for both DIDs.
    await (await connectGateway(BASE, { account: yOwner, fetch: gw.fetch })).addDelegate(x.address, 3600n);
    const sx = await gw.session(x);
    const sy = await gw.session(yOwner);
    const key = fresh();
    // Made for X (a nonce of Y's, so that only the DID decides), sent with Y's token.
    const forX = await signedGrant(sx, key, { nonce: await nonceFor(sy) });
    await refusal(await post(sy, forX), 403, new RegExp(`grant is for ${sx.did}`));
    await nothingGranted(sy, key);
    // Named for Y and signed by X's owner (Y's delegate), it is Y's grant.
    const forY = await signedGrant(sy, key, { by: x });
    expect((await post(sy, forY)).status).toBe(200);
    expect((await listed(sx)).filter((g) => g.key === key.address)).toEqual([]);
  });

  test("a grant from an origin that is not allowed, on another scheme or chain, is refused", async () => {
    const s = await owner();
    const key = fresh();
    await refusal(await register(s, key, { origin: "https://evil.example" }), 401, /not an allowed origin/);
    await refusal(await register(s, key, { origin: "https://localhost:8080" }), 401, /not an allowed origin/);
    const { message } = await signedGrant(s, key);
    const otherChain = message.replace(`Chain ID: ${chainId}`, "Chain ID: 1");
    await refusal(await post(s, { message: otherChain, signature: await s.account.signMessage({ message: otherChain }) }), 401, /chain/);
    await nothingGranted(s, key);
  });

  test("a nonce is used once, for its own DID, within its time; a made-up one is unknown", async () => {
    const s = await owner();
    const other = await owner();
    const key = fresh();
    const grant = await signedGrant(s, key);
    expect((await post(s, grant)).status).toBe(200);
    await refusal(await post(s, grant), 401, /already used/);
    await refusal(await register(s, fresh(), { nonce: "madeUpNonce12345" }), 401, /not issued/);
    await refusal(await register(s, fresh(), { nonce: await nonceFor(other) }), 401, /not issued/);
    // A nonce 11 minutes old has expired (issued at the same time as its message, as a client does).
    const late = fresh();
    const stale = await signedGrant(s, late);
    clock += 11 * 60_000;
    try {
      const again = await signedGrant(s, late, { nonce: (stale.message.match(/^Nonce: (\S+)$/m) as RegExpMatchArray)[1] });
      await refusal(await post(s, again), 401, /nonce has expired/);
    } finally {
      clock = Date.now();
    }
    await nothingGranted(s, late);
  });

  test("two registrations of one message at once: one grant, the other refused", async () => {
    const s = await owner();
    const key = fresh();
    const grant = await signedGrant(s, key);
    const answers = await Promise.all([post(s, grant), post(s, grant)]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 401]);
  });

  test("an expired grant, one over 24 hours, one without an Expiration Time or issued in the future is refused", async () => {
    const s = await owner();
    const key = fresh();
    await refusal(await register(s, key, { issuedAt: new Date(clock - 7200_000) }), 401, /expired/);
    await refusal(await register(s, key, { seconds: 24 * 3600 + 60 }), 400, /at most 24 hours/);
    await refusal(await register(s, key, { issuedAt: new Date(clock + 600_000) }), 400, /future/);
    const { message } = await signedGrant(s, key);
    const open = message.replace(/^Expiration Time: .*\n/m, "");
    await refusal(await post(s, { message: open, signature: await s.account.signMessage({ message: open }) }), 400, /Expiration Time/);
    await nothingGranted(s, key);
  });

  test("a ReCap may grant upload, delete and voucher only: a login, a key mint, the age identity or a purchase is refused", async () => {
    const s = await owner();
    const key = fresh();
    for (const ability of ["login", "keys", "age", "buyspace"]) {
      const nonce = await nonceFor(s);
      const att = { [s.did]: { [`stowage/${ability}`]: [{}], "stowage/upload": [{}] } };
      const message = createSiweMessage({
        scheme: "http",
        domain: "localhost:8080",
        address: s.account.address,
        statement: `${GRANT_STATEMENT} ${recapStatement(JSON.parse(JSON.stringify(att)))}`,
        uri: sessionKeyUri(chainId, key.address),
        version: "1",
        chainId,
        nonce,
        issuedAt: new Date(clock),
        expirationTime: new Date(clock + 3600_000),
        resources: [encodeRecap(att)],
      });
      await refusal(await post(s, { message, signature: await s.account.signMessage({ message }) }), 400, new RegExp(`not stowage/${ability}`));
    }
    await nothingGranted(s, key);
  });

  test("a statement that does not say what the ReCap grants, a URI that is not the key, or a signature by another key is refused", async () => {
    const s = await owner();
    const key = fresh();
    const { message } = await signedGrant(s, key);
    const quiet = message.replace(/I further authorize.*$/m, "Nothing to see here.");
    await refusal(await post(s, { message: quiet, signature: await s.account.signMessage({ message: quiet }) }), 400, /ReCap's words/);
    const { message: m2 } = await signedGrant(s, key);
    const site = m2.replace(/^URI: .*$/m, `URI: ${ORIGIN}`);
    await refusal(await post(s, { message: site, signature: await s.account.signMessage({ message: site }) }), 400, /did:pkh/);
    const { message: m3 } = await signedGrant(s, key);
    await refusal(await post(s, { message: m3, signature: await fresh().signMessage({ message: m3 }) }), 401, /signature does not match/);
    await refusal(await post(s, { message: "hello", signature: "0x00" }), 400);
    await nothingGranted(s, key);
  });

  test("nonces are bounded per DID; an account without a DID gets none", async () => {
    const s = await owner();
    for (let i = 0; i < MAX_NONCES_PER_DID; i++) await nonceFor(s);
    const over = await routes.handle(postJson("/v2/session-grants/nonce", {}, bearer(s)));
    await refusal(over, 429, /unused grant nonces/);
    expect(Number(over.headers.get("retry-after"))).toBeGreaterThan(0);
    await refusal(await routes.handle(postJson("/v2/session-grants/nonce", {}, { authorization: "Bearer nope" })), 401);
    await refusal(await routes.handle(postJson("/v2/session-grants", {}, { authorization: "Bearer nope" })), 401);
  });
});
