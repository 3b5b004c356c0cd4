/**
 * The sweep: removes what a crash (or a bug) left behind.
 * - rows at zero references (never written by the store itself; removed defensively);
 * - temporary files no live upload is writing (a crash mid-write);
 * - chunk files no row references and no upload has pinned (a crash between the chunk writes and
 *   the commit, or between a release's transaction and its unlinks).
 * It runs at start (the factory runs it before returning) and may run at any time later: every
 * deletion is decided and done in one synchronous step against the pins (pins.ts), so a sweep
 * beside uploads takes nothing they need.
 */
import { readdir, unlink } from "node:fs/promises";
import { join } from "node:path";
import { errorCode, isChunkName, isTempName } from "./chunks.ts";
import type { DfsContext } from "./context.ts";
import { collect, deleteIfUnused } from "./gc.ts";

export interface SweepReport {
  /** Zero-reference rows removed. */
  deadObjects: number;
  deadChunks: number;
  /** Leftover temporary files removed. */
  tempFiles: number;
  /** Chunk files without a referencing row removed. */
  orphanChunks: number;
  /** Chunk files kept (referenced or pinned). */
  keptChunks: number;
  /** Files under the store's folder that are neither chunks nor temporary files (left alone). */
  strangers: number;
  /** Chunk rows whose file was not found: damage. Counted by the start-up sweep only (later,
   * commits running beside the sweep would make the count wrong). */
  missingChunks: number | undefined;
  ms: number;
}

const FANOUT_DIR = /^[0-9a-f]{2}$/;

/** `atStart`: nothing else runs (the factory has not returned the store yet). */
export async function sweep(ctx: DfsContext, { atStart = false } = {}): Promise<SweepReport> {
  const began = performance.now();
  let referenced = 0;
  const dead = ctx.rows.dropDeadRows();
  await collect(ctx, dead.chunks);
  const report: SweepReport = {
    deadObjects: dead.objects,
    deadChunks: dead.chunks.length,
    tempFiles: 0,
    orphanChunks: 0,
    keptChunks: 0,
    strangers: 0,
    missingChunks: undefined,
    ms: 0,
  };
  for (const top of await subdirs(ctx.files.root)) {
    for (const dir of await subdirs(top)) referenced += await sweepDir(ctx, dir, report);
  }
  if (atStart) report.missingChunks = ctx.rows.counts().chunks - referenced;
  report.ms = Math.round(performance.now() - began);
  logReport(ctx, report);
  return report;
}

/** Sweeps one fan-out folder; returns how many of its chunk files have a row. */
async function sweepDir(ctx: DfsContext, dir: string, report: SweepReport): Promise<number> {
  let referenced = 0;
  for (const name of await entries(dir)) {
    const path = join(dir, name);
    if (isTempName(name)) {
      if (!ctx.pins.isLiveTemp(path) && (await removed(path))) report.tempFiles++;
    } else if (isChunkName(name) && ctx.files.pathOf(name) === path) {
      if (deleteIfUnused(ctx, name)) report.orphanChunks++;
      else {
        report.keptChunks++;
        if (ctx.rows.isReferenced(name)) referenced++;
      }
    } else {
      report.strangers++;
    }
  }
  return referenced;
}

function logReport(ctx: DfsContext, r: SweepReport): void {
  if (r.missingChunks) ctx.log.error("dfs: chunk files missing for referenced chunks", { missing: r.missingChunks });
  const removedAny = r.deadObjects + r.deadChunks + r.tempFiles + r.orphanChunks > 0;
  (removedAny ? ctx.log.info : ctx.log.debug)("dfs: sweep", { ...r });
}

/** Subfolders named like the fan-out (two hex digits); anything else is not ours. */
async function subdirs(dir: string): Promise<string[]> {
  const list = await readdir(dir, { withFileTypes: true }).catch(missingAsEmpty);
  return list.filter((d) => d.isDirectory() && FANOUT_DIR.test(d.name)).map((d) => join(dir, d.name));
}

async function entries(dir: string): Promise<string[]> {
  return readdir(dir).catch(missingAsEmpty);
}

function missingAsEmpty(e: unknown): never[] {
  if (errorCode(e) === "ENOENT") return [];
  throw e;
}

async function removed(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (e) {
    if (errorCode(e) === "ENOENT") return false;
    throw e;
  }
}
