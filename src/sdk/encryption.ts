/**
 * SDK: files encrypted on the client (D20). Each account has one random age identity, made by its
 * client and kept at the gateway wrapped under a key only the DID owner's wallet can derive (its
 * signature of EIP-712 `EncryptionKey(string purpose, bytes32 salt)` in this deployment's storage
 * domain, with a random salt stored beside the blob); its recipient is published as the DID's
 * key-agreement attribute, so others can share with it. Uploads are sealed to that recipient with
 * `UserDefined.encryption = "age"` (Cids are of the ciphertext); downloads open by themselves, the
 * owner's with its identity and a grantee's with the share the owner wrote for it. The format is
 * plain age v1, so `age -d -i` opens everything without Stowage (`identity()` exports the key).
 *
 * @example
 *   const enc = await connectEncryption({ baseUrl, store, account })
 *   const entry = await enc.upload("ipfs", "notes.txt")   // sealed, then uploaded (a path on Bun; a Blob anywhere)
 *   const { body } = await enc.download("ipfs", entry.Cid)            // plaintext, streamed
 *   await enc.share(entry.Cid, reader)                                // after dir.grantRead
 */
import { xchacha20poly1305 } from "@noble/ciphers/chacha.js";
import { hkdf } from "@noble/hashes/hkdf.js";
import { scrypt } from "@noble/hashes/scrypt.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, randomBytes, utf8ToBytes } from "@noble/hashes/utils.js";
import { base64nopad } from "@scure/base";
import { getAddress, hashTypedData, hexToBytes, isAddressEqual, recoverAddress, stringToHex, type Address, type Hex, type LocalAccount, type Transport } from "viem";
import { didRegistryAbi } from "../chain/artifacts/index.ts";
import { storageDomain } from "../identity/eip712.ts";
import { AgeError, decryptStream, decryptWithHeader, generateIdentity, headerFor, identityToRecipient, prepareEncryption, readFileKey, recipientFromBytes, recipientToBytes } from "./age.ts";
import { connectGateway } from "./chain.ts";
import { KEY_AGREEMENT_NAME, publishedRecipient } from "./key-agreement.ts";
import { blobOfPath, type FileEntry, type StorageClient, type StorageKind } from "./storage.ts";
import { defaultSpool, type Spool } from "./spool.ts";

/** Why an encryption step failed, for callers that branch on it. */
export type EncryptionErrorCode =
  | "nondeterministic_signer" // the wallet's two signatures differ: no stable key can come from it
  | "not_owner" // the signer is not the DID's owner (a delegate cannot unwrap the identity)
  | "bad_wrap" // the stored identity does not open with this signature or passphrase
  | "no_recipient" // the reader has published no age recipient on its DID
  | "no_share" // nobody shared this file's key with this reader
  | "source_changed" // the file's size changed while it was being encrypted
  | "gateway"; // the gateway refused a call (status and its words in the message)

export class EncryptionError extends Error {
  override name = "EncryptionError";
  constructor(
    readonly code: EncryptionErrorCode,
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export const ENCRYPTION_PURPOSE = "stowage age identity v2";
export const encryptionKeyTypes = {
  EncryptionKey: [
    { name: "purpose", type: "string" },
    { name: "salt", type: "bytes32" },
  ],
} as const;

/**
 * What the owner's wallet signs to derive the wrapping key: the storage domain (chain id and this
 * deployment's Proxy, so another gateway's page asks for a different signature) and the account's
 * salt (random, stored with the blob and given only to the account's Bearer token, so a page that
 * does not hold it cannot even ask for the right signature; a rewrap draws a new one).
 */
export const encryptionKeyTypedData = (chainId: number, proxy: Address, salt: Hex) =>
  ({ domain: storageDomain(chainId, proxy), types: encryptionKeyTypes, primaryType: "EncryptionKey", message: { purpose: ENCRYPTION_PURPOSE, salt } }) as const;

/**
 * The earlier derivation, kept only to open identities it wrapped (their next unlock re-wraps
 * them): one message per chain, the same on every deployment and for ever.
 */
const LEGACY_PURPOSE = "stowage age identity v1";
export const legacyEncryptionKeyTypedData = (chainId: number) =>
  ({ domain: { name: "Stowage", version: "1", chainId }, types: { EncryptionKey: [{ name: "purpose", type: "string" }] }, primaryType: "EncryptionKey", message: { purpose: LEGACY_PURPOSE } }) as const;

/** The deployment and account a wrapping belongs to: its associated data, so a blob opens nowhere else. */
export interface WrapContext {
  account: Address;
  chainId: number;
  proxy: Address;
  /** 32 bytes, 0x-hex (`newSalt()`). */
  salt: Hex;
}

/** A fresh salt for a wrapping (32 random bytes). */
export const newSalt = (): Hex => `0x${bytesToHex(randomBytes(32))}`;
const SALT = /^0x[0-9a-f]{64}$/;

/** How long a published recipient stays valid: a century, in seconds. */
const ATTRIBUTE_VALIDITY = 100n * 365n * 24n * 3600n;
/** The marker an encrypted entry carries (UserDefined.encryption) and downloads announce. */
export const AGE = "age";

/** The secp256k1 group order: s above half of it is the other of a signature's two forms. */
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/**
 * A signature as (r, low-s), 64 bytes: the two valid encodings of one signature (s and n − s, with
 * v flipped) must derive the same key, or a wallet that emits the other form would lock its owner out.
 */
export function normaliseSignature(signature: Hex): Uint8Array {
  const bytes = hexToBytes(signature);
  if (bytes.length !== 65 && bytes.length !== 64) throw new EncryptionError("bad_wrap", `not an ECDSA signature (${bytes.length} bytes)`);
  const r = bytes.slice(0, 32);
  // A 64-byte signature is EIP-2098's compact form: v in the top bit of s.
  const sBytes = bytes.slice(32, 64);
  if (bytes.length === 64) sBytes[0] = (sBytes[0] as number) & 0x7f;
  let s = BigInt(`0x${bytesToHex(sBytes)}`);
  if (s > N / 2n) s = N - s;
  const out = new Uint8Array(64);
  out.set(r, 0);
  out.set(hexToBytes(`0x${s.toString(16).padStart(64, "0")}`), 32);
  return out;
}

/** The wrapping key from a normalised signature of `encryptionKeyTypedData`: HKDF-SHA-256 over it, salted with the account's salt. */
export const wrappingKey = (normalised: Uint8Array, salt: Hex) => hkdf(sha256, normalised, hexToBytes(salt), utf8ToBytes(`${ENCRYPTION_PURPOSE} wrap`), 32);
const legacyWrappingKey = (normalised: Uint8Array) => hkdf(sha256, normalised, new Uint8Array(0), utf8ToBytes(`${LEGACY_PURPOSE} wrap`), 32);

/** Passphrase wrapping (for wallets that do not sign deterministically): scrypt, as age's own. */
const SCRYPT = { N: 2 ** 17, r: 8, p: 1, dkLen: 32 } as const;

type Kdf = "signature" | "passphrase";

interface Wrapped {
  /** 2: bound to a WrapContext (its salt beside the blob); 1: the earlier wrapping, bound to the account alone. */
  v: 1 | 2;
  /** "signature": the key is `wrappingKey` of the owner's EncryptionKey signature; "passphrase": scrypt. */
  kdf: Kdf;
  /** v1 passphrase wrappings only: scrypt's salt (v2 uses the context's). */
  salt?: string;
  nonce: string;
  box: string;
  /** The identity's recipient, public: a check that the unwrapped identity is the right one. */
  recipient: string;
}

/** What a v2 box is sealed to: the purpose, the deployment, the account and the salt. */
const associatedData = (ctx: WrapContext) => utf8ToBytes([ENCRYPTION_PURPOSE, ctx.chainId, getAddress(ctx.proxy), getAddress(ctx.account), ctx.salt.toLowerCase()].join("\n"));

/** Wraps `identity` under `key` (XChaCha20-Poly1305, sealed to `ctx`: a blob moved to another
 * account, deployment or salt does not open). */
export function wrapIdentity(identity: string, key: Uint8Array, ctx: WrapContext, kdf: Kdf): string {
  const nonce = randomBytes(24);
  const box = xchacha20poly1305(key, nonce, associatedData(ctx)).encrypt(utf8ToBytes(identity));
  const wrapped: Wrapped = { v: 2, kdf, nonce: base64nopad.encode(nonce), box: base64nopad.encode(box), recipient: identityToRecipient(identity) };
  return JSON.stringify(wrapped);
}

function parseWrapped(text: string): Wrapped {
  try {
    const w = JSON.parse(text) as Wrapped;
    if ((w.v === 1 || w.v === 2) && (w.kdf === "signature" || w.kdf === "passphrase") && typeof w.nonce === "string" && typeof w.box === "string" && typeof w.recipient === "string") return w;
  } catch {}
  throw new EncryptionError("bad_wrap", "the gateway's stored age identity is not one this SDK wrote");
}

/** Opens a blob `wrapIdentity` made (v2, with its context) or the earlier wrapping made (v1, the account alone). */
export function unwrapIdentity(text: string, key: Uint8Array, ctx: WrapContext | { account: Address }): string {
  const w = parseWrapped(text);
  const ad = w.v === 2 && "salt" in ctx ? associatedData(ctx) : utf8ToBytes(getAddress(ctx.account));
  let identity: string;
  try {
    if (w.v === 2 && !("salt" in ctx)) throw new Error("no context");
    identity = new TextDecoder().decode(xchacha20poly1305(key, base64nopad.decode(w.nonce), ad).decrypt(base64nopad.decode(w.box)));
  } catch {
    throw new EncryptionError(
      "bad_wrap",
      w.kdf === "passphrase"
        ? "the passphrase does not open this account's age identity"
        : "the owner's signature does not open this account's age identity (was it wrapped by another owner, on another gateway, or with a passphrase?)",
    );
  }
  if (identityToRecipient(identity) !== w.recipient) throw new EncryptionError("bad_wrap", "the unwrapped age identity does not match its recipient");
  return identity;
}

/** What a replacement of the stored identity signs (D5 action "age"): the SHA-256 of the new
 * salt, a newline and the new blob (UTF-8), lowercase hex, so the signature is good for that
 * pair only. */
export const replacePayload = (wrapped: string, salt: string) => bytesToHex(sha256(utf8ToBytes(`${salt.toLowerCase()}\n${wrapped}`)));

const passphraseKey = (passphrase: string, salt: Uint8Array) => scrypt(utf8ToBytes(passphrase), salt, SCRYPT);

export interface EncryptionOptions {
  baseUrl: string;
  /** A logged-in storage client (its Bearer token reaches the account API). */
  store: StorageClient;
  /** The DID's owner key: it signs the EncryptionKey message and publishes the recipient. */
  account: LocalAccount;
  /** Wrap with a passphrase instead of the wallet's signature (wallets that cannot sign deterministically). */
  passphrase?: string;
  fetch?: typeof fetch;
  /**
   * A browser wallet's EIP-1193 transport (`custom(window.ethereum)`): the recipient's publishing
   * transaction goes to the wallet to send, as in connectGateway, since such wallets sign no raw
   * transactions. `account` then only needs to sign typed data (the web console's case).
   */
  walletTransport?: Transport;
  /** Where `upload` keeps the ciphertext between sealing and sending (spool.ts): by default a
   * temporary file on Bun and a Blob in browsers; `null` (Node's default) seals twice instead. */
  spool?: (() => Spool) | null;
}

/** A download, decrypted when the entry says `age`. */
export interface OpenedDownload {
  body: ReadableStream<Uint8Array>;
  encrypted: boolean;
  /** The gateway's answer (its headers: name, Cid; its Content-Length is the ciphertext's). */
  response: Response;
}

export async function connectEncryption(opts: EncryptionOptions) {
  const base = opts.baseUrl.replace(/\/$/, "");
  const doFetch = opts.fetch ?? fetch;
  const { store, account } = opts;
  const chainId = store.info.chainId;
  const registry = store.info.contracts.didRegistry;
  const me = getAddress(store.did.split(":").pop() as string);
  // The promise is kept, not its value: two reads started at once (publish) share one connection.
  let gateway: ReturnType<typeof connectGateway> | undefined;
  const chain = () => {
    gateway ??= connectGateway(base, {
      account: opts.walletTransport ? { address: account.address, type: "json-rpc" } : account,
      ...(opts.walletTransport ? { walletTransport: opts.walletTransport } : {}),
      ...(opts.fetch ? { fetch: opts.fetch } : {}),
    });
    // A failed connection is not kept: the next call tries again.
    gateway.catch(() => (gateway = undefined));
    return gateway;
  };

  /** The account API: `{ result: 1, data }` or an EncryptionError with the gateway's words. */
  async function api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; data?: T; error?: string; message?: string }> {
    const token = await store.currentAccessToken();
    if (!token) throw new Error("log in first: store.login()");
    const res = await doFetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const json = (await res.json().catch(() => ({}))) as { result?: number; data?: T; error?: string; message?: string };
    return { status: res.status, ...json };
  }
  const refused = (r: { status: number; error?: string; message?: string }, what: string) =>
    new EncryptionError("gateway", `${what}: the gateway answered ${r.status} ${r.error ?? ""}: ${r.message ?? ""}`, r.status);

  /** The identity as the gateway stores it: the blob and, for wrappings bound to this deployment, its salt. */
  type StoredIdentity = { wrapped: string; salt?: string | null };
  const contextOf = (salt: Hex): WrapContext => ({ account: me, chainId, proxy: store.info.contracts.proxy, salt });

  /**
   * The owner's signature of `typed`, normalised, after checking it recovers to the DID's owner
   * (a delegate may sign for the DID, but the identity opens for its owner alone).
   */
  async function ownerSignature(typed: { sign: () => Promise<Hex>; hash: Hex }): Promise<Uint8Array> {
    // The owner's read on chain goes out while the wallet signs (a command pays both every run).
    const ownerRead = chain().then((gw) => gw.publicClient.readContract({ address: registry, abi: didRegistryAbi, functionName: "identityOwner", args: [me] }));
    ownerRead.catch(() => {});
    const signature = await typed.sign();
    const signer = await recoverAddress({ hash: typed.hash, signature });
    const owner = await ownerRead;
    if (!isAddressEqual(signer, owner)) throw new EncryptionError("not_owner", `the age identity of ${me} is wrapped under its owner's signature, but ${signer} signed, and the owner is ${owner}: use the owner key`);
    return normaliseSignature(signature);
  }
  /** The two messages an owner signs: for this deployment and `salt`, or the earlier one (to open what it wrapped). */
  const currentMessage = (salt: Hex) => {
    const typed = encryptionKeyTypedData(chainId, store.info.contracts.proxy, salt);
    return { sign: () => account.signTypedData(typed), hash: hashTypedData(typed) };
  };
  const legacyMessage = () => {
    const typed = legacyEncryptionKeyTypedData(chainId);
    return { sign: () => account.signTypedData(typed), hash: hashTypedData(typed) };
  };

  const needPassphrase = (): never => {
    throw new EncryptionError("bad_wrap", "this account's age identity is wrapped with a passphrase: give it");
  };

  /** The key that opens a blob wrapped for `salt` on this deployment (one signature, or the passphrase). */
  async function keyFor(kdf: Kdf, salt: Hex): Promise<Uint8Array> {
    if (kdf === "passphrase") return passphraseKey(opts.passphrase ?? needPassphrase(), hexToBytes(salt));
    return wrappingKey(await ownerSignature(currentMessage(salt)), salt);
  }

  /** A new wrapping for a fresh salt: under `passphrase`, or the owner's signature made twice. */
  async function newWrapping(passphrase: string | undefined): Promise<{ key: Uint8Array; kdf: Kdf; salt: Hex }> {
    const salt = newSalt();
    if (passphrase !== undefined) return { key: passphraseKey(passphrase, hexToBytes(salt)), kdf: "passphrase", salt };
    // Two signatures, or the key could not be derived again later: a wallet that signs with
    // random nonces (some hardware, MPC and smart-contract wallets) would lose every file.
    const first = await ownerSignature(currentMessage(salt));
    const second = await ownerSignature(currentMessage(salt));
    if (bytesToHex(first) !== bytesToHex(second)) throw new EncryptionError("nondeterministic_signer", "this wallet does not sign deterministically; use a passphrase");
    return { key: wrappingKey(first, salt), kdf: "signature", salt };
  }

  /** Makes and stores the account's identity (first writer wins: on a race, the stored one). */
  async function setup(): Promise<string> {
    const wrap = await newWrapping(opts.passphrase);
    const identity = generateIdentity();
    const put = await api<StoredIdentity>("PUT", "/v2/keys/age", { wrapped: wrapIdentity(identity, wrap.key, contextOf(wrap.salt), wrap.kdf), salt: wrap.salt });
    if (put.status === 409) return load();
    if (put.status !== 200) throw refused(put, "storing the wrapped age identity");
    return identity;
  }

  /**
   * Stores `identity` wrapped anew, for a fresh salt, in place of the stored blob: a signed
   * restricted request (action "age", payload = replacePayload) signed by the owner, so an
   * access token alone cannot overwrite it.
   */
  async function replace(identity: string, passphrase: string | undefined): Promise<void> {
    const wrap = await newWrapping(passphrase);
    const wrapped = wrapIdentity(identity, wrap.key, contextOf(wrap.salt), wrap.kdf);
    const signed = await store.signRequest("age", replacePayload(wrapped, wrap.salt), account);
    const put = await api("PUT", "/v2/keys/age", { wrapped, salt: wrap.salt, replace: true, ...signed });
    if (put.status !== 200) throw refused(put, "replacing the wrapped age identity");
  }

  async function load(): Promise<string> {
    const got = await api<StoredIdentity>("GET", "/v2/keys/age");
    if (got.status === 404) return setup();
    if (got.status !== 200 || !got.data) throw refused(got, "reading the wrapped age identity");
    const w = parseWrapped(got.data.wrapped);
    if (w.v === 2) {
      const salt = got.data.salt;
      if (typeof salt !== "string" || !SALT.test(salt)) throw new EncryptionError("bad_wrap", "the gateway stores this account's age identity without its salt");
      return unwrapIdentity(got.data.wrapped, await keyFor(w.kdf, salt as Hex), contextOf(salt as Hex));
    }
    // Wrapped the earlier way (one signature per chain, for every deployment): opened once more
    // with it, then re-wrapped for this deployment and a salt, so that signature opens it no more.
    const identity =
      w.kdf === "passphrase"
        ? unwrapIdentity(got.data.wrapped, passphraseKey(opts.passphrase ?? needPassphrase(), base64nopad.decode(w.salt ?? "")), { account: me })
        : unwrapIdentity(got.data.wrapped, legacyWrappingKey(await ownerSignature(legacyMessage())), { account: me });
    await replace(identity, w.kdf === "passphrase" ? opts.passphrase : undefined);
    return identity;
  }

  /**
   * Wraps the account's identity anew (the same identity: every file stays readable), under
   * `passphrase` or, without one, the owner's signature, for a fresh salt, and replaces the stored
   * blob (signed by the owner, see `replace`). A new salt also retires every signature the
   * wallet made for the old one.
   */
  async function rewrap(to: { passphrase?: string } = {}): Promise<void> {
    await replace(await identityOnce(), to.passphrase);
  }

  let identity: Promise<string> | undefined;
  const identityOnce = () => {
    identity ??= load();
    identity.catch(() => (identity = undefined));
    return identity;
  };

  /** The recipient `address`'s DID publishes (the newest valid key-agreement attribute), if any. */
  const recipientOf = async (address: Address) => publishedRecipient((await chain()).publicClient, registry, address);

  /** Publishes the account's recipient on its DID unless it is already there. */
  async function publish(): Promise<{ recipient: string; tx?: Hex }> {
    // The DID's published key is read alongside the identity's loading, not after it.
    const published = recipientOf(me);
    published.catch(() => {});
    const recipient = identityToRecipient(await identityOnce());
    if ((await published) === recipient) return { recipient };
    const gw = await chain();
    const { request } = await gw.publicClient.simulateContract({
      account: gw.wallet().account,
      address: registry,
      abi: didRegistryAbi,
      functionName: "setAttribute",
      args: [me, KEY_AGREEMENT_NAME, `0x${bytesToHex(recipientToBytes(recipient))}`, ATTRIBUTE_VALIDITY],
    });
    return { recipient, tx: await gw.confirm(gw.wallet().writeContract(request)) };
  }

  /** The file key of one of this account's encrypted files, from its header (a few KiB read). */
  async function fileKeyOf(kind: StorageKind, cid: string): Promise<Uint8Array> {
    const size = await store.sizeOf(kind, cid);
    const res = await store.download(kind, cid, { range: [0, Math.min(size, 8192) - 1] });
    return readFileKey([await identityOnce()], res.body ?? new Blob([]).stream());
  }

  return {
    did: store.did,
    address: me,
    /** The account's age identity (`AGE-SECRET-KEY-1…`), made and stored wrapped at first use. */
    identity: identityOnce,
    recipient: async () => identityToRecipient(await identityOnce()),
    recipientOf,
    publish,
    rewrap,

    /** Encrypts `source` to the account's own recipient, once, into the spool, and uploads that
     * with `encryption: age`. The recipient is published on the DID first if it is not yet. */
    async upload(kind: StorageKind, source: Blob | Uint8Array | string, o: { name?: string; onProgress?: (sent: number, total: number) => void } = {}): Promise<FileEntry> {
      const blob = typeof source === "string" ? blobOfPath(source) : source instanceof Blob ? source : new Blob([source as Uint8Array<ArrayBuffer>]);
      const name = o.name ?? (typeof source === "string" ? (source.split("/").pop() as string) : blob instanceof File ? blob.name : "file");
      const { recipient } = await publish();
      const spool = opts.spool === undefined ? defaultSpool() : opts.spool === null ? undefined : opts.spool();
      return uploadSealed(store, kind, blob, recipient, spool, { name, ...(o.onProgress ? { onProgress: o.onProgress } : {}) });
    },

    /** Lets `reader` decrypt one of this account's encrypted files: a header wrapping its file
     * key to the reader's published recipient, stored at the gateway. Grant read on chain too. */
    async share(cid: string, reader: Address, kind: StorageKind = "dfs") {
      const recipient = await recipientOf(reader);
      if (!recipient) throw new EncryptionError("no_recipient", `${reader} has published no encryption key on its DID yet: they must run \`stowage age-key --publish\` (or upload one encrypted file) first`);
      const header = new TextDecoder().decode(headerFor(await fileKeyOf(kind, cid), [recipient]));
      const put = await api("PUT", `/v2/shares/${cid}/${getAddress(reader)}`, { header });
      if (put.status !== 200) throw refused(put, "storing the share");
      return { reader: getAddress(reader), recipient };
    },

    /**
     * Escrows the key of one of this account's encrypted files to the gateway (GET /chain's
     * `ageRecipient`), so it can sell it: the gateway checks the key against the stored file and
     * writes each buyer's share after the purchase. The gateway can then read the file.
     */
    async escrow(cid: string, kind: StorageKind = "dfs") {
      const to = store.info.ageRecipient;
      if (!to) throw new EncryptionError("gateway", "this gateway holds no age identity (GET /chain has no ageRecipient): it cannot sell encrypted files");
      const header = new TextDecoder().decode(headerFor(await fileKeyOf(kind, cid), [to]));
      const put = await api<{ keyId: string }>("PUT", `/v2/escrows/${cid}`, { header });
      if (put.status !== 200 || !put.data) throw refused(put, "escrowing the file key");
      return put.data;
    },

    /** Removes `reader`'s share (future access only: a key already read stays read). */
    async unshare(cid: string, reader: Address): Promise<boolean> {
      const del = await api<{ removed: boolean }>("DELETE", `/v2/shares/${cid}/${getAddress(reader)}`);
      if (del.status !== 200) throw refused(del, "removing the share");
      return Boolean(del.data?.removed);
    },

    /**
     * Downloads and, when the gateway says the entry is `age`, decrypts on the fly: with the
     * account's identity for its own files, else with the share the owner wrote for this account.
     * `raw` skips decryption (the ciphertext as stored).
     */
    async download(kind: StorageKind, cid: string, o: { raw?: boolean } = {}): Promise<OpenedDownload> {
      const response = await store.download(kind, cid);
      return o.raw ? { body: response.body ?? new Blob([]).stream(), encrypted: false, response } : open(response, cid);
    },

    /** Decrypts a download already made (`store.download` of the whole file) when it is `age`.
     * Its body is decrypted in place (no copy): a clone of `response` made before shares the
     * body's bytes in Bun, so read no clone of it. */
    open,
  };

  async function open(response: Response, cid: string): Promise<OpenedDownload> {
    const body = response.body ?? new Blob([]).stream();
    if (response.headers.get("x-stowage-encryption") !== AGE) return { body, encrypted: false, response };
    const ownerDid = response.headers.get("x-stowage-owner") ?? store.did;
    const owner = getAddress(ownerDid.split(":").pop() as string);
    try {
      // The body's chunks are this call's alone (see `open` above): each is decrypted where it lies (age.ts).
      if (isAddressEqual(owner, me)) return { body: decryptStream([await identityOnce()], body, { inPlace: true }), encrypted: true, response };
      const share = await api<{ header: string }>("GET", `/v2/shares/${owner}/${cid}`);
      if (share.status === 404) throw new EncryptionError("no_share", `${cid} is encrypted, and ${owner} has shared its key with no key of yours (${me}): ask the owner to \`stowage grant ${cid} ${me}\``, 404);
      if (share.status !== 200 || !share.data) throw refused(share, "reading the share");
      return { body: decryptWithHeader([await identityOnce()], utf8ToBytes(share.data.header), body, { inPlace: true }), encrypted: true, response };
    } catch (err) {
      await body.cancel().catch(() => {});
      throw err;
    }
  }
}

export type EncryptionClient = Awaited<ReturnType<typeof connectEncryption>>;

/**
 * Seals `blob` to `recipient` once into `spool` and uploads that as any file (hash pass, send
 * pass), marked `encryption: age`; the spool is dropped after. Without a spool (Node) it is sealed
 * in both passes, the same bytes (one file key, one nonce), at twice the sealing's cost.
 * `enc.upload` publishes the recipient first; the command line publishes once per run and
 * spools into its own private folder (removed on signals too), then calls this per file.
 */
export async function uploadSealed(store: StorageClient, kind: StorageKind, blob: Blob, recipient: string, spool: Spool | undefined, o: { name: string; onProgress?: (sent: number, total: number) => void }): Promise<FileEntry> {
  const sealer = prepareEncryption([recipient]);
  const size = sealer.sealedSize(blob.size);
  // (The upload's progress: the sealed request's bytes, as store.upload counts them.)
  const sent = { ...o, encryption: AGE };
  if (!spool) return store.upload(kind, { size, stream: () => sealer.encrypt(blob.stream()) }, sent);
  try {
    const sealed = await spool.keep(sealer.encrypt(blob.stream()));
    if (sealed.size !== size) throw new EncryptionError("source_changed", `the file changed while it was encrypted (${sealed.size} bytes sealed, ${size} expected): upload it again`);
    return await store.upload(kind, sealed, sent);
  } finally {
    await spool.drop();
  }
}
export { AgeError };
