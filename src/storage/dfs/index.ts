/**
 * `dfs`: the chunked, content-addressed store (D9). Files are cut into 1 MiB chunks stored once
 * each in the blob store (local files or S3, D15) under `dfs/<chunk Cid>`, deduplicated across
 * files and users, reference-counted in the database, and named by the same UnixFS Cid the `ipfs`
 * back-end gives.
 *
 * Crash safety: a chunk is whole and durable in the blob store before the manifest naming it
 * commits; manifests and chunk references commit in one transaction; the start-up sweep removes
 * what a crash left. Uploads and deletions never wait for each other: each upload pins its chunks
 * before it looks whether they exist, and every deletion is decided by the blob guard against the
 * rows and the pins (D15), so a deletion cannot take a chunk an upload relies on.
 *
 * @example
 *   const dfs = await openDfs({ sql, log, guard, legacyDir: join(dataDir, "dfs") })
 *   const up = await dfs.put(request.body)
 *   await up.commit() // or up.abort()
 *   return new Response(dfs.read(up.cid, { start: 0, end: 99 }))
 */
import { statfs } from "node:fs/promises";
import { dirname } from "node:path";
import { LocalBlobStore } from "../../blob/index.ts";
import { LEASE_MS, type BlobGuard } from "../../blob/guard.ts";
import type { Sql } from "../../db/sql.ts";
import type { Logger } from "../../log.ts";
import type { Backend } from "../backend.ts";
import { ChunkChecks } from "./checks.ts";
import { compose } from "./compose.ts";
import { CHUNK_PREFIX } from "./cid.ts";
import type { DfsContext } from "./context.ts";
import { StoppedError } from "./errors.ts";
import { moveLegacyChunks } from "./legacy.ts";
import { put } from "./put.ts";
import { read } from "./read.ts";
import { release, releaseIn } from "./release.ts";
import { Rows } from "./rows.ts";
import { scrub, type ScrubReport } from "./scrub.ts";
import { sweep, type SweepReport } from "./sweep.ts";

export { cidOf, chunkKey, CHUNK_PREFIX, CHUNK_SIZE, MAX_CHILDREN_PER_NODE } from "./cid.ts";
export * from "./errors.ts";
export type { SweepReport } from "./sweep.ts";
export type { ScrubReport } from "./scrub.ts";

export interface DfsOptions {
  sql: Sql;
  log: Logger;
  /** The server's one guard over its blob store (src/storage/start.ts builds it). */
  guard: BlobGuard;
  /** The folder of chunk files from before the blob store (`DATA_DIR/dfs`): moved in at start. */
  legacyDir?: string;
  /** When the start-up sweep kept unreferenced chunks for their pins, it runs once more this
   * much later (default: once those pins, if their holder died, have lapsed). */
  resweepAfterMs?: number;
  /** false: no sweep at open; the server runs the sweeps on one gateway of the cluster at a time
   * (src/storage/sweeps.ts) and calls `sweep()` itself. Default true (one store on its own). */
  sweepAtOpen?: boolean;
  /** Local blob store: every chunk is hashed again at least this often by the scrub (D9), which
   * also runs once at open for chunks never checked. 0: no periodic pass (the one at open still
   * runs). Default 7 days. */
  scrubEveryMs?: number;
}

/** The default scrub period: a week, as Ceph's deep scrub. */
export const SCRUB_EVERY_MS = 7 * 86_400_000;

export interface DfsBackend extends Backend {
  readonly kind: "dfs";
  /** One pass removing leftovers nothing references; safe beside uploads (see sweep.ts).
   * `stopped` ends the listing early. */
  sweep(opts?: { stopped?: () => boolean }): Promise<SweepReport>;
  /**
   * Local blob store: one scrub pass (scrub.ts) over chunks never checked and, with `all`, every
   * other chunk too; resolves with what it found. On S3 (chunks hashed on every read) a no-op.
   */
  scrub(opts?: { all?: boolean }): Promise<ScrubReport>;
}

/**
 * Opens the store, moves old chunk files in and runs the start-up sweep before handing it out.
 * A restart right after a crash finds the dead uploads' pins still live (nothing tells a dead
 * holder from a slow one until its pins lapse), so their chunks survive that sweep; one more
 * sweep a lease later removes them.
 */
export async function openDfs({ sql, log, guard, legacyDir, resweepAfterMs = LEASE_MS + 1_000, sweepAtOpen = true, scrubEveryMs = SCRUB_EVERY_MS }: DfsOptions): Promise<DfsBackend> {
  const checks = guard.store instanceof LocalBlobStore ? new ChunkChecks(sql, guard.store, log) : undefined;
  const ctx: DfsContext = { rows: new Rows(sql), store: guard.store, guard, checks, log, active: new Set(), stopping: new AbortController() };
  if (legacyDir !== undefined) await moveLegacyChunks(ctx, legacyDir);
  const first = sweepAtOpen ? await sweep(ctx, { atStart: true }) : undefined;
  let resweep: Promise<unknown> | undefined;
  if (first && first.heldChunks > 0) {
    const again = setTimeout(() => {
      resweep = sweep(ctx).catch((e) => log.warn("dfs: sweep failed", { error: String(e) }));
    }, resweepAfterMs);
    again.unref();
    ctx.stopping.signal.addEventListener("abort", () => clearTimeout(again), { once: true });
  }
  const scrubs = checks && startScrubs(ctx, sql, checks, scrubEveryMs);
  return {
    kind: "dfs",
    capabilities: { delete: true },
    put: (source, opts) => put(ctx, source, opts),
    compose: (cids) => compose(ctx, cids),
    stat: async (cid) => {
      const object = await ctx.rows.object(cid);
      return object && { size: object.size };
    },
    read: (cid, range) => read(ctx, cid, range),
    release: (cid) => release(ctx, cid),
    releaseIn: (tx, cid) => releaseIn(ctx, tx, cid),
    health: () => health(ctx),
    sweep: (opts) => sweep(ctx, opts),
    scrub: async (opts) => (scrubs ? scrubs.run(opts?.all ? Date.now() + 1 : 0) : { checked: 0, damaged: 0 }),
    stop: async () => {
      await stop(ctx);
      await resweep;
      await scrubs?.stop();
      await checks?.flush().catch((e) => log.warn("dfs: writing verification records failed", { error: String(e) }));
    },
  };
}

async function health(ctx: DfsContext): Promise<Record<string, unknown>> {
  const { objects, chunks, bytes } = await ctx.rows.counts();
  return {
    ok: !ctx.stopping.signal.aborted,
    blobStore: ctx.store.kind,
    objects,
    chunks,
    /** Bytes of chunks (each stored once, whatever the number of files naming it). */
    bytes,
    /** Free space where the local store keeps its files (an S3 store has no such figure). */
    ...(ctx.store instanceof LocalBlobStore ? { freeBytes: await freeBytes(ctx.store.root) } : {}),
    uploads: ctx.active.size,
    pinnedChunks: await ctx.guard.pinnedUnder(CHUNK_PREFIX),
    /** D9 on the local store: chunks served on their verification record, chunks hashed (reads
     * and scrub) and found damaged since start. */
    ...(ctx.checks ? { checks: { ...ctx.checks.counts } } : {}),
  };
}

/**
 * The scrub passes of a local store (scrub.ts): one at open for chunks never checked, then one
 * every `everyMs / 4` for chunks last checked `everyMs` ago or more (so none waits much longer
 * than a period). Passes never overlap; `run` waits for the one under way, then runs its own.
 */
function startScrubs(ctx: DfsContext, sql: Sql, checks: ChunkChecks, everyMs: number) {
  let running: Promise<unknown> = Promise.resolve();
  const stopped = () => ctx.stopping.signal.aborted;
  const run = (olderThan: number): Promise<ScrubReport> => {
    const pass = running.then(() => scrub(sql, checks, ctx.log, { olderThan, stopped }));
    running = pass.catch((e) => ctx.log.warn("dfs: scrub failed", { error: String(e) }));
    return pass;
  };
  void run(0).catch(() => {});
  let timer: ReturnType<typeof setInterval> | undefined;
  if (everyMs > 0) {
    // Timers take at most 2^31 − 1 ms (≈ 24.8 days); a longer delay would fire at once, again and again.
    timer = setInterval(() => void run(Date.now() - everyMs).catch(() => {}), Math.min(2 ** 31 - 1, Math.max(60_000, Math.floor(everyMs / 4))));
    timer.unref();
  }
  return {
    run,
    async stop() {
      if (timer) clearInterval(timer);
      await running;
    },
  };
}

/** Refuses new uploads, ends running ones (they reject with StoppedError, keeping nothing). */
async function stop(ctx: DfsContext): Promise<void> {
  if (!ctx.stopping.signal.aborted) ctx.stopping.abort(new StoppedError("dfs store stopped"));
  await Promise.allSettled([...ctx.active]);
}

/** The root may not exist yet (the store makes folders on first put): ask its data dir then. */
async function freeBytes(root: string): Promise<number | undefined> {
  for (const path of [root, dirname(root)]) {
    const fs = await statfs(path).catch(() => undefined);
    if (fs) return fs.bavail * fs.bsize;
  }
  return undefined;
}
