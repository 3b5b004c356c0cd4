/**
 * The user commands of client-side encryption (D20): `age-key` (export the account's identity for
 * `age -d -i`), `grant` (on-chain read grant plus the share of an encrypted file's key) and
 * `revoke` (both removed). `put --encrypt` and `get`'s decryption live in transfer.ts and reach
 * the SDK through `encryptionWith` here.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getAddress, isAddress, type Address } from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import { ConfigError, parseConfig } from "../../config.ts";
import { connectDirectory } from "../../sdk/directory.ts";
import { useNativeAead } from "../../sdk/aead-native.ts";
import { AGE, connectEncryption, EncryptionError, uploadSealed as sealOnceAndUpload, type EncryptionClient } from "../../sdk/encryption.ts";
import { bunFileSpool } from "../../sdk/spool.ts";
import { blobOfPath, type FileEntry, type StorageClient } from "../../sdk/storage.ts";
import { CliError } from "../chain-access.ts";
import { privateTempDir } from "./temp.ts";
import { BACKENDS, expectPositionals, json, loggedIn, reach, userAccount, type Backend, type Invocation, type Io } from "./common.ts";

/** The encryption client of a logged-in user. */
export const encryptionWith = (inv: Invocation, store: StorageClient, account: PrivateKeyAccount, o: { fetch?: typeof fetch } = {}) => {
  // The payload's ChaCha20-Poly1305 in a system library where one loads (OpenSSL, else libsodium:
  // ten or four times the WASM build's pace; aead-native.ts), for every command that seals or opens a file.
  useNativeAead();
  return connectEncryption({ baseUrl: inv.gateway, store, account, ...(o.fetch ? { fetch: o.fetch } : {}) });
};

/**
 * `put --encrypt`: `path` sealed once to the account's recipient into a spool file of a private
 * temporary folder (removed when done, and on SIGINT/SIGTERM: temp.ts), then uploaded from it
 * (the SDK's uploadSealed). `publish()` (once per run) is the caller's.
 */
export async function uploadSealed(store: StorageClient, recipient: string, kind: Backend, path: string, name: string): Promise<FileEntry> {
  useNativeAead();
  const tmp = await privateTempDir("stowage-seal-");
  try {
    return await sealOnceAndUpload(store, kind, blobOfPath(path), recipient, bunFileSpool(tmp.dir), { name });
  } catch (e) {
    // Which of the files being put changed.
    if (e instanceof EncryptionError && e.code === "source_changed") throw new CliError(`${path}: ${e.message}`);
    throw e;
  } finally {
    await tmp.remove();
  }
}

/** The account's recipient, published on its DID first if it is not yet (once per command run). */
export const ownRecipient = async (enc: EncryptionClient) => (await enc.publish()).recipient;

/** Whether `put` encrypts: --encrypt, or STOWAGE_ENCRYPT=on unless --plain. */
export function wantsEncryption(inv: Invocation): boolean {
  if (inv.flags.has("--encrypt") && inv.flags.has("--plain")) throw new ConfigError("--encrypt and --plain contradict each other");
  if (inv.flags.has("--encrypt")) return true;
  if (inv.flags.has("--plain")) return false;
  return parseConfig([], inv.env, "client").encrypt === "on";
}

export async function ageKey(inv: Invocation, io: Io): Promise<number> {
  expectPositionals(inv, []);
  const account = userAccount(inv);
  const enc = await encryptionWith(inv, await loggedIn(inv, account), account);
  let published: { recipient: string; tx?: string } | undefined;
  if (inv.flags.has("--publish")) {
    published = await enc.publish();
    const { recipient, tx } = published;
    io.log(tx ? `published ${recipient} on ${enc.did} (${tx})` : `${recipient} is already published on ${enc.did}`);
  }
  // Publishing shows the public half only: the secret is printed when asked for, not on the way.
  const secret = !inv.flags.has("--recipient") && !published;
  if (inv.flags.has("--json")) {
    const identity = secret ? await enc.identity() : undefined;
    io.out(json({ did: enc.did, recipient: await enc.recipient(), ...(identity ? { identity } : {}), ...(published ? { publishedTx: published.tx ?? null } : {}) }));
  } else if (!secret) io.out(await enc.recipient());
  else {
    io.log("# the secret key of your encrypted files: keep it as safe as your wallet key");
    io.out(await enc.identity());
  }
  return 0;
}

function readerOf(raw: string): Address {
  if (!isAddress(raw, { strict: false })) throw new ConfigError(`ADDRESS must be a 0x address (got ${JSON.stringify(raw)})`);
  return getAddress(raw);
}

/** The caller's own stored file with this Cid, and its back-end. */
export async function ownFile(inv: Invocation, store: StorageClient, cid: string): Promise<{ file: FileEntry; kind: Backend }> {
  for (const kind of BACKENDS) {
    const file = (await store.list(kind)).Object.find((e) => e.Cid === cid);
    if (file) return { file, kind };
  }
  throw new CliError(`you store no file with Cid ${cid} at ${inv.gateway} (see \`stowage ls\`)`);
}

export async function grant(inv: Invocation, io: Io): Promise<number> {
  const [cid, raw] = expectPositionals(inv, ["MID", "ADDRESS"]) as [string, string];
  const reader = readerOf(raw);
  const account = userAccount(inv);
  const store = await loggedIn(inv, account);
  const { file, kind } = await ownFile(inv, store, cid);
  // A grant is on a directory entry: without one the contract refuses, so ask before sharing
  // anything.
  const dir = await reach(inv.gateway, () => connectDirectory(inv.gateway, { account }));
  if (!(await dir.entry(account.address, cid))) throw new CliError(`${cid} is not published: a grant lets a reader read one of your directory entries, so publish it first (stowage publish ${cid})`);
  // The share first: without the reader's published key the grant would open ciphertext only.
  let sharedTo: string | null = null;
  if (file.UserDefined.encryption === AGE) {
    sharedTo = (await (await encryptionWith(inv, store, account)).share(cid, reader, kind)).recipient;
    io.log(`shared the file key of ${cid} with ${reader} (${sharedTo})`);
  }
  io.log(`granting ${reader} read on ${cid} …`);
  const tx = await dir.grantRead(cid, reader);
  io.out(inv.flags.has("--json") ? json({ mid: cid, reader, tx, sharedTo }) : tx);
  io.log("the gateway lets them read it after its next poll of the chain");
  return 0;
}

/**
 * `revoke --rekey`: the file again under a new file key (so a key a reader kept opens nothing
 * new), stored under the same name (the old copy is replaced), its directory entry moved to the
 * new Cid with the same fields (and escrow, when priced). The plaintext passes through a private
 * temporary file: an upload reads its source twice (hash pass, upload pass).
 */
async function rekey(inv: Invocation, io: Io, store: StorageClient, account: PrivateKeyAccount, cid: string): Promise<string> {
  const { file, kind } = await ownFile(inv, store, cid);
  if (file.UserDefined.encryption !== AGE) throw new CliError(`--rekey re-encrypts an encrypted file, and ${cid} is not one`);
  const enc = await encryptionWith(inv, store, account);
  const dir = mkdtempSync(join(tmpdir(), "stowage-rekey-"));
  try {
    const plain = join(dir, "plain");
    io.log(`re-encrypting ${file.Name} under a new key …`);
    await Bun.write(plain, new Response((await enc.download(kind, cid)).body));
    const entry = await enc.upload(kind, plain, { name: file.Name });
    const directory = await reach(inv.gateway, () => connectDirectory(inv.gateway, { account }));
    const published = await directory.entry(account.address, cid);
    if (published) {
      await directory.unpublish(cid);
      await directory.publish({ cid: entry.Cid, name: published.name, size: entry.Size, price: published.price, isPublic: published.isPublic, keywords: published.keywords });
      if (published.price > 0n) await enc.escrow(entry.Cid, kind);
      io.log(`moved the directory entry to ${entry.Cid}: grant the readers who keep access again (stowage grant ${entry.Cid} ADDRESS)`);
    }
    return entry.Cid;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function revoke(inv: Invocation, io: Io): Promise<number> {
  const [cid, raw] = expectPositionals(inv, ["MID", "ADDRESS"]) as [string, string];
  const reader = readerOf(raw);
  const account = userAccount(inv);
  const store = await loggedIn(inv, account);
  const unshared = await (await encryptionWith(inv, store, account)).unshare(cid, reader);
  if (unshared) io.log(`removed the share of ${cid} with ${reader}`);
  const dir = await reach(inv.gateway, () => connectDirectory(inv.gateway, { account }));
  io.log(`revoking ${reader}'s read grant on ${cid} …`);
  const tx = await dir.revokeRead(cid, reader);
  const asJson = inv.flags.has("--json");
  if (!asJson) io.out(tx);
  let rekeyed: string | undefined;
  if (inv.flags.has("--rekey")) {
    rekeyed = await rekey(inv, io, store, account, cid);
    if (!asJson) io.out(rekeyed);
    io.log("re-encrypted: the key they may have kept opens nothing stored now");
  } else io.log("future access only: what they already downloaded and decrypted, they keep (--rekey re-encrypts)");
  if (asJson) io.out(json({ mid: cid, reader, tx, unshared, rekeyedTo: rekeyed ?? null }));
  return 0;
}
