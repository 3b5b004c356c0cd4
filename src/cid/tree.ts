/**
 * D9's Cid from a file's raw leaves: UnixFS `file` nodes over raw leaves, linked level by level,
 * at most `maxChildrenPerNode` to a node (the balanced layout), with only the inner dag-pb nodes
 * built and hashed. One builder for the SDK's Cid of a file it uploads (sdk/cid.ts), the dfs
 * store's uploads and its composed objects (storage/dfs): they sign, compute and check the same
 * Cid, which test/sdk/cid.test.ts and test/storage/dfs/cid.test.ts hold to ipfs-unixfs-importer's
 * and Helia's. Not part of the SDK's declared API (its .d.ts files may name only its own
 * dependencies, and multiformats is inlined), so sdk/cid.ts keeps its own exports.
 *
 * @example
 *   const h = sha256Hasher()
 *   h.update(bytes)
 *   rootOf([rawLeaf(h.digest(), bytes.length)], 1024).toString() // a one-chunk file is its raw leaf
 */
import * as dagPb from "@ipld/dag-pb";
import { sha256 as nobleSha256 } from "@noble/hashes/sha2.js";
import { UnixFS } from "ipfs-unixfs";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { create as createDigest } from "multiformats/hashes/digest";

/** The multihash code of SHA-256. */
const SHA2_256 = 0x12;

export interface Hasher {
  update(bytes: Uint8Array): void;
  digest(): Uint8Array;
}

/** Bun's native SHA-256 where there is one; @noble's in browsers and Node (no runtime-only import). */
export function sha256Hasher(): Hasher {
  if (typeof Bun !== "undefined") {
    const h = new Bun.CryptoHasher("sha256");
    return { update: (b) => void h.update(b), digest: () => new Uint8Array(h.digest()) };
  }
  const h = nobleSha256.create();
  return { update: (b) => void h.update(b), digest: () => h.digest() };
}

/** A node of the file's DAG as its parent links it: Tsize counts the whole subtree's blocks. */
export interface Linked {
  cid: CID;
  tsize: number;
  /** File bytes below it. */
  fileSize: number;
}

/** The Cid of a raw leaf whose bytes have the SHA-256 `digest`. */
export function rawLeafCid(digest: Uint8Array): CID {
  return CID.createV1(raw.code, createDigest(SHA2_256, digest));
}

/** A raw leaf as its parent links it: `digest` is the SHA-256 of its `size` bytes. */
export function rawLeaf(digest: Uint8Array, size: number): Linked {
  return { cid: rawLeafCid(digest), tsize: size, fileSize: size };
}

/** A dag-pb UnixFS `file` node over `children`, as the importer's reducer builds it. */
function parent(children: readonly Linked[]): Linked {
  const unixfs = new UnixFS({ type: "file" });
  // The importer links only children holding bytes (an empty file is a single leaf, never here).
  const kept = children.filter((c) => c.fileSize > 0);
  for (const c of kept) unixfs.addBlockSize(BigInt(c.fileSize));
  const links = kept.map((c) => ({ Name: "", Tsize: c.tsize, Hash: c.cid }));
  const block = dagPb.encode(dagPb.prepare({ Data: unixfs.marshal(), Links: links }));
  const h = sha256Hasher();
  h.update(block);
  return {
    cid: CID.createV1(dagPb.code, createDigest(SHA2_256, h.digest())),
    tsize: block.length + kept.reduce((n, c) => n + c.tsize, 0),
    fileSize: kept.reduce((n, c) => n + c.fileSize, 0),
  };
}

/**
 * The Cid of a file whose raw leaves are `leaves`, in file order (at least one): one leaf is the
 * file itself; more are linked level by level, `maxChildrenPerNode` to a node.
 */
export function rootOf(leaves: readonly Linked[], maxChildrenPerNode: number): CID {
  if (leaves.length === 0) throw new Error("a file has at least one leaf (an empty one for an empty file)");
  let level = leaves;
  while (level.length > 1) {
    const next: Linked[] = [];
    for (let i = 0; i < level.length; i += maxChildrenPerNode) next.push(parent(level.slice(i, i + maxChildrenPerNode)));
    level = next;
  }
  return (level[0] as Linked).cid;
}
