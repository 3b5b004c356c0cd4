/**
 * The scrub (D9): re-hashes chunk files in the background so reads can trust verification
 * records (checks.ts). One pass hashes every chunk a row keeps that has no record (new since an
 * upgrade, a record lost in a crash) or whose last check is older than `olderThan`, one chunk at a
 * time (one core at most, never a burst of reads), and records the verdict: a damaged chunk is
 * logged and refused by every read until its file changes (an upload of the same bytes repairs
 * it). Records no chunk row names any more are dropped. At start a pass runs for unrecorded
 * chunks only; then every period a pass re-hashes those last checked a period ago or more.
 */
import type { Sql } from "../../db/sql.ts";
import type { Logger } from "../../log.ts";
import type { ChunkChecks } from "./checks.ts";
import { CorruptChunkError } from "./errors.ts";

export interface ScrubReport {
  /** Chunks hashed, and those of them found damaged (or missing). */
  checked: number;
  damaged: number;
}

/** Chunks with no record, or one older than $1; paged by hash after $2. */
const DUE = `SELECT c.hash, c.size FROM dfs_chunks c LEFT JOIN dfs_chunk_checks k ON k.hash = c.hash
  WHERE (k.hash IS NULL OR k.checked_at < $1) AND c.hash > $2 ORDER BY c.hash LIMIT 256`;
/** Records of chunks gone (older than a day: a record may be written before its chunk's row commits). */
const STALE = "DELETE FROM dfs_chunk_checks WHERE checked_at < $1 AND NOT EXISTS (SELECT 1 FROM dfs_chunks c WHERE c.hash = dfs_chunk_checks.hash)";
const DAY_MS = 86_400_000;

export async function scrub(sql: Sql, checks: ChunkChecks, log: Logger, opts: { olderThan: number; stopped?: () => boolean; now?: number }): Promise<ScrubReport> {
  const report: ScrubReport = { checked: 0, damaged: 0 };
  // Chunks checked during this pass get checked_at ≥ its start: a long pass never takes them again.
  await checks.flush();
  for (let after = ""; !opts.stopped?.(); ) {
    const due = await sql.all<{ hash: string; size: number }>(DUE, [opts.olderThan, after]);
    if (due.length === 0) break;
    for (const chunk of due) {
      if (opts.stopped?.()) break;
      after = chunk.hash;
      report.checked++;
      try {
        await checks.check(chunk.hash, chunk.size);
      } catch (e) {
        if (!(e instanceof CorruptChunkError)) throw e;
        report.damaged++;
        // A release may have taken the chunk since the query: only a kept one is damage.
        if ((await sql.get("SELECT 1 AS one FROM dfs_chunks WHERE hash = $1", [chunk.hash])) !== undefined) {
          log.error("dfs: damaged chunk", { hash: chunk.hash, reason: e.message, by: "scrub" });
        } else report.damaged--;
      }
    }
    await checks.flush();
  }
  await sql.run(STALE, [(opts.now ?? Date.now()) - DAY_MS]);
  return report;
}
