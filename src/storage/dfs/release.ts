/**
 * Delete: one reference fewer on the content. At zero the manifest goes and each of its chunks
 * loses a reference, in one transaction (its own, or with `releaseIn` the caller's: the file row
 * that replaced an entry); the chunks left at zero are deleted right after that commit through
 * the blob guard, each only if no upload has pinned it meanwhile (D15): no waiting for uploads,
 * no deferred sweep. Content still referenced elsewhere costs nothing after the commit. A crash
 * between the transaction and the deletes leaves objects without rows, which the start-up sweep
 * removes.
 */
import type { Queryable } from "../../db/sql.ts";
import type { AfterRelease } from "../backend.ts";
import type { DfsContext } from "./context.ts";
import { NotFoundError } from "./errors.ts";
import { collect } from "./gc.ts";
import { releaseIn as dropIn } from "./rows.ts";

export async function release(ctx: DfsContext, cid: string): Promise<void> {
  const unreferenced = await ctx.rows.release(cid);
  if (unreferenced === undefined) throw new NotFoundError(`no dfs content ${cid}`);
  await deleteFreed(ctx, cid, unreferenced);
}

/** `release` in the caller's transaction; the chunk deletes are for after its commit. An unknown
 * Cid is logged, not thrown: the file row that replaced its entry is what matters then. */
export async function releaseIn(ctx: DfsContext, tx: Queryable, cid: string): Promise<AfterRelease> {
  const unreferenced = await dropIn(tx, cid);
  if (unreferenced === undefined) {
    ctx.log.warn("dfs: released content that has no row", { cid });
    return undefined;
  }
  // Run after the upload answered (storage/pending.ts): its deletions ride in later pins.
  return unreferenced.length > 0 ? () => deleteFreed(ctx, cid, unreferenced, { ride: true }) : undefined;
}

async function deleteFreed(ctx: DfsContext, cid: string, unreferenced: readonly string[], opts?: { ride?: boolean }): Promise<void> {
  const deleted = await collect(ctx, unreferenced, opts);
  if (unreferenced.length > 0) ctx.log.debug("dfs: released", { cid, chunksDeleted: deleted });
}
