/**
 * The age identity's wrapping key is bound to its deployment and a salt (D20): the owner signs
 * `EncryptionKey(purpose, salt)` in this gateway's storage domain (chain id, Proxy), the salt
 * random per wrapping and stored beside the blob. A signature any other page could ask for — the
 * earlier chain-wide message, another deployment's, another salt's — opens nothing here. An
 * identity wrapped the earlier way is re-wrapped at its next unlock and opens as before.
 */
import { describe, expect, test } from "bun:test";
import { getAddress, type Address, type Hex, type LocalAccount } from "viem";
import { toAccount } from "viem/accounts";
import { generateIdentity, identityToRecipient } from "../../src/sdk/age.ts";
import {
  connectEncryption,
  encryptionKeyTypedData,
  EncryptionError,
  legacyEncryptionKeyTypedData,
  newSalt,
  normaliseSignature,
  unwrapIdentity,
  uploadSealed,
  wrapIdentity,
  wrappingKey,
  type WrapContext,
} from "../../src/sdk/encryption.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { readJson } from "../support/app.ts";
import { legacyKey, legacyWrapped } from "../support/legacy-age.ts";
import { BASE } from "../support/storage.ts";
import { encryptionGateway } from "./support.ts";

const env = await encryptionGateway();
const { gw, call } = env;
const chainId = gw.config.chainId;
const proxy = gw.chain.context.contracts.proxy;
/** Another deployment on the same chain: its own Proxy. */
const otherProxy = getAddress(`0x${"5a".repeat(20)}`);

/** A wallet that says which typed messages it was asked to sign. */
function recording(account: LocalAccount): { wallet: LocalAccount; asked: string[] } {
  const asked: string[] = [];
  const wallet = toAccount({
    address: account.address,
    signMessage: account.signMessage,
    signTransaction: account.signTransaction,
    signTypedData: async (typed) => {
      const t = typed as { primaryType: string; message: { action?: string } };
      asked.push(t.primaryType === "Request" ? `Request:${t.message.action}` : t.primaryType);
      return account.signTypedData(typed);
    },
  });
  return { wallet, asked };
}

const stored = async (token: string): Promise<{ wrapped: string; salt: string | null }> => (await readJson(await call("GET", "/v2/keys/age", { token }))).data;
const opens = (f: () => string) => {
  try {
    return f();
  } catch (err) {
    if (err instanceof EncryptionError && err.code === "bad_wrap") return "bad_wrap";
    throw err;
  }
};

/** Stores `wrapped` as a gateway of the earlier version did: no salt. */
const storeLegacy = (account: Address, wrapped: string) => env.sql.run("INSERT INTO age_identities (account, wrapped, updated_at) VALUES ($1, $2, $3)", [account, wrapped, Date.now()]);

describe("the wrapping key is this deployment's and this salt's", () => {
  test("the key derived on deployment A (its Proxy, its salt) does not open an identity wrapped on deployment B, and back", async () => {
    const u = await env.user();
    const identity = generateIdentity();
    const salt = newSalt();
    const otherSalt = newSalt();
    const on = async (p: Address, s: Hex) => wrappingKey(normaliseSignature(await u.account.signTypedData(encryptionKeyTypedData(chainId, p, s))), s);
    const ctx = (p: Address, s: Hex): WrapContext => ({ account: u.address, chainId, proxy: p, salt: s });
    const [aKey, bKey, otherSaltKey] = [await on(proxy, salt), await on(otherProxy, salt), await on(otherProxy, otherSalt)];
    const wrappedOnB = wrapIdentity(identity, bKey, ctx(otherProxy, salt), "signature");
    expect(unwrapIdentity(wrappedOnB, bKey, ctx(otherProxy, salt))).toBe(identity);
    // A's key, on B's blob: another Proxy is another signature, so another key.
    expect(opens(() => unwrapIdentity(wrappedOnB, aKey, ctx(otherProxy, salt)))).toBe("bad_wrap");
    // B's key, on B's blob taken to A: sealed to B's context, it does not open in A's.
    expect(opens(() => unwrapIdentity(wrappedOnB, bKey, ctx(proxy, salt)))).toBe("bad_wrap");
    // The same deployment with another salt: another signature, and another context.
    expect(opens(() => unwrapIdentity(wrappedOnB, otherSaltKey, ctx(otherProxy, otherSalt)))).toBe("bad_wrap");
    expect(opens(() => unwrapIdentity(wrappedOnB, otherSaltKey, ctx(otherProxy, salt)))).toBe("bad_wrap");
  });

  test("at the gateway: a signature another deployment's page, the earlier chain-wide message or another salt asks for does not open the stored identity", async () => {
    const u = await env.user();
    const identity = await u.enc.identity();
    const token = u.store.accessToken as string;
    const { wrapped, salt } = await stored(token);
    expect(salt).toMatch(/^0x[0-9a-f]{64}$/);
    expect(JSON.parse(wrapped).v).toBe(2);
    const here: WrapContext = { account: u.address, chainId, proxy, salt: salt as Hex };
    const keyOf = async (typed: Parameters<LocalAccount["signTypedData"]>[0], s: Hex) => wrappingKey(normaliseSignature(await u.account.signTypedData(typed)), s);
    // What a phishing page could get the wallet to sign, even knowing the salt:
    const phished = [
      await keyOf(encryptionKeyTypedData(chainId, otherProxy, salt as Hex), salt as Hex),
      await keyOf(encryptionKeyTypedData(chainId, proxy, newSalt()), salt as Hex),
      await keyOf(legacyEncryptionKeyTypedData(chainId), salt as Hex),
    ];
    for (const key of phished) expect(opens(() => unwrapIdentity(wrapped, key, here))).toBe("bad_wrap");
    expect(unwrapIdentity(wrapped, await keyOf(encryptionKeyTypedData(chainId, proxy, salt as Hex), salt as Hex), here)).toBe(identity);
  });

  test("a rewrap draws a new salt: the signature made for the old one opens the stored identity no more", async () => {
    const u = await env.user();
    const identity = await u.enc.identity();
    const token = u.store.accessToken as string;
    const before = await stored(token);
    const oldKey = wrappingKey(normaliseSignature(await u.account.signTypedData(encryptionKeyTypedData(chainId, proxy, before.salt as Hex))), before.salt as Hex);
    await u.enc.rewrap();
    const after = await stored(token);
    expect(after.salt).not.toBe(before.salt);
    expect(opens(() => unwrapIdentity(after.wrapped, oldKey, { account: u.address, chainId, proxy, salt: after.salt as Hex }))).toBe("bad_wrap");
    const store2 = await connectStorage({ baseUrl: BASE, account: u.account, fetch: env.fetch });
    await store2.login();
    expect(await (await connectEncryption({ baseUrl: BASE, store: store2, account: u.account, fetch: env.fetch })).identity()).toBe(identity);
  });
});

describe("an identity wrapped the earlier way", () => {
  test("is re-wrapped at its next unlock (the owner signs the old message once, the new one twice, and the replacement), and still opens its files", async () => {
    const account = await gw.chain.anvil.newAccount();
    const { wallet, asked } = recording(account);
    const store = await connectStorage({ baseUrl: BASE, account: wallet, fetch: env.fetch });
    await store.login();
    // What a client of the earlier version left: a v1 blob without salt, and a file sealed to its identity.
    const identity = generateIdentity();
    await storeLegacy(account.address, await legacyWrapped(account, chainId, identity));
    const content = crypto.getRandomValues(new Uint8Array(70_000));
    const entry = await uploadSealed(store, "dfs", new Blob([content]), identityToRecipient(identity), undefined, { name: "old.bin" });
    const token = store.accessToken as string;
    const legacy = await stored(token);
    expect(legacy.salt).toBeNull();
    asked.length = 0;

    const enc = await connectEncryption({ baseUrl: BASE, store, account: wallet, fetch: env.fetch });
    expect(await enc.identity()).toBe(identity);
    expect(asked).toEqual(["EncryptionKey", "EncryptionKey", "EncryptionKey", "Request:age"]);
    const now = await stored(token);
    expect(JSON.parse(now.wrapped)).toMatchObject({ v: 2, kdf: "signature" });
    expect(now.salt).toMatch(/^0x[0-9a-f]{64}$/);
    // The chain-wide signature that opened it opens it no more.
    const oldKey = legacyKey(await account.signTypedData(legacyEncryptionKeyTypedData(chainId)));
    expect(opens(() => unwrapIdentity(now.wrapped, oldKey, { account: account.address, chainId, proxy, salt: now.salt as Hex }))).toBe("bad_wrap");
    // The old file opens, from this client and from a fresh one, which asks for one signature.
    expect(new Uint8Array(await new Response((await enc.download("dfs", entry.Cid)).body).arrayBuffer())).toEqual(content);
    const again = recording(account);
    const store2 = await connectStorage({ baseUrl: BASE, account: again.wallet, fetch: env.fetch });
    await store2.login();
    const enc2 = await connectEncryption({ baseUrl: BASE, store: store2, account: again.wallet, fetch: env.fetch });
    again.asked.length = 0;
    expect(await enc2.identity()).toBe(identity);
    expect(again.asked).toEqual(["EncryptionKey"]);
    expect(new Uint8Array(await new Response((await enc2.download("dfs", entry.Cid)).body).arrayBuffer())).toEqual(content);
  });

  test("wrapped with a passphrase, it is re-wrapped with the same passphrase, bound to this deployment", async () => {
    const account = await gw.chain.anvil.newAccount();
    const store = await connectStorage({ baseUrl: BASE, account, fetch: env.fetch });
    await store.login();
    const identity = generateIdentity();
    await storeLegacy(account.address, await legacyWrapped(account, chainId, identity, { passphrase: "correct horse" }));
    const enc = await connectEncryption({ baseUrl: BASE, store, account, passphrase: "correct horse", fetch: env.fetch });
    expect(await enc.identity()).toBe(identity);
    const now = await stored(store.accessToken as string);
    expect(JSON.parse(now.wrapped)).toMatchObject({ v: 2, kdf: "passphrase" });
    const enc2 = await connectEncryption({ baseUrl: BASE, store, account, passphrase: "correct horse", fetch: env.fetch });
    expect(await enc2.identity()).toBe(identity);
    // Three scrypt derivations (N = 2^17): seconds on two busy cores.
  }, 60_000);
});
