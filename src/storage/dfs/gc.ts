/**
 * Deletes chunk files nothing needs any more. Each decision and its unlink run in one synchronous
 * step (see pins.ts): not pinned by an upload, no `dfs_chunks` row, then `unlinkSync`.
 */
import { unlinkSync } from "node:fs";
import { errorCode } from "./chunks.ts";
import type { DfsContext } from "./context.ts";

/** Chunks decided per turn of the event loop, so freeing a huge file does not stall requests. */
const PER_TURN = 256;

/** Deletes the file of `hash` if unreferenced and unpinned; true if this call deleted it. */
export function deleteIfUnused(ctx: DfsContext, hash: string): boolean {
  if (ctx.pins.isPinned(hash) || ctx.rows.isReferenced(hash)) return false;
  try {
    unlinkSync(ctx.files.pathOf(hash));
    return true;
  } catch (e) {
    if (errorCode(e) === "ENOENT") return false;
    throw e;
  }
}

/** Deletes the files of those `hashes` that are unused; returns how many went. */
export async function collect(ctx: DfsContext, hashes: Iterable<string>): Promise<number> {
  let deleted = 0;
  let inTurn = 0;
  for (const hash of hashes) {
    try {
      if (deleteIfUnused(ctx, hash)) deleted++;
    } catch (e) {
      // The row is gone already; the next sweep finds the file and tries again.
      ctx.log.warn("dfs: could not delete chunk", { hash, error: String(e) });
    }
    if (++inTurn === PER_TURN) {
      inTurn = 0;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
  return deleted;
}
