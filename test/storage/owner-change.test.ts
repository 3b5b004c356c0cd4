/**
 * Authority follows the registry: after the DID's owner changes from K to N in the ERC-1056
 * registry (the recovery a user runs when K is stolen), every credential K holds or can make for
 * the DID is refused — a voucher for a download or an upload, POST /login, an EIP-4361 sign-in,
 * the refresh of its sessions, the access tokens it already holds, an S3 access key it minted and
 * a session grant it signed — within the resolver's cache time, and N's work on each. On anvil with
 * our contracts, through the SDK, the account API and the S3 API on a socket; the resolver's clock
 * is the test's, with the cache time the server runs with.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { S3Client } from "bun";
import { Elysia } from "elysia";
import type { Address } from "viem";
import { generatePrivateKey, privateKeyToAccount, type LocalAccount } from "viem/accounts";
import { didRegistryAbi } from "../../src/chain/artifacts/index.ts";
import { createGrants, grantsRoutes, type Grants } from "../../src/grants/index.ts";
import { errorHandler } from "../../src/http/error-handler.ts";
import { rememberClientIp } from "../../src/http/client-ip.ts";
import { canonicalDid, type Did } from "../../src/identity/did.ts";
import { sessionGrantMessage, type GrantAbility } from "../../src/sdk/grants.ts";
import { siweSignatureValid } from "../../src/accounts/evm.ts";
import { openSession } from "../../src/authorities/sessions.ts";
import { keysClient } from "../../src/sdk/keys.ts";
import { connectStorage, StorageApiError } from "../../src/sdk/storage.ts";
import { bearer, evmLogin, type Call } from "../support/accounts.ts";
import { get, postJson, readJson } from "../support/app.ts";
import { BASE, testGateway } from "../support/storage.ts";
import { s3ApiOver } from "../s3api/harness.ts";

let clock = Date.now();
let grants: Grants | undefined;
// The storage service is built before the grants service (which needs its database): it asks through this.
const sessionKeys = { allows: (did: Did, signer: Address, ability: GrantAbility) => (grants as Grants).allows(did, signer, ability) };
const gw = await testGateway({ ipfs: false, resolverNow: () => clock, extra: { sessionKeys } });
grants = createGrants({
  sql: gw.database.sql,
  resolver: gw.resolver,
  chainId: gw.config.chainId,
  allowedOrigins: gw.config.allowedOrigins,
  verifySignature: (address, message, signature) => siweSignatureValid({ publicClient: gw.chain.context.publicClient, log: gw.log }, address, message, signature),
  openSession: async (d, token) => void (await openSession(gw.database.sql, d, token, Math.floor(Date.now() / 1000))),
});
const grantApp = new Elysia().use(errorHandler(gw.log)).use(grantsRoutes({ grants, tokens: gw.accounts.tokens, chainId: gw.config.chainId }));
const { s3 } = await s3ApiOver(gw);

/** The account API as a client calls it (each call from an address of its own). */
let calls = 0;
const call: Call = async (method, path, { body, headers = {} } = {}) => {
  const request = new Request(`${BASE}${path}`, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  rememberClientIp(request, `client-${++calls}`);
  const res = await gw.app.handle(request);
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
};

/** `account` for logins and signed requests, with its vouchers signed by `payer` instead. */
const vouchersBy = (account: LocalAccount, payer: LocalAccount): LocalAccount => ({
  ...account,
  signTypedData: (typed) => (typed.primaryType === "Voucher" ? payer.signTypedData(typed) : account.signTypedData(typed)),
});

const statusOf = (p: Promise<unknown>) => p.then(() => 200, (err: unknown) => (err instanceof StorageApiError ? err.status : Promise.reject(err)));
const failure = (p: Promise<unknown>) => p.then(() => undefined, (err: unknown) => (err instanceof StorageApiError ? err : Promise.reject(err)));
const listWith = async (accessToken: string) => gw.app.handle(get("/dfs/listobjects", { headers: bearer(accessToken) }));
const refresh = (refreshToken: string) => call("POST", "/v2/login/refresh", { headers: { authorization: refreshToken } });
/** A console's grant of `key` for the DID, signed by `by` (EIP-4361 with its ReCap): its status, and the key's storage session. */
const registerGrant = async (accessToken: string, by: LocalAccount, key: Address): Promise<{ status: number; token: string }> => {
  const nonce = await grantApp.handle(postJson("/v2/session-grants/nonce", {}, bearer(accessToken)));
  if (nonce.status !== 200) return { status: nonce.status, token: "" };
  const issuedAt = new Date();
  const message = sessionGrantMessage({
    origin: gw.config.allowedOrigins[0] as string,
    address: by.address,
    did,
    key,
    chainId: gw.config.chainId,
    nonce: (await readJson(nonce)).data.nonce,
    issuedAt,
    expirationTime: new Date(issuedAt.getTime() + 3600_000),
  });
  const res = await grantApp.handle(postJson("/v2/session-grants", { message, signature: await by.signMessage({ message }) }, bearer(accessToken)));
  return { status: res.status, token: res.status === 200 ? (await readJson(res)).data.token : "" };
};
const s3Client = (key: { accessKeyId: string; secretAccessKey: string }) => new S3Client({ ...key, endpoint: s3.url, bucket: "dfs", region: "us-east-1" });
const s3Names = (key: { accessKeyId: string; secretAccessKey: string }) =>
  s3Client(key)
    .list()
    .then(
      (r) => (r.contents ?? []).map((c) => c.key),
      (err: { code?: string }) => err.code,
    );
const bytesOf = (text: string) => new TextEncoder().encode(text);

// ---- Before the change: K, the DID's own key, holds every kind of credential. ----
const K = await gw.chain.anvil.newAccount();
const N = privateKeyToAccount(generatePrivateKey());
const did = canonicalDid(K.address, gw.config.chainId);

const kStore = await connectStorage({ baseUrl: BASE, account: K, fetch: gw.fetch });
await kStore.login();
const kFile = await kStore.upload("dfs", bytesOf("K's file, the DID's"), { name: "k.txt" });
// A DID login's tokens (POST /login, JSON) and a wallet sign-in's (EIP-4361).
const kDidLogin = await gw.session(K);
const kSiwe = await evmLogin(call, K);
const kS3Key = await keysClient({ baseUrl: BASE, store: kStore, fetch: gw.fetch }).create({});
// A console session key K granted, and the same browser's grant after it: signing through S.
const S = privateKeyToAccount(generatePrivateKey());
const kGrant = await registerGrant(kDidLogin.accessToken, K, S.address);
const sStore = await connectStorage({ baseUrl: BASE, account: S, did, accessToken: kDidLogin.accessToken, fetch: gw.fetch });
sStore.useSession(kGrant.token);

const before = {
  download: await statusOf(kStore.download("dfs", kFile.Cid, { size: kFile.Size }).then((r) => r.text())),
  didLogin: (await listWith(kDidLogin.accessToken)).status,
  siwe: { status: kSiwe.status, did: kSiwe.body?.data?.did, list: (await listWith(kSiwe.body.data.accessToken)).status },
  s3: await s3Names(kS3Key),
  grant: kGrant.status,
  sessionKeyUpload: await statusOf(sStore.upload("dfs", bytesOf("by K's session key"), { name: "s.txt" })),
};

// ---- The change: K hands the DID to N (an on-chain transaction K signs). ----
const changed = await gw.chain.anvil.wallet(K).writeContract({ address: gw.chain.context.contracts.didRegistry, abi: didRegistryAbi, functionName: "changeOwner", args: [K.address, N.address] });
const receipt = await gw.chain.anvil.publicClient.waitForTransactionReceipt({ hash: changed });
// Within the cache time the resolver still answers what it saw: K's token still lists. The cache
// keeps an answer at most 10 s (the gateway's promise: a revocation holds within 10 s).
const withinCacheTime = (await listWith(kDidLogin.accessToken)).status;
clock += 10_000;

test("before the change every credential of K worked", () => {
  expect(before).toEqual({ download: 200, didLogin: 200, siwe: { status: 200, did, list: 200 }, s3: ["k.txt"], grant: 200, sessionKeyUpload: 200 });
  expect(receipt.status).toBe("success");
});

test("an access token K holds works until the resolver's cache time (10 s) passes, no longer", async () => {
  expect(withinCacheTime).toBe(200);
  const res = await listWith(kDidLogin.accessToken);
  expect(res.status).toBe(401);
  expect((await readJson(res)).Description).toMatch(/may no longer sign for its DID/);
});

describe("the old key K is refused on every path", () => {
  test("a voucher K signs: no download, with or without the DID named, and no upload", async () => {
    // N's access token and signed requests, K's vouchers: only the voucher is K's.
    const forDid = await connectStorage({ baseUrl: BASE, account: vouchersBy(N, K), did, fetch: gw.fetch });
    await forDid.login();
    const named = await failure(forDid.download("dfs", kFile.Cid, { size: kFile.Size }));
    expect(named?.status).toBe(403);
    // Without `did`, a voucher reads the files of its payer's own DID: K's DID is N's now.
    const own = await connectStorage({ baseUrl: BASE, account: vouchersBy(N, K), fetch: gw.fetch });
    await own.login();
    const unnamed = await failure(own.download("dfs", kFile.Cid, { size: kFile.Size }));
    expect(unnamed?.status).toBe(403);
    expect(unnamed?.body.Description).toMatch(/may no longer sign for its own DID/);
    const up = await failure(forDid.upload("dfs", bytesOf("paid by K"), { name: "paid-by-k.txt" }));
    expect(up?.status).toBe(517);
    expect(up?.body.Description).toMatch(/payer is not the Bearer account or one of its keys/);
    // Nothing of it was kept.
    const n = await connectStorage({ baseUrl: BASE, account: N, did, fetch: gw.fetch });
    await n.login();
    expect((await n.list("dfs")).Object.map((f) => f.Name).sort()).toEqual(["k.txt", "s.txt"]);
  });

  test("POST /login and the EIP-4361 sign-in agree: K signs in to neither", async () => {
    const login = await statusOf(connectStorage({ baseUrl: BASE, account: K, fetch: gw.fetch }).then((c) => c.login()));
    expect(login).toBe(401);
    const siwe = await evmLogin(call, K);
    expect(siwe.status).toBe(401);
    expect(siwe.body).toMatchObject({ result: -1, error: "UNAUTHORIZED" });
    expect(siwe.body.message).toMatch(/another owner/);
  });

  test("K's sessions refresh no more (DID login and sign-in), and end", async () => {
    for (const refreshToken of [kDidLogin.refreshToken, kSiwe.body.data.refreshToken as string]) {
      const r = await refresh(refreshToken);
      expect(r.status).toBe(401);
      expect(r.body).toMatchObject({ result: -1, error: "UNAUTHORIZED" });
    }
    // Revoked, not only refused: the session stays over whatever the registry says later.
    const again = await refresh(kDidLogin.refreshToken);
    expect(again.body.message).toMatch(/revoked/);
  });

  test("the access tokens K holds open nothing: storage, the account API, keys", async () => {
    for (const accessToken of [kDidLogin.accessToken, kSiwe.body.data.accessToken as string, kStore.accessToken as string]) {
      expect((await listWith(accessToken)).status).toBe(401);
      expect((await gw.app.handle(get("/traffichash?size=1", { headers: bearer(accessToken) }))).status).toBe(401);
      const info = await call("GET", "/v2/user/info", { headers: bearer(accessToken) });
      expect(info.status).toBe(401);
      expect(info.body.message).toMatch(/may no longer sign for its DID/);
      expect((await call("GET", "/v2/keys", { headers: bearer(accessToken) })).status).toBe(401);
      expect((await call("GET", "/v2/auth/me", { headers: bearer(accessToken) })).status).toBe(401);
    }
  });

  test("the S3 access key K minted is refused", async () => {
    expect(await s3Names(kS3Key)).toBe("InvalidAccessKeyId");
  });

  test("the session key K granted signs nothing more, even on N's login", async () => {
    // N logs in for the DID; S signs the upload and its voucher under K's grant, in N's session.
    const n = await gw.session(N, { did });
    const viaN = await connectStorage({ baseUrl: BASE, account: S, did, accessToken: n.accessToken, fetch: gw.fetch });
    viaN.useSession(n.token);
    const up = await failure(viaN.upload("dfs", bytesOf("by K's session key, late"), { name: "late.txt" }));
    expect(up?.status).toBe(401);
    expect(up?.body.Description).toMatch(/nor a session key with a live grant/);
    const read = await failure(viaN.download("dfs", kFile.Cid, { size: kFile.Size }));
    expect(read?.status).toBe(403);
    // And K can register no new grant (its token is refused before its signature is read).
    expect((await registerGrant(kDidLogin.accessToken, K, privateKeyToAccount(generatePrivateKey()).address)).status).toBe(401);
  });
});

describe("the new owner N works on each", () => {
  test("POST /login, its tokens and their refresh, uploads and downloads with its vouchers", async () => {
    const n = await gw.session(N, { did });
    expect((await listWith(n.accessToken)).status).toBe(200);
    const refreshed = await refresh(n.refreshToken);
    expect(refreshed.status).toBe(200);
    expect((await listWith(refreshed.body.data.accessToken)).status).toBe(200);

    const store = await connectStorage({ baseUrl: BASE, account: N, did, fetch: gw.fetch });
    await store.login();
    expect(await (await store.download("dfs", kFile.Cid, { size: kFile.Size })).text()).toBe("K's file, the DID's");
    const mine = await store.upload("dfs", bytesOf("N's, for the DID"), { name: "n.txt" });
    expect((await store.list("dfs")).Object.map((f) => f.Name)).toContain("n.txt");
    expect(await (await store.download("dfs", mine.Cid, { size: mine.Size })).text()).toBe("N's, for the DID");
  });

  test("N's own sign-in (EIP-4361) carries N's own DID", async () => {
    const siwe = await evmLogin(call, N);
    expect(siwe.status).toBe(200);
    expect(siwe.body.data.did).toBe(canonicalDid(N.address, gw.config.chainId));
    const r = await refresh(siwe.body.data.refreshToken);
    expect(r.status).toBe(200);
  });

  test("an S3 access key N mints reads the DID's files", async () => {
    const store = await connectStorage({ baseUrl: BASE, account: N, did, fetch: gw.fetch });
    await store.login();
    const key = await keysClient({ baseUrl: BASE, store, fetch: gw.fetch }).create({});
    expect(await s3Names(key)).toContain("k.txt");
    expect(await s3Client(key).file("k.txt").text()).toBe("K's file, the DID's");
  });

  test("a session key N grants signs uploads and vouchers", async () => {
    const n = await gw.session(N, { did });
    const key = privateKeyToAccount(generatePrivateKey());
    const granted = await registerGrant(n.accessToken, N, key.address);
    expect(granted.status).toBe(200);
    const store = await connectStorage({ baseUrl: BASE, account: key, did, accessToken: n.accessToken, fetch: gw.fetch });
    store.useSession(granted.token);
    const entry = await store.upload("dfs", bytesOf("by N's session key"), { name: "ns.txt" });
    expect(await (await store.download("dfs", entry.Cid, { size: entry.Size })).text()).toBe("by N's session key");
  });
});
