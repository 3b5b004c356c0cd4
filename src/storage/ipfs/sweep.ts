/**
 * The orphan sweep: blocks under `ipfs/` that no pinned root contains (a crash between an
 * upload's writes and its commit or abort, a release whose DELETEs failed) are deleted through the
 * guard. Safe beside running uploads and releases: each deletion is decided in the guard's
 * transaction, which sees the rows and the live pins of uploads (D15), never an object's age.
 * The listing and the guard's housekeeping are the shared sweepKeys (src/blob/sweep.ts).
 * Runs once at start, as the server's other sweeps do; one call is one pass (safe on several
 * gateways at once, but wasteful: the server makes it a cluster singleton, D16).
 */
import { deleteEach, type BlobGuard } from "../../blob/guard.ts";
import { sweepKeys } from "../../blob/sweep.ts";
import type { Sql } from "../../db/sql.ts";
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

export async function sweepOrphans(deps: { sql: Sql; guard: BlobGuard; log: Logger; stopped?: () => boolean }): Promise<SweepResult> {
  const { sql, guard } = deps;
  const { seen, removed, held } = await sweepKeys(guard, BLOCK_PREFIX, {
    parse: (key) => key,
    referencedAmong: (keys) => referencedAmong(sql, keys),
    deleteUnused: (keys) => deleteUnreferenced(guard, keys, deps.log),
    stopped: deps.stopped,
  });
  return { seen, removed, held };
}

/** Deletes keys an upload or a release left without a row, a few at a time. `ride`: nobody
 * waits for it (BlobGuard.deleteIfUnused). */
export function deleteUnreferenced(guard: BlobGuard, keys: Iterable<string>, log: Logger, opts?: { ride?: boolean }): Promise<number> {
  return deleteEach(
    keys,
    (key) => guard.deleteIfUnused(key, (tx) => blockReferenced(tx, key), opts),
    // The row is gone already: the next start's sweep deletes the object.
    (key, err) => log.warn("ipfs: deleting an unreferenced block failed; the start-up sweep will", { key, err: String(err) }),
  );
}
