/**
 * How a file's Cid is computed (D9): UnixFS CIDv1, raw leaves, fixed 1 MiB chunks, balanced layout
 * with at most 1024 links per node — what @helia/unixfs 8 does by default. Every option is passed
 * explicitly because bare ipfs-unixfs-importer defaults differ (256 KiB chunks, 174 links).
 *
 * @example
 *   const cid = await cidOf([new TextEncoder().encode("hello world\n")])
 *   // "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4"
 */
import { importFile, type ByteStream, type WritableStorage } from "ipfs-unixfs-importer";
import type { Chunker } from "ipfs-unixfs-importer/chunker";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { sha256 } from "multiformats/hashes/sha2";
import { rawLeaf, rawLeafCid, rootOf, sha256Hasher, type Linked } from "../../cid/tree.ts";
import { CHUNK_SIZE, MAX_CHILDREN_PER_NODE, d9ImporterOptions } from "../cid-options.ts";

export { CHUNK_SIZE, MAX_CHILDREN_PER_NODE };

/**
 * D9's Cid of `content`, cut by `chunker`, each raw leaf handed to `put` in file order once it is
 * hashed (the dfs store's uploads; inner nodes are only hashed, never stored). The same Cid as
 * ipfs-unixfs-importer's and Helia's (test/storage/dfs/cid.test.ts), without the importer's
 * reducer and its generators made anew for each upload: under small uploads JavaScriptCore kept
 * recompiling those closures, and the importer was ≈ 6 % of the event loop.
 */
export async function chunkContent(content: AsyncIterable<Uint8Array>, chunker: Chunker, put: (leaf: CID, bytes: Uint8Array) => Promise<unknown>): Promise<CID> {
  const leaves: Linked[] = [];
  for await (const chunk of chunker(content)) {
    const h = sha256Hasher();
    h.update(chunk);
    const leaf = rawLeaf(h.digest(), chunk.byteLength);
    leaves.push(leaf);
    await put(leaf.cid, chunk); // the chunk may be given back to its pool from here on: hashed before
  }
  return rootOf(leaves, MAX_CHILDREN_PER_NODE);
}

/** A blockstore that keeps nothing: the Cid alone. */
const discard: WritableStorage = { put: async (cid) => cid };

/** The D9 Cid of some bytes, computed by ipfs-unixfs-importer without storing them: the reference
 * the dfs store's `chunkContent` and the SDK's Cid are held to in the tests. */
export async function cidOf(content: ByteStream): Promise<string> {
  return (await importFile({ content }, discard, d9ImporterOptions())).cid.toString();
}

/** True for a raw leaf (a chunk's bytes as they are); false for a dag-pb inner node. */
export function isRawLeaf(cid: CID): boolean {
  return cid.code === raw.code;
}

/** Lower-case hex SHA-256 of a raw leaf: its Cid's digest. */
export function leafHash(cid: CID): string {
  if (cid.multihash.code !== sha256.code) throw new Error(`unexpected multihash 0x${cid.multihash.code.toString(16)}`);
  const d = cid.multihash.digest;
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString("hex");
}

/** Where the chunks live in the blob store (D15): `dfs/<raw-leaf CIDv1, base32>`. */
export const CHUNK_PREFIX = "dfs/";

/** The blob key of the chunk whose SHA-256 is `hash` (hex): the Cid the importer gave its leaf. */
export function chunkKey(hash: string): string {
  return CHUNK_PREFIX + rawLeafCid(Buffer.from(hash, "hex")).toString();
}

/** The hex SHA-256 a chunk key names, or undefined for a key that is not exactly a chunk key. */
export function hashOfKey(key: string): string | undefined {
  if (!key.startsWith(CHUNK_PREFIX)) return undefined;
  try {
    const cid = CID.parse(key.slice(CHUNK_PREFIX.length));
    if (cid.version !== 1 || !isRawLeaf(cid)) return undefined;
    const hash = leafHash(cid);
    return chunkKey(hash) === key ? hash : undefined;
  } catch {
    return undefined;
  }
}
