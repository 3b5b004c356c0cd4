/**
 * Delete: one reference fewer on the content. At zero the manifest goes and each of its chunks
 * loses a reference, in one transaction; the chunks left at zero are deleted right after through
 * the blob guard, each only if no upload has pinned it meanwhile (D15): no waiting for uploads,
 * no deferred sweep. A crash between the transaction and the deletes leaves objects without
 * rows, which the start-up sweep removes.
 */
import type { DfsContext } from "./context.ts";
import { NotFoundError } from "./errors.ts";
import { collect } from "./gc.ts";

export async function release(ctx: DfsContext, cid: string): Promise<void> {
  const unreferenced = await ctx.rows.release(cid);
  if (unreferenced === undefined) throw new NotFoundError(`no dfs content ${cid}`);
  const deleted = await collect(ctx, unreferenced);
  if (unreferenced.length > 0) ctx.log.debug("dfs: released", { cid, chunksDeleted: deleted });
}
