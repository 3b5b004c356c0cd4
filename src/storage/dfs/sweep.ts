/**
 * The sweep: removes what a crash (or a bug) left behind.
 * - rows at zero references (never written by the store itself; removed defensively);
 * - chunk objects under `dfs/` that no row references and no upload has pinned (a crash between
 *   the chunk writes and the commit, or between a release's transaction and its deletes);
 * - deletions whose deleter died (stale tombstones) and expired pins (the shared sweepKeys does
 *   the listing and this housekeeping, for ipfs too).
 * It runs at start (the factory runs it before returning) and may run at any time later, one pass
 * per call (the server makes it a cluster singleton, D16): every
 * deletion goes through the blob guard (D15), which decides against the rows and the pins in one
 * transaction, so a sweep beside uploads takes nothing they need. Half-written objects are the
 * blob store's own business (a local temp file, an S3 multipart upload), never a key it lists.
 */
import { sweepKeys } from "../../blob/sweep.ts";
import { CHUNK_PREFIX, hashOfKey } from "./cid.ts";
import type { DfsContext } from "./context.ts";
import { collect } from "./gc.ts";

export interface SweepReport {
  /** Zero-reference rows removed. */
  deadObjects: number;
  deadChunks: number;
  /** Chunk objects without a referencing row removed. */
  orphanChunks: number;
  /** Chunk objects kept (referenced or pinned). */
  keptChunks: number;
  /** Of those, the ones no row references (an upload's pins hold them, maybe a dead one's). */
  heldChunks: number;
  /** Keys under `dfs/` that are not chunk keys (left alone). */
  strangers: number;
  /** Chunk rows whose object was not found: damage. Counted by the start-up sweep only (later,
   * commits running beside the sweep would make the count wrong). */
  missingChunks: number | undefined;
  /** Deletions another deleter left unfinished, finished now; expired pins dropped. */
  staleTombstones: number;
  expiredPins: number;
  ms: number;
}

/**
 * `atStart`: nothing else of this store runs (the factory has not returned it yet). `stopped`:
 * ends the listing early (its caller lost its cluster lease, say); the store's stop() does too.
 */
export async function sweep(ctx: DfsContext, { atStart = false, stopped }: { atStart?: boolean; stopped?: () => boolean } = {}): Promise<SweepReport> {
  const began = performance.now();
  const dead = await ctx.rows.dropDeadRows();
  await collect(ctx, dead.chunks);
  const keys = await sweepKeys(ctx.guard, CHUNK_PREFIX, {
    parse: hashOfKey,
    referencedAmong: (hashes) => ctx.rows.referencedAmong(hashes),
    deleteUnused: (hashes) => collect(ctx, hashes),
    stopped: () => ctx.stopping.signal.aborted || stopped?.() === true,
  });
  const report: SweepReport = {
    deadObjects: dead.objects,
    deadChunks: dead.chunks.length,
    orphanChunks: keys.removed,
    keptChunks: keys.referenced + keys.held,
    heldChunks: keys.held,
    strangers: keys.strangers,
    missingChunks: atStart ? (await ctx.rows.counts()).chunks - keys.referenced : undefined,
    staleTombstones: keys.staleTombstones,
    expiredPins: keys.expiredPins,
    ms: Math.round(performance.now() - began),
  };
  logReport(ctx, report);
  return report;
}

function logReport(ctx: DfsContext, r: SweepReport): void {
  if (r.missingChunks) ctx.log.error("dfs: chunk objects missing for referenced chunks", { missing: r.missingChunks });
  const removedAny = r.deadObjects + r.deadChunks + r.orphanChunks + r.staleTombstones > 0;
  (removedAny ? ctx.log.info : ctx.log.debug)("dfs: sweep", { ...r });
}
