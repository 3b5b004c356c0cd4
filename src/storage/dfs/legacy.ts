/**
 * Data dirs from before the blob store (D15) keep their chunks as files `DATA/dfs/ab/cd/<hex>`.
 * At start, before the sweep, each referenced one moves into the blob store under its key: a
 * rename into the local store's path (same file system: no copy, atomic), else a put and then an
 * unlink. Unreferenced ones and half-written temp files are deleted; emptied folders go too.
 *
 * Crash-safe at every step: a chunk is in the store (whole) before its old file goes, and a rerun
 * finds the files not yet moved. Nothing else runs meanwhile: no upload can know an old file.
 */
import { mkdir, open, readdir, rename, rmdir, unlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { LocalBlobStore } from "../../blob/index.ts";
import { chunkKey } from "./cid.ts";
import type { DfsContext } from "./context.ts";

const FANOUT_DIR = /^[0-9a-f]{2}$/;
const HASH_NAME = /^[0-9a-f]{64}$/;

export interface LegacyReport {
  moved: number;
  /** Old files no row referenced, and temp files. */
  dropped: number;
  /** Files left alone (not ours). */
  strangers: number;
}

/** Moves the chunk files of `dir` into the blob store; a missing `dir` is nothing to do. */
export async function moveLegacyChunks(ctx: DfsContext, dir: string): Promise<LegacyReport> {
  const report: LegacyReport = { moved: 0, dropped: 0, strangers: 0 };
  const tops = await subdirs(dir);
  if (tops === undefined) return report;
  for (const top of tops) {
    for (const sub of (await subdirs(top)) ?? []) {
      for (const name of await readdir(sub)) await moveOne(ctx, sub, name, report);
      await rmdir(sub).catch(() => {}); // not empty: strangers stay, and so does their folder
    }
    await rmdir(top).catch(() => {});
  }
  await rmdir(dir).catch(() => {});
  if (report.moved + report.dropped > 0) ctx.log.info("dfs: chunk files moved into the blob store", { ...report, store: ctx.store.kind });
  return report;
}

async function moveOne(ctx: DfsContext, folder: string, name: string, report: LegacyReport): Promise<void> {
  const path = join(folder, name);
  if (name.includes(".tmp-")) {
    await unlink(path);
    report.dropped++;
    return;
  }
  if (!HASH_NAME.test(name) || join(dirname(dirname(folder)), name.slice(0, 2), name.slice(2, 4)) !== folder) {
    report.strangers++;
    return;
  }
  if (!(await ctx.rows.isReferenced(name))) {
    await unlink(path);
    report.dropped++;
    return;
  }
  const key = chunkKey(name);
  if (ctx.store instanceof LocalBlobStore && (await renamed(path, ctx.store.pathOf(key)))) {
    report.moved++;
    return;
  }
  await ctx.store.put(key, await Bun.file(path).bytes());
  await unlink(path);
  report.moved++;
}

/** Renames into the local store (folder fsync'd: the move must survive a power cut); false when
 * the two are on different file systems. */
async function renamed(from: string, to: string): Promise<boolean> {
  const dir = dirname(to);
  const first = await mkdir(dir, { recursive: true, mode: 0o700 });
  try {
    await rename(from, to);
  } catch (e) {
    if ((e as { code?: unknown }).code === "EXDEV") return false;
    throw e;
  }
  // The rename's entry, and each new folder's entry in its parent.
  for (let d = dir; ; d = dirname(d)) {
    await fsyncDir(d);
    if (first === undefined || d === dirname(first) || d === dirname(d)) break;
  }
  return true;
}

async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function subdirs(dir: string): Promise<string[] | undefined> {
  try {
    const list = await readdir(dir, { withFileTypes: true });
    return list.filter((d) => d.isDirectory() && FANOUT_DIR.test(d.name)).map((d) => join(dir, d.name));
  } catch (e) {
    if ((e as { code?: unknown }).code === "ENOENT") return undefined;
    throw e;
  }
}
