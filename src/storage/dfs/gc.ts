/**
 * Deletes chunks nothing needs any more, through the blob guard (D15): the guard decides in one
 * transaction that no `dfs_chunks` row references the chunk (asked with that
 * transaction) and that no upload's pin holds it, writes a tombstone, then deletes.
 */
import { deleteEach } from "../../blob/guard.ts";
import { chunkKey } from "./cid.ts";
import type { DfsContext } from "./context.ts";
import { chunkReferenced } from "./rows.ts";

/** Deletes the chunk of `hash` if unreferenced and unpinned; true if this call deleted it. */
function deleteIfUnused(ctx: DfsContext, hash: string, opts?: { ride?: boolean }): Promise<boolean> {
  return ctx.guard.deleteIfUnused(chunkKey(hash), (tx) => chunkReferenced(tx, hash), opts);
}

/** Deletes those of `hashes` that are unused; returns how many went. Failures are logged: the
 * rows are gone already, and the next sweep finds the object and tries again. `ride`: nobody
 * waits for it (BlobGuard.deleteIfUnused). */
export function collect(ctx: DfsContext, hashes: Iterable<string>, opts?: { ride?: boolean }): Promise<number> {
  return deleteEach(
    hashes,
    (hash) => deleteIfUnused(ctx, hash, opts),
    (hash, e) => ctx.log.warn("dfs: could not delete chunk", { hash, error: String(e) }),
  );
}
