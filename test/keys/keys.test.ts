/**
 * S3 access keys (D18) through the account API: POST /v2/keys needs the Bearer token and a signed
 * restricted request (D5, action "keys"); the secret is shown once and kept sealed; GET lists
 * without secrets; DELETE revokes the caller's own keys only. `findAccessKey` (the S3 listener's
 * lookup) sees only keys that may authenticate now: not revoked, not expired, and whose signer
 * may still sign for the DID.
 */
import { describe, expect, test } from "bun:test";
import { SignJWT } from "jose";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { didRegistryAbi } from "../../src/chain/artifacts/index.ts";
import { createKeys, findAccessKey, findPinsToken, KEEP_DEAD_KEYS_MS } from "../../src/keys/index.ts";
import { AccountError } from "../../src/http/errors.ts";
import { parseDid, parseDidOrAddress } from "../../src/identity/did.ts";
import { secretBox } from "../../src/keys/secret-box.ts";
import { connectGateway } from "../../src/sdk/chain.ts";
import { keysClient } from "../../src/sdk/keys.ts";
import { AccountApiError } from "../../src/sdk/account.ts";
import { get, readJson, type Json } from "../support/app.ts";
import { BASE, type Session, testGateway } from "../support/storage.ts";
import { TEST_DB } from "../support/db.ts";
import type { Param, Sql } from "../../src/db/sql.ts";

// No DID cache: a delegate revoked on chain is seen at once (the server's bound is 10 s, D2).
const gw = await testGateway({ ipfs: false, resolverCacheMs: 0 });
const chainId = gw.chain.context.chain.id;
const deps = { sql: gw.database.sql, secretsKey: gw.secrets.secretsKey, resolver: gw.resolver, chainId };
const nowS = () => Math.floor(Date.now() / 1000);

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** POST /v2/keys as a client sends it; `fields` replaces or (undefined) drops fields after signing. */
async function mintRequest(s: Session, requestID: number, payload: string, o: { signed?: string; fields?: Record<string, unknown>; accessToken?: string } = {}) {
  const signature = await gw.sign.request(s.account, { did: s.did, token: s.token, requestID, action: "keys", payload: o.signed ?? payload });
  const body: Record<string, unknown> = { did: s.did, token: s.token, requestID: String(requestID), payload, signature, ...o.fields };
  for (const [k, v] of Object.entries(body)) if (v === undefined) delete body[k];
  return new Request(`${BASE}/v2/keys`, { method: "POST", headers: { "content-type": "application/json", ...bearer(o.accessToken ?? s.accessToken) }, body: JSON.stringify(body) });
}
const mint = async (s: Session, requestID: number, payload: string, o: Parameters<typeof mintRequest>[3] = {}) => gw.app.handle(await mintRequest(s, requestID, payload, o));

const list = async (s: Session) => gw.app.handle(get("/v2/keys", { headers: bearer(s.accessToken) }));
const revoke = async (s: Session, id: string) => gw.app.handle(new Request(`${BASE}/v2/keys/${id}`, { method: "DELETE", headers: bearer(s.accessToken) }));

/** Every key row of a DID, as stored. */
const rows = (did: string) =>
  gw.database.sql.all<{ id: string; accessKeyId: string; secretEnc: string; revokedAt: number | null }>(
    `SELECT id, access_key_id AS "accessKeyId", secret_enc AS "secretEnc", revoked_at AS "revokedAt" FROM access_keys WHERE did = $1`,
    [did],
  );

async function expectError(res: Response, status: number, error: string, message?: RegExp) {
  const body: Json = await readJson(res);
  expect({ status: res.status, body }).toMatchObject({ status, body: { result: -1, error } });
  if (message) expect(body.message).toMatch(message);
}

const highest = async (s: Session) => (await readJson(await gw.app.handle(get(`/login?did=${s.did}`)))).requestID;
const newSession = async () => gw.session(await gw.chain.anvil.newAccount());

describe("minting", () => {
  test("a valid signed request mints a key, shown once, that findAccessKey finds", async () => {
    const s = await newSession();
    const expiry = nowS() + 3600;
    const res = await mint(s, 1, `ro:dfs:${expiry}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const { result, data } = await readJson(res);
    expect(result).toBe(1);
    expect(Object.keys(data).sort()).toEqual(["accessKeyId", "bucket", "expiresAt", "scope", "secretAccessKey"]);
    expect(data).toMatchObject({ scope: "ro", bucket: "dfs", expiresAt: expiry });
    expect(data.accessKeyId).toMatch(/^STW[A-Z2-7]{17}$/);
    expect(data.secretAccessKey).toMatch(/^[A-Za-z0-9_-]{40}$/);

    const found = await findAccessKey(deps, data.accessKeyId);
    expect(found).toEqual({ id: expect.any(String), accessKeyId: data.accessKeyId, secretAccessKey: data.secretAccessKey, did: s.did, access: "ro", bucket: "dfs", expiresAt: expiry });
    expect(await highest(s)).toBe("1");
  });

  test("the listing shows the key without its secret, and never again the secret", async () => {
    const s = await newSession();
    const minted = (await readJson(await mint(s, 1, "rw:*:0"))).data;
    const res = await list(s);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain(minted.secretAccessKey);
    const { data } = JSON.parse(text);
    expect(data).toEqual([
      { id: expect.any(String), accessKeyId: minted.accessKeyId, scope: "rw", bucket: "*", expiresAt: null, createdAt: expect.any(Number), signer: s.account.address.toLowerCase() },
    ]);
    expect(Math.abs(data[0].createdAt - nowS())).toBeLessThan(60);
  });

  test("the secret at rest is sealed: not the plaintext, opens only with the secrets key and on its own row", async () => {
    const s = await newSession();
    const a = (await readJson(await mint(s, 1, "rw:dfs:0"))).data;
    const b = (await readJson(await mint(s, 2, "rw:ipfs:0"))).data;
    const stored = await rows(s.did);
    expect(stored).toHaveLength(2);
    const rowA = stored.find((r) => r.accessKeyId === a.accessKeyId) as (typeof stored)[number];
    const rowB = stored.find((r) => r.accessKeyId === b.accessKeyId) as (typeof stored)[number];
    for (const [row, key] of [[rowA, a], [rowB, b]] as const) {
      expect(row.secretEnc).not.toContain(key.secretAccessKey);
      expect(Buffer.from(row.secretEnc.slice(3), "base64url").toString("latin1")).not.toContain(key.secretAccessKey);
    }
    const box = secretBox(gw.secrets.secretsKey, "s3-access-key-secret");
    expect(box.open(rowA.secretEnc, rowA.id)).toBe(a.secretAccessKey);
    // Another key, or the sealed value moved onto another row, does not open.
    expect(() => secretBox(crypto.getRandomValues(new Uint8Array(32)), "s3-access-key-secret").open(rowA.secretEnc, rowA.id)).toThrow(/does not open/);
    expect(() => box.open(rowA.secretEnc, rowB.id)).toThrow(/does not open/);
  });

  test("two parallel mints with one requestID: one key", async () => {
    const s = await newSession();
    const [r1, r2] = await Promise.all([mintRequest(s, 1, "rw:*:0"), mintRequest(s, 1, "rw:*:0")]);
    const answers = await Promise.all([gw.app.handle(r1), gw.app.handle(r2)]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 401]);
    await expectError(answers.find((r) => r.status === 401) as Response, 401, "UNAUTHORIZED", /requestID already used/);
    expect(await rows(s.did)).toHaveLength(1);
  });

  test("the SDK mints, lists and revokes with its logged-in storage session", async () => {
    const { client } = await gw.user();
    const keys = keysClient({ baseUrl: BASE, store: client, fetch: gw.fetch });
    const expiresAt = new Date((nowS() + 600) * 1000);
    const a = await keys.create({ access: "ro", bucket: "ipfs", expiresAt });
    const b = await keys.create();
    expect(a).toMatchObject({ scope: "ro", bucket: "ipfs", expiresAt: Math.floor(expiresAt.getTime() / 1000) });
    expect(b).toMatchObject({ scope: "rw", bucket: "*", expiresAt: null });
    expect((await keys.list()).map((k) => k.accessKeyId).sort()).toEqual([a.accessKeyId, b.accessKeyId].sort());
    await keys.revoke(a.accessKeyId);
    expect((await keys.list()).map((k) => k.accessKeyId)).toEqual([b.accessKeyId]);
    // An upload after the mints takes the next requestID of the same session.
    await client.upload("dfs", new TextEncoder().encode(`after keys ${Math.random()}`), { name: "after" });
    expect((await client.loginInfo()).requestID).toBe("3");
    const err = await keys.create({ access: "rw", bucket: "dfs", expiresAt: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AccountApiError);
    expect(err).toMatchObject({ status: 400, error: "PARAM_ERROR" });
  });
});

describe("refusals store nothing", () => {
  test("without a signature, or with a signature of another payload or action", async () => {
    const s = await newSession();
    await expectError(await mint(s, 1, "rw:*:0", { fields: { signature: undefined } }), 401, "UNAUTHORIZED", /Missing parameter/);
    await expectError(await mint(s, 1, "rw:*:0", { signed: "rw:*:1" }), 401, "UNAUTHORIZED");
    const uploadSig = await gw.sign.request(s.account, { did: s.did, token: s.token, requestID: 1, action: "upload", payload: "rw:*:0" });
    await expectError(await mint(s, 1, "rw:*:0", { fields: { signature: uploadSig } }), 401, "UNAUTHORIZED");
    await expectError(await gw.app.handle(new Request(`${BASE}/v2/keys`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })), 401, "UNAUTHORIZED");
    expect(await rows(s.did)).toHaveLength(0);
    // None of them claimed requestID 1.
    expect(await highest(s)).toBe("0");
    expect((await mint(s, 1, "rw:*:0")).status).toBe(200);
  });

  test("a replayed requestID", async () => {
    const s = await newSession();
    const first = await mintRequest(s, 1, "rw:dfs:0");
    const replay = new Request(first.url, { method: "POST", headers: first.headers, body: await first.clone().text() });
    expect((await gw.app.handle(first)).status).toBe(200);
    await expectError(await gw.app.handle(replay), 401, "UNAUTHORIZED", /requestID already used/);
    expect(await rows(s.did)).toHaveLength(1);
  });

  test("the Bearer token of another DID", async () => {
    const a = await newSession();
    const b = await newSession();
    await expectError(await mint(a, 1, "rw:*:0", { accessToken: b.accessToken }), 401, "UNAUTHORIZED", /not the Bearer token's DID/);
    expect(await rows(a.did)).toHaveLength(0);
    expect(await rows(b.did)).toHaveLength(0);
  });

  test("a bad payload: 400, no requestID claimed", async () => {
    const s = await newSession();
    const bad = ["", "rw", "rw:dfs", "rw:dfs:0:1", "rx:dfs:0", "RW:dfs:0", "rw:s3:0", "rw:dfs:-1", "rw:dfs:1.5", "rw:dfs:01", `rw:dfs:${nowS() - 10}`, "rw:dfs:9999999999999"];
    for (const payload of bad) await expectError(await mint(s, 1, payload), 400, "PARAM_ERROR", /payload must be/);
    await expectError(await mint(s, 1, "rw:dfs:0", { fields: { payload: undefined } }), 400, "PARAM_ERROR", /payload is missing/);
    await expectError(await mint(s, 1, "rw:dfs:0", { fields: { payload: 7 } }), 400, "PARAM_ERROR");
    expect(await rows(s.did)).toHaveLength(0);
    expect(await highest(s)).toBe("0");
  });

  test("an account without a DID, and no token at all", async () => {
    const noDid = await new SignJWT({ typ: "access" })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setSubject("user@example.com")
      .setJti(crypto.randomUUID())
      .setIssuedAt()
      .setExpirationTime(nowS() + 600)
      .sign(gw.secrets.jwtKey);
    await expectError(await gw.app.handle(get("/v2/keys", { headers: bearer(noDid) })), 401, "UNAUTHORIZED", /DID accounts only/);
    await expectError(await gw.app.handle(get("/v2/keys")), 401, "UNAUTHORIZED");
    await expectError(await gw.app.handle(new Request(`${BASE}/v2/keys/x`, { method: "DELETE" })), 401, "UNAUTHORIZED");
  });
});

describe("revoking", () => {
  test("the owner revokes by id or access key id; findAccessKey no longer finds it; twice is 404", async () => {
    const s = await newSession();
    const a = (await readJson(await mint(s, 1, "rw:*:0"))).data;
    const b = (await readJson(await mint(s, 2, "rw:*:0"))).data;
    const idOfB = (await readJson(await list(s))).data.find((k: Json) => k.accessKeyId === b.accessKeyId).id;
    expect((await revoke(s, a.accessKeyId)).status).toBe(200);
    expect((await revoke(s, idOfB)).status).toBe(200);
    expect(await findAccessKey(deps, a.accessKeyId)).toBeUndefined();
    expect(await findAccessKey(deps, b.accessKeyId)).toBeUndefined();
    expect((await readJson(await list(s))).data).toEqual([]);
    await expectError(await revoke(s, a.accessKeyId), 404, "NOT_FOUND", /no such access key/);
  });

  test("another account cannot revoke a key: 404, and the key still works", async () => {
    const owner = await newSession();
    const other = await newSession();
    const key = (await readJson(await mint(owner, 1, "rw:*:0"))).data;
    const id = (await readJson(await list(owner))).data[0].id;
    await expectError(await revoke(other, key.accessKeyId), 404, "NOT_FOUND");
    await expectError(await revoke(other, id), 404, "NOT_FOUND");
    expect((await readJson(await list(other))).data).toEqual([]);
    expect((await findAccessKey(deps, key.accessKeyId))?.secretAccessKey).toBe(key.secretAccessKey);
  });

  test("GET /v2/keys/age is not a keys route (the encryption API's path)", async () => {
    const s = await newSession();
    await mint(s, 1, "rw:*:0");
    const res = await gw.app.handle(get("/v2/keys/age", { headers: bearer(s.accessToken) }));
    const body: Json = await readJson(res);
    expect(Array.isArray(body.data)).toBe(false);
    expect(JSON.stringify(body)).not.toContain("accessKeyId");
    // Nor a keys refusal: a `GET /v2/keys/:id` of ours would answer this path with "no such access key".
    expect(JSON.stringify(body)).not.toMatch(/access key/i);
  });
});

describe("pins tokens", () => {
  test("scope pins mints a Pinning Service API token that only findPinsToken takes, until revoked", async () => {
    const s = await newSession();
    const res = await mint(s, 1, "pins:ipfs:0");
    expect(res.status).toBe(200);
    const { data } = await readJson(res);
    expect(data).toMatchObject({ scope: "pins", bucket: "ipfs", expiresAt: null });
    expect(data.token).toBe(`${data.accessKeyId}.${data.secretAccessKey}`);
    expect(await findPinsToken(deps, data.token)).toEqual({ id: expect.any(String), did: s.did });
    // Not an S3 key: its id and secret do not sign S3 requests.
    expect(await findAccessKey(deps, data.accessKeyId)).toBeUndefined();
    // A wrong secret of the right length, a truncated one, no dot: nothing.
    const flipped = data.token.slice(0, -1) + (data.token.endsWith("A") ? "B" : "A");
    for (const bad of [flipped, data.token.slice(0, -1), data.accessKeyId, `${data.accessKeyId}.`]) expect(await findPinsToken(deps, bad)).toBeUndefined();
    const listed = (await readJson(await list(s))).data;
    expect(listed).toEqual([expect.objectContaining({ accessKeyId: data.accessKeyId, scope: "pins", bucket: "ipfs" })]);
    expect((await revoke(s, data.accessKeyId)).status).toBe(200);
    expect(await findPinsToken(deps, data.token)).toBeUndefined();
  });

  test("an S3 key is no pins token, and pins keys are on ipfs only", async () => {
    const s = await newSession();
    const { data } = await readJson(await mint(s, 1, "rw:ipfs:0"));
    expect(data.token).toBeUndefined();
    expect(await findPinsToken(deps, `${data.accessKeyId}.${data.secretAccessKey}`)).toBeUndefined();
    for (const [i, payload] of ["pins:dfs:0", "pins:*:0", "pins:0"].entries()) await expectError(await mint(s, 2 + i, payload), 400, "PARAM_ERROR");
  });

  test("the SDK mints a pins token with scope pins", async () => {
    const { client, account } = await gw.user();
    const minted = await keysClient({ baseUrl: BASE, store: client, fetch: gw.fetch }).create({ scope: "pins" });
    expect(minted.scope).toBe("pins");
    expect(await findPinsToken(deps, minted.token ?? "")).toMatchObject({ did: parseDidOrAddress(account.address, chainId).canonical });
  });
});

describe("findAccessKey", () => {
  test("unknown and malformed ids are not found", async () => {
    expect(await findAccessKey(deps, "STWAAAAAAAAAAAAAAAAA")).toBeUndefined();
    for (const bad of ["", "stwaaaaaaaaaaaaaaaaa", "AKIAIOSFODNN7EXAMPLE", "STW' OR 1=1 --"]) expect(await findAccessKey(deps, bad)).toBeUndefined();
  });

  test("an expired key is not found; before its expiry it is", async () => {
    const s = await newSession();
    const expiry = nowS() + 120;
    const key = (await readJson(await mint(s, 1, `rw:*:${expiry}`))).data;
    expect(await findAccessKey({ ...deps, now: () => expiry * 1000 - 1 }, key.accessKeyId)).toBeDefined();
    expect(await findAccessKey({ ...deps, now: () => expiry * 1000 }, key.accessKeyId)).toBeUndefined();
    expect(await findAccessKey({ ...deps, now: () => expiry * 1000 + 3_600_000 }, key.accessKeyId)).toBeUndefined();
  });

  test("a key minted by a delegate stops being found once the delegate is revoked on chain; the owner's keys stay", async () => {
    const owner = await gw.chain.anvil.newAccount();
    const delegate = privateKeyToAccount(generatePrivateKey());
    const registry = await connectGateway(BASE, { account: owner, fetch: gw.fetch });
    await registry.addDelegate(delegate.address, 3600n);
    const did = `did:ethr:0x${chainId.toString(16)}:${owner.address}`;

    const byDelegate = await gw.session(delegate, { did });
    const delegateKey = (await readJson(await mint(byDelegate, 1, "rw:*:0"))).data;
    const byOwner = await gw.session(owner);
    const ownerKey = (await readJson(await mint(byOwner, 1, "rw:*:0"))).data;
    const listed = (await readJson(await list(byOwner))).data;
    expect(listed.map((k: Json) => k.signer).sort()).toEqual([delegate.address.toLowerCase(), owner.address.toLowerCase()].sort());
    expect((await findAccessKey(deps, delegateKey.accessKeyId))?.did).toBe(byOwner.did);

    await registry.revokeDelegate(delegate.address);
    expect(await findAccessKey(deps, delegateKey.accessKeyId)).toBeUndefined();
    expect((await findAccessKey(deps, ownerKey.accessKeyId))?.secretAccessKey).toBe(ownerKey.secretAccessKey);
  });

  test("a key stops being found once the DID's owner changes", async () => {
    const owner = await gw.chain.anvil.newAccount();
    const s = await gw.session(owner);
    const key = (await readJson(await mint(s, 1, "rw:*:0"))).data;
    expect(await findAccessKey(deps, key.accessKeyId)).toBeDefined();
    const next = privateKeyToAccount(generatePrivateKey()).address;
    const hash = await gw.chain.anvil.wallet(owner).writeContract({ address: gw.chain.context.contracts.didRegistry, abi: didRegistryAbi, functionName: "changeOwner", args: [owner.address, next] });
    expect((await gw.chain.anvil.publicClient.waitForTransactionReceipt({ hash })).status).toBe("success");
    expect(await findAccessKey(deps, key.accessKeyId)).toBeUndefined();
  });
});

describe("limits and gateways", () => {
  /** A signed mint's fields, for calling the service directly. */
  const fields = async (s: Session, requestID: number, payload: string) => ({
    did: s.did,
    token: s.token,
    requestID: String(requestID),
    payload,
    signature: await gw.sign.request(s.account, { did: s.did, token: s.token, requestID, action: "keys", payload }),
  });
  const statusOf = (p: Promise<unknown>) => p.then(() => 200, (err: unknown) => (err instanceof AccountError ? err.status : Promise.reject(err)));

  test("an account holds at most maxKeys active keys; revoked and expired keys leave their place", async () => {
    const keys = createKeys({ ...deps, domain: gw.domain, maxKeys: 2 });
    const s = await newSession();
    const who = parseDid(s.did, chainId);
    const first = await keys.create(who, await fields(s, 1, "rw:*:0"));
    const [a, b] = await Promise.all([fields(s, 2, "rw:*:0"), fields(s, 3, "rw:*:0")]);
    expect((await Promise.all([statusOf(keys.create(who, a)), statusOf(keys.create(who, b))])).sort()).toEqual([200, 409]);
    expect(await rows(s.did)).toHaveLength(2);
    await keys.revoke(who, first.accessKeyId);
    const soon = await keys.create(who, await fields(s, 4, `ro:*:${nowS() + 1}`));
    expect(await statusOf(keys.create(who, await fields(s, 5, "rw:*:0")))).toBe(409);
    // Once `soon` has expired its place is free again.
    const later = createKeys({ ...deps, domain: gw.domain, maxKeys: 2, now: () => (soon.expiresAt as number) * 1000 + 1 });
    expect(await statusOf(later.create(who, await fields(s, 6, "rw:*:0")))).toBe(200);
  });

  test("revoking drops the sealed secret at once; a mint removes the account's keys dead for over 30 days, keeps newer ones and other accounts'", async () => {
    const logged: { msg: string; fields?: Record<string, unknown> }[] = [];
    const log = { debug() {}, warn() {}, error() {}, info: (msg: string, fields?: Record<string, unknown>) => void logged.push({ msg, fields }) };
    const clock = { t: Date.now() };
    const keys = createKeys({ ...deps, domain: gw.domain, now: () => clock.t, log });
    const s = await newSession();
    const other = await newSession();
    const who = parseDid(s.did, chainId);
    const old = await keys.create(who, await fields(s, 1, "rw:*:0"));
    const expiring = await keys.create(who, await fields(s, 2, `ro:*:${Math.floor(clock.t / 1000) + 60}`));
    const kept = await keys.create(who, await fields(s, 3, "rw:*:0"));
    const othersOld = await keys.create(parseDid(other.did, chainId), await fields(other, 1, "rw:*:0"));
    await keys.revoke(who, old.accessKeyId);
    await keys.revoke(parseDid(other.did, chainId), othersOld.accessKeyId);
    const stored = await rows(s.did);
    expect(stored.find((r) => r.accessKeyId === old.accessKeyId)?.secretEnc).toBe("");
    expect(stored.find((r) => r.accessKeyId === kept.accessKeyId)?.secretEnc).not.toBe("");

    clock.t += KEEP_DEAD_KEYS_MS; // the revocation is now exactly 30 days old, the expiry a minute less
    await keys.create(who, await fields(s, 4, "rw:*:0"));
    expect((await rows(s.did)).map((r) => r.accessKeyId)).not.toContain(old.accessKeyId);
    expect((await rows(s.did)).map((r) => r.accessKeyId)).toContain(expiring.accessKeyId);
    clock.t += 60_000;
    await keys.create(who, await fields(s, 5, "rw:*:0"));
    const left = (await rows(s.did)).map((r) => r.accessKeyId);
    expect(left).not.toContain(expiring.accessKeyId);
    expect(left).toContain(kept.accessKeyId);
    expect(left).toHaveLength(3);
    expect((await rows(other.did)).map((r) => r.accessKeyId)).toEqual([othersOld.accessKeyId]); // only its own mint cleans it

    // The audit trail: every mint and revocation, with the key id and signer, never the secret.
    expect(logged.filter((l) => l.msg === "access key minted")).toHaveLength(6);
    expect(logged.find((l) => l.msg === "access key revoked" && l.fields?.accessKeyId === old.accessKeyId)?.fields).toMatchObject({ did: s.did, id: expect.any(String) });
    expect(logged.find((l) => l.fields?.accessKeyId === kept.accessKeyId)?.fields).toMatchObject({ signer: s.account.address.toLowerCase(), scope: "rw", bucket: "*" });
    expect(JSON.stringify(logged)).not.toContain(kept.secretAccessKey);
  });

  // On PostgreSQL both transactions count before either inserts (SERIALIZABLE must refuse one);
  // SQLite's BEGIN IMMEDIATE queues writers, so there the second counts after the first inserted.
  test("two mints for the last place at once: one key (on PostgreSQL both past their count before either inserts)", async () => {
    // Each transaction waits after its count until both have counted: the write skew a weaker
    // isolation would let through (both see one key, both insert). Waiting on SQLite would deadlock
    // the queue, so there the first count lets both go.
    const both = Promise.withResolvers<void>();
    const waitFor = TEST_DB === "postgres" ? 2 : 1;
    let counted = 0;
    const base = gw.database.sql;
    const held: Sql = {
      dialect: base.dialect,
      all: (text, params) => base.all(text, params),
      get: (text, params) => base.get(text, params),
      run: (text, params) => base.run(text, params),
      close: () => base.close(),
      tx: (fn, opts) =>
        base.tx(
          (tx) =>
            fn({
              dialect: tx.dialect,
              all: (text, params) => tx.all(text, params),
              run: (text, params) => tx.run(text, params),
              get: async <T extends object>(text: string, params?: readonly Param[]) => {
                const row = await tx.get<T>(text, params);
                if (text.startsWith("SELECT COUNT(*)") && counted < waitFor && ++counted === waitFor) both.resolve();
                if (text.startsWith("SELECT COUNT(*)")) await both.promise;
                return row;
              },
            }),
          opts,
        ),
    };
    const keys = createKeys({ ...deps, sql: held, domain: gw.domain, maxKeys: 2 });
    const s = await newSession();
    const who = parseDid(s.did, chainId);
    await createKeys({ ...deps, domain: gw.domain }).create(who, await fields(s, 1, "rw:*:0"));
    const [a, b] = await Promise.all([fields(s, 2, "rw:*:0"), fields(s, 3, "rw:*:0")]);
    expect((await Promise.all([statusOf(keys.create(who, a)), statusOf(keys.create(who, b))])).sort()).toEqual([200, 409]);
    expect(await rows(s.did)).toHaveLength(2);
  });

  test("mints per account are limited (shared counter, before any signature work): 429 with Retry-After, no requestID claimed", async () => {
    const keys = createKeys({ ...deps, domain: gw.domain, mintLimit: { name: "keys-mint-test", max: 2, windowMs: 60_000 } });
    const s = await newSession();
    const who = parseDid(s.did, chainId);
    await keys.create(who, await fields(s, 1, "rw:*:0"));
    await keys.create(who, await fields(s, 2, "rw:*:0"));
    const refused = await keys.create(who, await fields(s, 3, "rw:*:0")).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(AccountError);
    await expectError((refused as AccountError).toResponse(), 429, "RATE_LIMITED", /Too many access keys/);
    expect(Number((refused as AccountError).toResponse().headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await highest(s)).toBe("2");
    // Another account has its own count.
    const other = await newSession();
    await keys.create(parseDid(other.did, chainId), await fields(other, 1, "rw:*:0"));
  });

  test("another gateway with the same secrets key finds a key; one with another key says so", async () => {
    const s = await newSession();
    const key = (await readJson(await mint(s, 1, "rw:*:0"))).data;
    const copy = new Uint8Array(gw.secrets.secretsKey);
    expect((await findAccessKey({ ...deps, secretsKey: copy }, key.accessKeyId))?.secretAccessKey).toBe(key.secretAccessKey);
    const wrong = findAccessKey({ ...deps, secretsKey: crypto.getRandomValues(new Uint8Array(32)) }, key.accessKeyId);
    await expect(wrong).rejects.toThrow(/STOWAGE_SECRETS_KEY/);
  });
});

test("the OpenAPI document describes the keys routes", async () => {
  const doc: Json = await readJson(await gw.app.handle(get("/openapi/json")));
  expect(Object.keys(doc.paths["/v2/keys"]).sort()).toEqual(["get", "post"]);
  expect(Object.keys(doc.paths["/v2/keys/{id}"])).toEqual(["delete"]);
});
