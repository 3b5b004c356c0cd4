/**
 * The D9 Cid of a file (UnixFS CIDv1, raw leaves, fixed 1 MiB chunks, balanced layout with 1024
 * links per node), computed by the SDK as it reads the file once. An upload signs it as its
 * payload (D5), so the gateway checks the Cid it computes anyway and hashes each byte once
 * instead of twice (whole-file SHA-256 plus per-chunk).
 *
 * Why not ipfs-unixfs-importer, which the server uses: the importer's fixed-size chunker copies
 * every chunk that a read does not align with, and runs each one through several async
 * generators (measured on 128 MiB: 1.4 ms of CPU per MiB, against 1.0 for a plain SHA-256). Here
 * each piece the stream gives is hashed where it lies, cut at chunk boundaries without a copy;
 * only the inner dag-pb nodes (one per 1024 MiB) are built, with the same libraries the importer
 * uses. test/sdk/cid.test.ts holds it equal to the importer's Cid, small trees included.
 *
 * @example
 *   await cidOfStream(new Blob([new TextEncoder().encode("hello world\n")]).stream())
 *   // "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4"
 */
import * as dagPb from "@ipld/dag-pb";
import { sha256 as nobleSha256 } from "@noble/hashes/sha2.js";
import { UnixFS } from "ipfs-unixfs";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { create as createDigest } from "multiformats/hashes/digest";

/** The multihash code of SHA-256. */
const SHA2_256 = 0x12;

/** D9's layout (the server's importer options take theirs from here: storage/cid-options.ts);
 * tests pass smaller ones to build deep trees from few bytes. */
export interface CidLayout {
  chunkSize: number;
  maxChildrenPerNode: number;
}
export const D9_LAYOUT: Readonly<CidLayout> = { chunkSize: 1_048_576, maxChildrenPerNode: 1024 };

interface Hasher {
  update(bytes: Uint8Array): void;
  digest(): Uint8Array;
}

/** Bun's native SHA-256 where there is one; @noble's in browsers and Node (no runtime-only import). */
function hasher(): Hasher {
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

/** A dag-pb UnixFS `file` node over `children`, as the importer's reducer builds it. */
function parent(children: readonly Linked[]): Linked {
  const unixfs = new UnixFS({ type: "file" });
  // The importer links only children holding bytes (an empty file is a single leaf, never here).
  const kept = children.filter((c) => c.fileSize > 0);
  for (const c of kept) unixfs.addBlockSize(BigInt(c.fileSize));
  const links = kept.map((c) => ({ Name: "", Tsize: c.tsize, Hash: c.cid }));
  const block = dagPb.encode(dagPb.prepare({ Data: unixfs.marshal(), Links: links }));
  const h = hasher();
  h.update(block);
  return {
    cid: CID.createV1(dagPb.code, createDigest(SHA2_256, h.digest())),
    tsize: block.length + kept.reduce((n, c) => n + c.tsize, 0),
    fileSize: kept.reduce((n, c) => n + c.fileSize, 0),
  };
}

/** A raw leaf as its parent links it: `digest` is the SHA-256 of its `size` bytes. */
export function rawLeaf(digest: Uint8Array, size: number): Linked {
  return { cid: CID.createV1(raw.code, createDigest(SHA2_256, digest)), tsize: size, fileSize: size };
}

/**
 * The Cid of a file whose raw leaves are `leaves`, in file order (at least one): one leaf is the
 * file itself; more are linked level by level, `maxChildrenPerNode` to a node (D9's balanced
 * layout). The gateway builds its dfs uploads' Cids and its composed objects' with it too.
 */
export function rootOf(leaves: readonly Linked[], maxChildrenPerNode: number = D9_LAYOUT.maxChildrenPerNode): CID {
  if (leaves.length === 0) throw new Error("a file has at least one leaf (an empty one for an empty file)");
  let level = leaves;
  while (level.length > 1) {
    const next: Linked[] = [];
    for (let i = 0; i < level.length; i += maxChildrenPerNode) next.push(parent(level.slice(i, i + maxChildrenPerNode)));
    level = next;
  }
  return (level[0] as Linked).cid;
}

/** The Cid of the bytes `stream` gives (read to its end, once). */
export async function cidOfStream(stream: ReadableStream<Uint8Array>, layout: CidLayout = D9_LAYOUT): Promise<string> {
  const { chunkSize, maxChildrenPerNode } = layout;
  const leaves: Linked[] = [];
  let h = hasher();
  let filled = 0;
  const cut = () => {
    leaves.push(rawLeaf(h.digest(), filled));
    h = hasher();
    filled = 0;
  };
  for await (const piece of stream) {
    for (let at = 0; at < piece.length; ) {
      const n = Math.min(chunkSize - filled, piece.length - at);
      h.update(n === piece.length ? piece : piece.subarray(at, at + n));
      filled += n;
      at += n;
      if (filled === chunkSize) cut();
    }
  }
  // The last, short chunk; or the one empty leaf of an empty file.
  if (filled > 0 || leaves.length === 0) cut();
  return rootOf(leaves, maxChildrenPerNode).toString();
}
