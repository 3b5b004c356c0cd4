/**
 * Deletes chunks nothing needs any more, through the blob guard (D15): the guard decides in one
 * IMMEDIATE transaction that no `dfs_chunks` row references the chunk (asked with that
 * transaction) and that no upload's pin holds it, writes a tombstone, then deletes.
 */
import { chunkKey } from "./cid.ts";
import type { DfsContext } from "./context.ts";
import { chunkReferenced } from "./rows.ts";

/** Deletions in flight at once: each is a round trip to S3 (a few ms), so one at a time would
 * make releasing a 10 GiB file take a minute. */
const CONCURRENCY = 8;

/** Deletes the chunk of `hash` if unreferenced and unpinned; true if this call deleted it. */
export function deleteIfUnused(ctx: DfsContext, hash: string): Promise<boolean> {
  return ctx.guard.deleteIfUnused(chunkKey(hash), (tx) => chunkReferenced(tx, hash));
}

/** Deletes those of `hashes` that are unused; returns how many went. Failures are logged: the
 * rows are gone already, and the next sweep finds the object and tries again. */
export async function collect(ctx: DfsContext, hashes: Iterable<string>): Promise<number> {
  const iterator = hashes[Symbol.iterator]();
  let deleted = 0;
  const worker = async () => {
    for (let next = iterator.next(); !next.done; next = iterator.next()) {
      const hash = next.value;
      try {
        if (await deleteIfUnused(ctx, hash)) deleted++;
      } catch (e) {
        ctx.log.warn("dfs: could not delete chunk", { hash, error: String(e) });
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return deleted;
}
