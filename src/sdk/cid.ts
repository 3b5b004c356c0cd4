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
 * only the inner dag-pb nodes (one per 1024 MiB) are built (cid/tree.ts, which the gateway's dfs
 * store uses too). test/sdk/cid.test.ts holds it equal to the importer's Cid, small trees included.
 *
 * @example
 *   await cidOfStream(new Blob([new TextEncoder().encode("hello world\n")]).stream())
 *   // "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4"
 */
import { rawLeaf, rootOf, sha256Hasher, type Linked } from "../cid/tree.ts";

/** D9's layout (the server's importer options take theirs from here: storage/cid-options.ts);
 * tests pass smaller ones to build deep trees from few bytes. */
export interface CidLayout {
  chunkSize: number;
  maxChildrenPerNode: number;
}
export const D9_LAYOUT: Readonly<CidLayout> = { chunkSize: 1_048_576, maxChildrenPerNode: 1024 };

/** The Cid of the bytes `stream` gives (read to its end, once). */
export async function cidOfStream(stream: ReadableStream<Uint8Array>, layout: CidLayout = D9_LAYOUT): Promise<string> {
  const { chunkSize, maxChildrenPerNode } = layout;
  const leaves: Linked[] = [];
  let h = sha256Hasher();
  let filled = 0;
  const cut = () => {
    leaves.push(rawLeaf(h.digest(), filled));
    h = sha256Hasher();
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
