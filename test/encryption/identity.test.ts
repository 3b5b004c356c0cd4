/**
 * The account's age identity (D20): stored wrapped at the gateway (`GET|PUT /v2/keys/age`, which
 * only ever touch the caller's own), made once per account whatever the client, derived from the
 * owner's normalised signature, and refused to wallets that do not sign deterministically.
 */
import { describe, expect, test } from "bun:test";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { hashTypedData, serializeSignature, toHex, type Hex, type LocalAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount, toAccount } from "viem/accounts";
import { connectEncryption, EncryptionError, normaliseSignature, replacePayload } from "../../src/sdk/encryption.ts";
import { identityToRecipient } from "../../src/sdk/age.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { buildApp } from "../../src/app.ts";
import { createKeys } from "../../src/keys/index.ts";
import { readJson } from "../support/app.ts";
import { BASE } from "../support/storage.ts";
import { encryptionGateway } from "./support.ts";

const env = await encryptionGateway();
const { gw, call } = env;
const SALT = `0x${"11".repeat(32)}`;
const SALT2 = `0x${"22".repeat(32)}`;

/** A wallet that signs with a random nonce each time (RFC 6979 with extra entropy, as hedged
 * hardware and MPC signers do): valid signatures, never the same twice. */
function hedgedWallet(): LocalAccount {
  const key = generatePrivateKey();
  const plain = privateKeyToAccount(key);
  return toAccount({
    address: plain.address,
    signMessage: plain.signMessage,
    signTransaction: plain.signTransaction,
    async signTypedData(typed) {
      const hash = hashTypedData(typed as Parameters<typeof hashTypedData>[0]);
      const sig = secp256k1.sign(Buffer.from(hash.slice(2), "hex"), Buffer.from(key.slice(2), "hex"), { prehash: false, extraEntropy: true, format: "recovered" });
      const r = toHex(sig.slice(1, 33));
      const s = toHex(sig.slice(33, 65));
      return serializeSignature({ r, s, yParity: sig[0] as number });
    },
  });
}

describe("GET|PUT /v2/keys/age", () => {
  test("needs a Bearer token: 401 in the account model", async () => {
    const res = await call("GET", "/v2/keys/age");
    expect(res.status).toBe(401);
    expect((await readJson(res)).result).toBe(-1);
    expect((await call("PUT", "/v2/keys/age", { body: { wrapped: "x" } })).status).toBe(401);
  });

  test("reaches the encryption routes, not the access keys' /v2/keys/:id: 404 says no identity yet", async () => {
    const a = await gw.session(await gw.chain.anvil.newAccount());
    const res = await call("GET", "/v2/keys/age", { token: a.accessToken });
    expect(res.status).toBe(404);
    const body = await readJson(res);
    expect(body.error).toBe("NOT_FOUND");
    expect(body.message).toContain("no age identity is stored");
  });

  test("beside the access keys' routes (GET /v2/keys, /v2/keys/:id) both answer: /v2/keys/age is ours", async () => {
    const keys = createKeys({ sql: env.sql, secretsKey: crypto.getRandomValues(new Uint8Array(32)), resolver: gw.resolver, chainId: gw.config.chainId, domain: gw.domain });
    const app = buildApp({ config: gw.config, log: gw.log, health: {}, chain: gw.chain.context, accounts: gw.accounts, keys, encryption: gw.encryption });
    const a = await gw.session(await gw.chain.anvil.newAccount());
    const req = (method: string, path: string, body?: unknown) =>
      app.handle(new Request(`${BASE}${path}`, { method, headers: { authorization: `Bearer ${a.accessToken}`, ...(body ? { "content-type": "application/json" } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) }));
    const missing = await readJson(await req("GET", "/v2/keys/age"));
    expect(missing.message).toContain("no age identity is stored");
    expect((await req("PUT", "/v2/keys/age", { wrapped: "w", salt: SALT })).status).toBe(200);
    expect((await readJson(await req("GET", "/v2/keys/age"))).data.wrapped).toBe("w");
    // The access keys' list still answers, and holds no "age" key.
    const list = await req("GET", "/v2/keys");
    expect(list.status).toBe(200);
    expect(JSON.stringify(await readJson(list))).not.toContain('"w"');
  });

  test("first writer wins; a different blob is a 409 and changes nothing; each account sees only its own", async () => {
    const a = await gw.session(await gw.chain.anvil.newAccount());
    const b = await gw.session(await gw.chain.anvil.newAccount());
    const put1 = await call("PUT", "/v2/keys/age", { token: a.accessToken, body: { wrapped: "blob-one", salt: SALT } });
    expect(put1.status).toBe(200);
    expect((await readJson(put1)).data).toMatchObject({ wrapped: "blob-one", salt: SALT });
    // The same blob again is fine (a retried request).
    expect((await call("PUT", "/v2/keys/age", { token: a.accessToken, body: { wrapped: "blob-one", salt: SALT } })).status).toBe(200);
    const clash = await call("PUT", "/v2/keys/age", { token: a.accessToken, body: { wrapped: "blob-two", salt: SALT } });
    expect(clash.status).toBe(409);
    expect((await readJson(clash)).error).toBe("CONFLICT");
    expect((await readJson(await call("GET", "/v2/keys/age", { token: a.accessToken }))).data.wrapped).toBe("blob-one");
    // B writes its own and never sees or touches A's.
    expect((await call("GET", "/v2/keys/age", { token: b.accessToken })).status).toBe(404);
    expect((await call("PUT", "/v2/keys/age", { token: b.accessToken, body: { wrapped: "blob-b", salt: SALT } })).status).toBe(200);
    expect((await readJson(await call("GET", "/v2/keys/age", { token: a.accessToken }))).data.wrapped).toBe("blob-one");
  });

  test("a replacement needs a signed restricted request (action age, payload = SHA-256 of salt and blob): the Bearer token alone, a wrong payload, another action or a replayed requestID is a 401 and changes nothing", async () => {
    const u = await env.user();
    const b = await env.user();
    const token = u.store.accessToken as string;
    expect((await call("PUT", "/v2/keys/age", { token, body: { wrapped: "blob-one", salt: SALT } })).status).toBe(200);
    const stored = async () => (await readJson(await call("GET", "/v2/keys/age", { token }))).data.wrapped;
    const refused = async (body: Record<string, unknown>, why: RegExp) => {
      const res = await call("PUT", "/v2/keys/age", { token, body: { wrapped: "blob-two", salt: SALT2, replace: true, ...body } });
      expect(res.status).toBe(401);
      const json = await readJson(res);
      expect(json.result).toBe(-1);
      expect(json.error).toBe("UNAUTHORIZED");
      expect(json.message).toMatch(why);
      expect(await stored()).toBe("blob-one");
    };
    // What a leaked access token can do: nothing.
    await refused({}, /signed restricted request/);
    await refused(await u.store.signRequest("age", replacePayload("blob-other", SALT2)), /payload is not the SHA-256/);
    // The salt is signed with the blob: the same blob with another salt is another payload.
    await refused(await u.store.signRequest("age", replacePayload("blob-two", SALT)), /payload is not the SHA-256/);
    await refused(await u.store.signRequest("keys", replacePayload("blob-two", SALT2)), /signature|signer/);
    await refused(await b.store.signRequest("age", replacePayload("blob-two", SALT2)), /Bearer token's DID/);
    const signed = await u.store.signRequest("age", replacePayload("blob-two", SALT2));
    const replaced = await call("PUT", "/v2/keys/age", { token, body: { wrapped: "blob-two", salt: SALT2, replace: true, ...signed } });
    expect(replaced.status).toBe(200);
    expect(await stored()).toBe("blob-two");
    expect((await readJson(await call("GET", "/v2/keys/age", { token }))).data.salt).toBe(SALT2);
    // The same signed request again (a replay, even of the same blob) is refused.
    const replay = await call("PUT", "/v2/keys/age", { token, body: { wrapped: "blob-two", salt: SALT2, replace: true, ...signed } });
    expect(replay.status).toBe(401);
    expect((await readJson(replay)).error).toBe("UNAUTHORIZED");
    // B's identity was never touched.
    expect((await call("GET", "/v2/keys/age", { token: b.store.accessToken as string })).status).toBe(404);
  });

  test("the SDK's rewrap replaces the blob, signed, and the identity (so every file) stays the same", async () => {
    const u = await env.user();
    const identity = await u.enc.identity();
    await u.enc.rewrap({ passphrase: "correct horse" });
    const stored = await readJson(await call("GET", "/v2/keys/age", { token: u.store.accessToken as string }));
    expect(JSON.parse(stored.data.wrapped).kdf).toBe("passphrase");
    const store2 = await connectStorage({ baseUrl: BASE, account: u.account, fetch: env.fetch });
    await store2.login();
    const withPass = await connectEncryption({ baseUrl: BASE, store: store2, account: u.account, passphrase: "correct horse", fetch: env.fetch });
    expect(await withPass.identity()).toBe(identity);
    // And back to the owner's signature.
    await withPass.rewrap();
    const enc3 = await connectEncryption({ baseUrl: BASE, store: store2, account: u.account, fetch: env.fetch });
    expect(await enc3.identity()).toBe(identity);
    // Two scrypt derivations (N = 2^17, ≈ 0.5 s each on a quiet core): over 5 s on two busy cores.
  }, 60_000);

  test("a blob over the size limit, or none, is a 400 and stores nothing", async () => {
    const a = await gw.session(await gw.chain.anvil.newAccount());
    const big = await call("PUT", "/v2/keys/age", { token: a.accessToken, body: { wrapped: "x".repeat(4097), salt: SALT } });
    expect(big.status).toBe(400);
    expect((await readJson(big)).error).toBe("PARAM_ERROR");
    expect((await call("PUT", "/v2/keys/age", { token: a.accessToken, body: {} })).status).toBe(400);
    // Without its salt (a client wrapping the earlier way), or with a malformed one.
    const saltless = await call("PUT", "/v2/keys/age", { token: a.accessToken, body: { wrapped: "w" } });
    expect(saltless.status).toBe(400);
    expect((await readJson(saltless)).message).toContain("salt is required");
    expect((await call("PUT", "/v2/keys/age", { token: a.accessToken, body: { wrapped: "w", salt: "0x1234" } })).status).toBe(400);
    expect((await call("GET", "/v2/keys/age", { token: a.accessToken })).status).toBe(404);
  });
});

describe("the SDK's identity", () => {
  test("made once, stored wrapped (the gateway never sees it), the same from a second client with the same key", async () => {
    const u = await env.user();
    const identity = await u.enc.identity();
    expect(identity).toStartWith("AGE-SECRET-KEY-1");
    const stored = await readJson(await call("GET", "/v2/keys/age", { token: u.store.accessToken }));
    expect(stored.data.wrapped).not.toContain(identity);
    expect(JSON.parse(stored.data.wrapped).recipient).toBe(identityToRecipient(identity));
    // A second machine: nothing but the wallet key.
    const store2 = await connectStorage({ baseUrl: BASE, account: u.account, fetch: gw.fetch });
    await store2.login();
    const enc2 = await connectEncryption({ baseUrl: BASE, store: store2, account: u.account, fetch: gw.fetch });
    expect(await enc2.identity()).toBe(identity);
  });

  test("two clients setting up one account at once end with one identity", async () => {
    const u = await env.user();
    const store2 = await connectStorage({ baseUrl: BASE, account: u.account, fetch: gw.fetch });
    await store2.login();
    const enc2 = await connectEncryption({ baseUrl: BASE, store: store2, account: u.account, fetch: gw.fetch });
    const [x, y] = await Promise.all([u.enc.identity(), enc2.identity()]);
    expect(x).toBe(y);
  });

  test("a wallet that does not sign deterministically is told so, and nothing is stored", async () => {
    const wallet = hedgedWallet();
    await gw.chain.anvil.fund(wallet.address, 10n ** 21n);
    const store = await connectStorage({ baseUrl: BASE, account: wallet, fetch: gw.fetch });
    await store.login();
    const enc = await connectEncryption({ baseUrl: BASE, store, account: wallet, fetch: gw.fetch });
    const err = await enc.identity().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EncryptionError);
    expect((err as EncryptionError).code).toBe("nondeterministic_signer");
    expect((err as EncryptionError).message).toBe("this wallet does not sign deterministically; use a passphrase");
    expect((await call("GET", "/v2/keys/age", { token: store.accessToken })).status).toBe(404);
  });

  test("the way out that error names: a passphrase wraps the identity instead (scrypt), and only it opens it", async () => {
    const wallet = hedgedWallet();
    await gw.chain.anvil.fund(wallet.address, 10n ** 21n);
    const store = await connectStorage({ baseUrl: BASE, account: wallet, fetch: gw.fetch });
    await store.login();
    const withPass = await connectEncryption({ baseUrl: BASE, store, account: wallet, fetch: gw.fetch, passphrase: "correct horse battery staple" });
    const identity = await withPass.identity();
    const again = await connectEncryption({ baseUrl: BASE, store, account: wallet, fetch: gw.fetch, passphrase: "correct horse battery staple" });
    expect(await again.identity()).toBe(identity);
    const wrong = await connectEncryption({ baseUrl: BASE, store, account: wallet, fetch: gw.fetch, passphrase: "wrong" });
    expect(((await wrong.identity().catch((e: unknown) => e)) as EncryptionError).code).toBe("bad_wrap");
    // Without the passphrase the wallet is asked for nothing: the error says what is missing.
    const none = await connectEncryption({ baseUrl: BASE, store, account: wallet, fetch: gw.fetch });
    expect(((await none.identity().catch((e: unknown) => e)) as EncryptionError).message).toContain("wrapped with a passphrase");
  }, 60_000);

  test("a delegate key cannot set up or open the owner's identity: not_owner", async () => {
    const owner = await gw.chain.anvil.newAccount();
    const delegate = await gw.chain.anvil.newAccount();
    const { connectGateway } = await import("../../src/sdk/chain.ts");
    await (await connectGateway(BASE, { account: owner, fetch: gw.fetch })).addDelegate(delegate.address, 3600n);
    const did = `did:ethr:0x${gw.config.chainId.toString(16)}:${owner.address}`;
    const store = await connectStorage({ baseUrl: BASE, account: delegate, did, fetch: gw.fetch });
    await store.login();
    const enc = await connectEncryption({ baseUrl: BASE, store, account: delegate, fetch: gw.fetch });
    const err = (await enc.identity().catch((e: unknown) => e)) as EncryptionError;
    expect(err.code).toBe("not_owner");
    expect(err.message).toContain("use the owner key");
  });
});

test("normaliseSignature: the high-s form of a signature derives the same bytes (r, low-s)", async () => {
  const account = privateKeyToAccount(generatePrivateKey());
  const sig = await account.signMessage({ message: "x" });
  const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
  const s = BigInt(`0x${sig.slice(66, 130)}`);
  const v = Number.parseInt(sig.slice(130), 16);
  const high = `${sig.slice(0, 66)}${(N - s).toString(16).padStart(64, "0")}${(v === 27 ? 28 : 27).toString(16)}` as Hex;
  expect(Buffer.from(normaliseSignature(high))).toEqual(Buffer.from(normaliseSignature(sig)));
  expect(BigInt(`0x${Buffer.from(normaliseSignature(sig).slice(32)).toString("hex")}`) <= N / 2n).toBe(true);
});
