/**
 * The one orphan sweep over a prefix of the blob store (D15), for both back-ends: it lists the
 * keys, asks the back-end's rows which are referenced a page at a time, and sends the rest to the
 * guard, which decides each in its own transaction (rows and live pins), so it is safe beside
 * uploads. Every pass first does the guard's housekeeping (deletions a dead deleter left, expired
 * pins): the guard is shared, and a pass that skipped it would keep counting a dead deleter's
 * tombstoned key as held.
 *
 * One call is one pass. Passes on several gateways at once are safe (every deletion is decided
 * by the guard) but wasteful: the server runs them as a cluster singleton (D16 leases).
 *
 * @example
 *   await sweepKeys(guard, "ipfs/", { parse: (k) => k, referencedAmong, deleteUnused })
 */
import type { BlobGuard } from "./guard.ts";

export interface KeySweep {
  /** Keys listed under the prefix. */
  seen: number;
  /** Keys under the prefix that `parse` did not accept (left alone). */
  strangers: number;
  /** Keys the back-end's rows reference. */
  referenced: number;
  /** Unreferenced and deleted. */
  removed: number;
  /** Unreferenced but kept: a live pin (perhaps a dead gateway's, until it lapses) or a deletion
   * in progress holds them. */
  held: number;
  /** Deletions another deleter left unfinished, finished now; expired pins dropped. */
  staleTombstones: number;
  expiredPins: number;
}

export interface SweepOps<T> {
  /** The back-end's name for a key (a chunk hash, the key itself), or undefined for a stranger. */
  parse(key: string): T | undefined;
  /** Those of `items` some row references. */
  referencedAmong(items: readonly T[]): Promise<Set<T>>;
  /** Deletes those of `items` that are unused (through the guard); returns how many went. */
  deleteUnused(items: readonly T[]): Promise<number>;
  /** Stops listing (the back-end is stopping); the page in hand is left undecided. */
  stopped?: () => boolean;
}

/** Keys decided per page: one query for their rows, then the guard for the unreferenced. */
const PAGE = 500;

export async function sweepKeys<T>(guard: BlobGuard, prefix: string, ops: SweepOps<T>): Promise<KeySweep> {
  const staleTombstones = await guard.finishStaleTombstones();
  const expiredPins = await guard.dropExpiredPins();
  const result: KeySweep = { seen: 0, strangers: 0, referenced: 0, removed: 0, held: 0, staleTombstones, expiredPins };
  let page: T[] = [];
  const decide = async () => {
    const kept = await ops.referencedAmong(page);
    result.referenced += kept.size;
    const candidates = page.filter((item) => !kept.has(item));
    const removed = await ops.deleteUnused(candidates);
    result.removed += removed;
    result.held += candidates.length - removed;
    page = [];
  };
  for await (const key of guard.store.list(prefix)) {
    if (ops.stopped?.()) break;
    result.seen++;
    const item = ops.parse(key);
    if (item === undefined) {
      result.strangers++;
      continue;
    }
    page.push(item);
    if (page.length >= PAGE) await decide();
  }
  if (page.length > 0 && !ops.stopped?.()) await decide();
  return result;
}
