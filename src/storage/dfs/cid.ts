/**
 * How a file's Cid is computed (D9): UnixFS CIDv1, raw leaves, fixed 1 MiB chunks, balanced layout
 * with at most 1024 links per node — what @helia/unixfs 8 does by default. Every option is passed
 * explicitly because bare ipfs-unixfs-importer defaults differ (256 KiB chunks, 174 links).
 *
 * @example
 *   const cid = await cidOf([new TextEncoder().encode("hello world\n")])
 *   // "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4"
 */
import { importFile, type ByteStream, type ImporterOptions, type WritableStorage } from "ipfs-unixfs-importer";
import type { Chunker } from "ipfs-unixfs-importer/chunker";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { create as createDigest } from "multiformats/hashes/digest";
import { sha256 } from "multiformats/hashes/sha2";
import { CHUNK_SIZE, MAX_CHILDREN_PER_NODE, d9ImporterOptions } from "../cid-options.ts";

export { CHUNK_SIZE, MAX_CHILDREN_PER_NODE };

/**
 * The D9 options of both back-ends, plus `blockWriteConcurrency: 1`: the importer then hands raw
 * leaves to the blockstore one at a time, in file order, and holds no more than one chunk it has
 * cut. The dfs store relies on that order for its manifest. It does not change the Cid.
 */
export function importerOptions(): ImporterOptions {
  return { ...d9ImporterOptions(), blockWriteConcurrency: 1 };
}

/** Runs the importer over `content`, giving every block (leaves and inner nodes) to `blocks`;
 * `chunker` cuts the same chunks as D9's (the upload's lentChunker), or D9's own. */
export async function importContent(content: ByteStream, blocks: WritableStorage, chunker?: Chunker): Promise<CID> {
  const entry = await importFile({ content }, blocks, chunker ? { ...importerOptions(), chunker } : importerOptions());
  return entry.cid;
}

/** A blockstore that keeps nothing: the Cid alone. */
const discard: WritableStorage = { put: async (cid) => cid };

/** The D9 Cid of some bytes, computed without storing them. */
export async function cidOf(content: ByteStream): Promise<string> {
  return (await importContent(content, discard)).toString();
}

/** True for a raw leaf (a chunk's bytes as they are); false for a dag-pb inner node. */
export function isRawLeaf(cid: CID): boolean {
  return cid.code === raw.code;
}

/** Lower-case hex SHA-256 of a raw leaf: its Cid's digest, which the importer computed. */
export function leafHash(cid: CID): string {
  if (cid.multihash.code !== sha256.code) throw new Error(`unexpected multihash 0x${cid.multihash.code.toString(16)}`);
  const d = cid.multihash.digest;
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString("hex");
}

/** Where the chunks live in the blob store (D15): `dfs/<raw-leaf CIDv1, base32>`. */
export const CHUNK_PREFIX = "dfs/";

/** The blob key of the chunk whose SHA-256 is `hash` (hex): the Cid the importer gave its leaf. */
export function chunkKey(hash: string): string {
  return CHUNK_PREFIX + CID.createV1(raw.code, createDigest(sha256.code, Buffer.from(hash, "hex"))).toString();
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
