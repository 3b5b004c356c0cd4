/**
 * A new object made of objects this store already holds, one after the other, without reading a
 * byte of them: an S3 multipart completion (D18) whose parts were chunked as they arrived. A dfs
 * object is its manifest (1 MiB chunks, known by hash and size) and its Cid is a UnixFS DAG over
 * raw leaves (D9), which needs only the leaves' Cids and sizes. So when every part but the last
 * is a whole number of chunks, the file's chunks are the parts' chunks in order, and its Cid comes
 * from D9's layout over those leaves (cid/tree.ts, as uploads build theirs): the same Cid reading
 * the bytes gives. A part of any other size would shift the chunk boundaries: `compose` answers
 * undefined and the caller streams the bytes through `put` instead.
 *
 * Crash and deletion safety (D15): the chunks are pinned under a lease before the parts are looked
 * at again; a part still there then means its chunks are referenced and no deleter can take them
 * until the new object's rows commit, whoever aborts the multipart upload meanwhile.
 */
import { rawLeaf, rootOf } from "../../cid/tree.ts";
import type { PendingPut } from "../backend.ts";
import { CHUNK_SIZE, MAX_CHILDREN_PER_NODE, chunkKey } from "./cid.ts";
import type { DfsContext } from "./context.ts";
import { AbortedPutError } from "./errors.ts";
import { pendingPut } from "../pending.ts";
import { commitIn, type ChunkRef } from "./rows.ts";

/** The D9 Cid of a file whose raw leaves are `leaves`, in order (no block is stored or read: the
 * leaves exist, inner nodes are only hashed). */
export function cidOfLeaves(leaves: readonly ChunkRef[]): string {
  return rootOf(leaves.map((leaf) => rawLeaf(Buffer.from(leaf.hash, "hex"), leaf.size)), MAX_CHILDREN_PER_NODE).toString();
}

/** The object made of `cids` in order, uncommitted; undefined when the parts do not line up on chunks. */
export async function compose(ctx: DfsContext, cids: readonly string[]): Promise<PendingPut | undefined> {
  const manifests = await Promise.all(cids.map(async (cid) => ({ object: await ctx.rows.object(cid), chunks: await ctx.rows.manifest(cid) })));
  const leaves: ChunkRef[] = [];
  for (const [i, m] of manifests.entries()) {
    // A manifest that does not cover its object, or a part that ends inside a chunk, cannot be reused.
    if (!m.object || m.chunks.length !== m.object.chunks || m.chunks.reduce((n, c) => n + c.size, 0) !== m.object.size) return undefined;
    if (i < manifests.length - 1 && m.chunks.some((c) => c.size !== CHUNK_SIZE)) return undefined;
    leaves.push(...m.chunks);
  }
  if (leaves.length === 0) return undefined;
  const size = leaves.reduce((n, c) => n + c.size, 0);
  const lease = ctx.guard.lease();
  try {
    await lease.pin([...new Set(leaves.map((c) => chunkKey(c.hash)))]);
    // Pinned, then looked at again: a part still referenced keeps its chunks until now, the pins after.
    // One gone (its upload aborted meanwhile): the caller's ordinary path answers for it.
    for (const cid of cids) {
      if (!(await ctx.rows.object(cid))) {
        await lease.release();
        return undefined;
      }
    }
    const cid = cidOfLeaves(leaves);
    ctx.log.debug("dfs: composed", { cid, size, parts: cids.length, chunks: leaves.length });
    return pendingPut(cid, size, lease, () => new AbortedPutError(`compose of ${cid} was aborted`), {
      commit: () => ctx.rows.commit(cid, size, leaves),
      commitIn: (tx) => commitIn(tx, cid, size, leaves),
      discard: () => lease.release(), // nothing was written: the parts still hold their chunks
    });
  } catch (err) {
    await lease.release();
    throw err;
  }
}
