/**
 * Blocks in the blob store (D15): each block is the object `ipfs/<multihash, base32>` (lower
 * case, RFC 4648 without padding or multibase prefix: `base32.baseEncode` of the multihash bytes).
 * Keyed by multihash as blockstore-fs does, so a raw leaf and a dag-pb node with the same bytes
 * are one object, and any Cid version or codec of a block finds it.
 *
 * `BlobBlockstore` is the blockstore Helia (so bitswap) reads: every block the store holds is
 * served, each checked against its Cid before it leaves (a damaged object is never sent), unless
 * `servable` says no (the denylist, D25): then it is a block this store does not have. It does
 * not write or delete: blocks are written by an upload's sink under a guard lease (put.ts) and
 * deleted through the guard (D15), never behind the reference counts' back.
 *
 * Hashes checked: sha2-256 (every block this gateway's importer makes), and what Helia checks
 * besides, sha2-512 and identity, for blocks a CAR import brings. An identity Cid carries its
 * block in its digest: it is never stored, and reading it is reading the Cid.
 */
import type { AbortOptions } from "@libp2p/interface";
import type { HeliaInit } from "helia";
import { base32 } from "multiformats/bases/base32";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import * as Digest from "multiformats/hashes/digest";
import { isBlobError, type BlobStore, type LocalBlobStore } from "../../blob/index.ts";
import { IpfsError } from "./errors.ts";

export const BLOCK_PREFIX = "ipfs/";
/** Multihash code → Bun's name of the hash. */
const HASHES: ReadonlyMap<number, "sha256" | "sha512"> = new Map([
  [0x12, "sha256"],
  [0x13, "sha512"],
]);
/** The identity "hash": the digest is the block itself. */
export const IDENTITY = 0x00;

/** Whether blocks under this multihash code can be checked here (and so stored and served). */
export const hashChecked = (code: number) => code === IDENTITY || HASHES.has(code);

/** The block an identity Cid carries, or undefined for a Cid whose block is stored. */
export const inlineBlock = (cid: CID): Uint8Array | undefined => (cid.multihash.code === IDENTITY ? cid.multihash.digest : undefined);

type Blockstore = NonNullable<HeliaInit["blockstore"]>;
type Pair = { cid: CID; bytes: AsyncGenerator<Uint8Array> };

export function blockKey(cid: CID): string {
  return BLOCK_PREFIX + base32.baseEncode(cid.multihash.bytes);
}

/** The (raw-codec) Cid a block key names, or undefined for a key that is no block. */
export function cidOfKey(key: string): CID | undefined {
  if (!key.startsWith(BLOCK_PREFIX)) return undefined;
  try {
    return CID.createV1(raw.code, Digest.decode(base32.baseDecode(key.slice(BLOCK_PREFIX.length))));
  } catch {
    return undefined;
  }
}

/** What a failed block read throws: the abort's reason when aborted, IPFS_BLOCK_MISSING for a block
 * the store does not hold, else the store's own error. */
function readFailure(err: unknown, cid: CID, options?: AbortOptions): unknown {
  options?.signal?.throwIfAborted();
  return isBlobError(err, "BlobNotFound") ? new IpfsError("IPFS_BLOCK_MISSING", `block ${cid} is not stored here`, { cause: err }) : err;
}

/** Reads a whole block and checks it hashes to its Cid. */
export async function readBlock(store: BlobStore, cid: CID, options?: AbortOptions): Promise<Uint8Array> {
  options?.signal?.throwIfAborted();
  const inline = inlineBlock(cid);
  if (inline) return inline;
  let bytes: Uint8Array;
  try {
    bytes = await store.bytes(blockKey(cid));
  } catch (err) {
    throw readFailure(err, cid, options);
  }
  verifyBlock(cid, bytes);
  return bytes;
}

/**
 * Reads a whole block of the local store into `into` (which must be its size, as its parent
 * says) and checks it hashes to its Cid; returns `into`. A file of another size is damage.
 */
export async function readBlockInto(store: LocalBlobStore, cid: CID, into: Uint8Array, options?: AbortOptions): Promise<Uint8Array> {
  options?.signal?.throwIfAborted();
  const inline = inlineBlock(cid);
  if (inline) {
    if (inline.byteLength !== into.byteLength) throw new IpfsError("IPFS_BLOCK_CORRUPT", `block ${cid} holds ${inline.byteLength} bytes, expected ${into.byteLength}`);
    into.set(inline);
    return into;
  }
  let file: Awaited<ReturnType<LocalBlobStore["openFile"]>>;
  try {
    file = await store.openFile(blockKey(cid));
  } catch (err) {
    throw readFailure(err, cid, options);
  }
  try {
    if (file.size !== into.byteLength) throw new IpfsError("IPFS_BLOCK_CORRUPT", `block ${cid} holds ${file.size} bytes, expected ${into.byteLength}`);
    await file.read(0, into.byteLength, into);
  } finally {
    await file.close();
  }
  verifyBlock(cid, into);
  return into;
}

/** Whether `bytes` hash to `cid` (false for a hash not checked here: see `hashChecked`). */
export function matchesCid(cid: CID, bytes: Uint8Array): boolean {
  const { code, digest } = cid.multihash;
  if (code === IDENTITY) return Buffer.from(digest.buffer, digest.byteOffset, digest.byteLength).equals(bytes);
  const hash = HASHES.get(code);
  if (!hash) return false;
  return new Bun.CryptoHasher(hash).update(bytes).digest().equals(digest);
}

export function verifyBlock(cid: CID, bytes: Uint8Array): void {
  const { code } = cid.multihash;
  // A block under any other hash cannot be checked, so is not served.
  if (!hashChecked(code)) throw new IpfsError("IPFS_BLOCK_CORRUPT", `block ${cid} uses an unsupported hash (0x${code.toString(16)})`);
  if (!matchesCid(cid, bytes)) throw new IpfsError("IPFS_BLOCK_CORRUPT", `block ${cid} does not match its hash`);
}

const readOnly = (what: string) => new Error(`the ipfs blockstore does not ${what}: blocks are written by uploads and deleted through the blob guard`);

/** Whether a block may leave this node (the denylist's say); absent, every block may. */
export type Servable = (cid: CID) => Promise<boolean>;

export class BlobBlockstore implements Blockstore {
  constructor(
    readonly store: BlobStore,
    private readonly servable?: Servable,
  ) {}

  /** Bitswap asks this before `get`: a block the denylist refuses is one we do not have. */
  async has(cid: CID): Promise<boolean> {
    if (this.servable && !(await this.servable(cid))) return false;
    return (await this.store.stat(blockKey(cid))) !== undefined;
  }

  async *get(cid: CID, options?: AbortOptions): AsyncGenerator<Uint8Array> {
    if (this.servable && !(await this.servable(cid))) throw new IpfsError("IPFS_BLOCK_MISSING", `block ${cid} is not served here`);
    yield await readBlock(this.store, cid, options);
  }

  async *getMany(source: Iterable<CID> | AsyncIterable<CID>, options?: AbortOptions): AsyncGenerator<Pair> {
    for await (const cid of source) yield { cid, bytes: this.get(cid, options) };
  }

  /** Every block, as raw-codec Cids (the key holds the multihash only). */
  async *getAll(options?: AbortOptions): AsyncGenerator<Pair> {
    for await (const key of this.store.list(BLOCK_PREFIX)) {
      const cid = cidOfKey(key);
      if (cid) yield { cid, bytes: this.get(cid, options) };
    }
  }

  put(): Promise<CID> {
    return Promise.reject(readOnly("write"));
  }

  async *putMany(): AsyncGenerator<CID> {
    throw readOnly("write");
  }

  delete(): Promise<void> {
    return Promise.reject(readOnly("delete"));
  }

  async *deleteMany(): AsyncGenerator<CID> {
    throw readOnly("delete");
  }
}
