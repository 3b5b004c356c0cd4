/**
 * Chunks in the blob store (D15): each 1 MiB chunk is the object `dfs/<its raw-leaf Cid>`, written
 * once whatever the number of files naming it. Durability and atomicity are the store's (a put
 * that resolves is whole and durable; readers never see half an object); this file adds what the
 * dfs back-end promises on top: never serving bytes whose SHA-256 is not the chunk's, and
 * repairing a damaged chunk when the same bytes are uploaded again.
 */
import { isBlobError } from "../../blob/index.ts";
import type { Lease } from "../../blob/guard.ts";
import type { BlobBatch } from "../../blob/store.ts";
import { chunkKey } from "./cid.ts";
import type { DfsContext } from "./context.ts";
import { CorruptChunkError } from "./errors.ts";

/** SHA-256 in hex. WebCrypto's digest runs off the JavaScript thread in Bun (measured), so
 * checking chunks does not compete with the uploads' hashing for the event loop. */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  // The cast only narrows ArrayBufferLike: chunks are never in a SharedArrayBuffer.
  return Buffer.from(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>)).toString("hex");
}

/**
 * Makes the chunk present, writing it when missing (after any deletion in progress is over). The
 * caller's lease must already pin the key. A chunk no row names is written at once, without
 * asking the store first: fresh content, the usual case, costs one PUT instead of a HEAD and a
 * PUT (measured on Ceph RGW: ≈ 1 ms of RGW CPU per chunk less), and an unreferenced leftover with
 * the same key holds the same bytes anyway. A chunk a row names is looked for, and when found
 * with the right size read back and hashed: uploading the same content again thus repairs a
 * damaged one (the cost: one read of each chunk an upload finds present). Returns whether bytes
 * were written. With `batch`, a chunk written is durable once the caller's `batch.sync()` resolves.
 * `lease`, the caller's pin of the key: when it found no deletion in progress, none is looked for.
 * `referenced`: whether a row referenced the chunk when the lease pinned its key (read in the pin's
 * transaction, Lease.pin).
 */
export async function storeChunk(ctx: DfsContext, hash: string, bytes: Uint8Array, { referenced, batch, lease }: { referenced: boolean; batch?: BlobBatch; lease?: Lease }): Promise<boolean> {
  const key = chunkKey(hash);
  if (await ctx.guard.ensure(key, () => bytes, bytes.length, { unseen: !referenced, batch, lease })) {
    await ctx.checks?.wrote(hash); // the file holds bytes that hashed right: its record (D9)
    return true;
  }
  if (await holds(ctx, key, hash)) return false;
  // The pin keeps deleters away, so the key is ours to overwrite.
  await ctx.store.put(key, bytes);
  await ctx.checks?.wrote(hash);
  return true;
}

/** Reads a whole chunk and checks its size and SHA-256; never returns wrong bytes. */
export async function loadChunk(ctx: DfsContext, hash: string, size: number): Promise<Uint8Array> {
  let bytes: Uint8Array;
  try {
    bytes = await ctx.store.bytes(chunkKey(hash));
  } catch (e) {
    if (isBlobError(e, "BlobNotFound")) throw new CorruptChunkError(hash, "object missing");
    throw e;
  }
  if (bytes.length !== size) throw new CorruptChunkError(hash, `size ${bytes.length}, expected ${size}`);
  if ((await sha256Hex(bytes)) !== hash) throw new CorruptChunkError(hash, "SHA-256 mismatch");
  return bytes;
}

async function holds(ctx: DfsContext, key: string, hash: string): Promise<boolean> {
  try {
    return (await sha256Hex(await ctx.store.bytes(key))) === hash;
  } catch (e) {
    if (isBlobError(e, "BlobNotFound")) return false;
    throw e;
  }
}
