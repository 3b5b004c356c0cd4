/**
 * The orphan sweep: blocks under `ipfs/` that no pinned root contains (a crash between an
 * upload's writes and its commit or abort, a release whose DELETEs failed) are deleted through the
 * guard. Safe beside running uploads and releases: each deletion is decided in the guard's
 * transaction, which sees the rows and the live pins of uploads (D15), never an object's age.
 * Runs once at start, as the server's other sweeps do (one gateway; issue 13 makes it a cluster
 * singleton).
 */
import { deleteEach, type BlobGuard } from "../../blob/guard.ts";
import type { Db } from "../../db/open.ts";
import type { Logger } from "../../log.ts";
import { BLOCK_PREFIX } from "./blocks.ts";
import { blockReferenced, referencedAmong } from "./pins.ts";

export interface SweepResult {
  /** Block objects listed. */
  seen: number;
  /** Deleted as unreferenced. */
  removed: number;
  /** Unreferenced but kept: an upload's live pin (perhaps a dead gateway's, until it lapses) or
   * a deletion in progress holds them. */
  held: number;
}

const PAGE = 500;

export async function sweepOrphans(deps: { db: Db; guard: BlobGuard; log: Logger; stopped?: () => boolean }): Promise<SweepResult> {
  const { db, guard } = deps;
  const result: SweepResult = { seen: 0, removed: 0, held: 0 };
  let page: string[] = [];
  const decide = async () => {
    const kept = referencedAmong(db, page);
    const candidates = page.filter((k) => !kept.has(k));
    const removed = await deleteUnreferenced(guard, candidates, deps.log);
    result.removed += removed;
    result.held += candidates.length - removed;
    page = [];
  };
  for await (const key of guard.store.list(BLOCK_PREFIX)) {
    if (deps.stopped?.()) break;
    result.seen++;
    page.push(key);
    if (page.length >= PAGE) await decide();
  }
  if (!deps.stopped?.()) await decide();
  return result;
}

/** Deletes keys an upload or a release left without a row, a few at a time. */
export function deleteUnreferenced(guard: BlobGuard, keys: Iterable<string>, log: Logger): Promise<number> {
  return deleteEach(
    keys,
    (key) => guard.deleteIfUnused(key, (tx) => blockReferenced(tx, key)),
    // The row is gone already: the next start's sweep deletes the object.
    (key, err) => log.warn("ipfs: deleting an unreferenced block failed; the start-up sweep will", { key, err: String(err) }),
  );
}
