/**
 * `dfs`: the local chunked, content-addressed store (D9). Files are cut into 1 MiB chunks stored
 * once by SHA-256 under the store's folder (deduplicated across files and users), reference-counted
 * in SQLite, and named by the same UnixFS Cid the `ipfs` back-end gives.
 *
 * Crash safety: a chunk is written to a temporary name, fsync'd and renamed (folder fsync'd) before
 * the manifest naming it commits; manifests and chunk references commit in one transaction; the
 * start-up sweep removes what a crash left. Uploads and deletions never wait for each other: see
 * pins.ts for why a deletion cannot take a chunk an upload relies on.
 *
 * @example
 *   const dfs = await openDfs({ dir: join(dataDir, "dfs"), db, log })
 *   const up = await dfs.put(request.body)
 *   await up.commit() // or up.abort()
 *   return new Response(dfs.read(up.cid, { start: 0, end: 99 }))
 */
import { mkdir, statfs } from "node:fs/promises";
import type { Db } from "../../db/open.ts";
import type { Logger } from "../../log.ts";
import type { Backend } from "../backend.ts";
import { ChunkFiles } from "./chunks.ts";
import type { DfsContext } from "./context.ts";
import { StoppedError } from "./errors.ts";
import { Pins } from "./pins.ts";
import { put } from "./put.ts";
import { read } from "./read.ts";
import { release } from "./release.ts";
import { Rows } from "./rows.ts";
import { sweep, type SweepReport } from "./sweep.ts";

export { cidOf, importerOptions, CHUNK_SIZE, MAX_CHILDREN_PER_NODE } from "./cid.ts";
export * from "./errors.ts";
export type { SweepReport } from "./sweep.ts";

export interface DfsOptions {
  /** The folder the store owns: `DATA_DIR/dfs`. Created if absent. */
  dir: string;
  db: Db;
  log: Logger;
}

export interface DfsBackend extends Backend {
  readonly kind: "dfs";
  /** Removes leftovers nothing references; safe beside uploads (see sweep.ts). */
  sweep(): Promise<SweepReport>;
}

/** Opens the store and runs the start-up sweep before handing it out. */
export async function openDfs({ dir, db, log }: DfsOptions): Promise<DfsBackend> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const pins = new Pins();
  const ctx: DfsContext = { rows: new Rows(db), files: new ChunkFiles(dir, pins), pins, log, active: new Set(), stopping: new AbortController() };
  await sweep(ctx, { atStart: true });
  return {
    kind: "dfs",
    put: (source, opts) => put(ctx, source, opts),
    stat: async (cid) => {
      const object = ctx.rows.object(cid);
      return object && { size: object.size };
    },
    read: (cid, range) => read(ctx, cid, range),
    release: (cid) => release(ctx, cid),
    health: () => health(ctx),
    sweep: () => sweep(ctx),
    stop: () => stop(ctx),
  };
}

async function health(ctx: DfsContext): Promise<Record<string, unknown>> {
  const { objects, chunks, bytes } = ctx.rows.counts();
  const fs = await statfs(ctx.files.root);
  return {
    ok: !ctx.stopping.signal.aborted,
    objects,
    chunks,
    /** Bytes of chunk files (each stored once, whatever the number of files naming it). */
    bytes,
    freeBytes: fs.bavail * fs.bsize,
    uploads: ctx.active.size,
    pinnedChunks: ctx.pins.size,
  };
}

/** Refuses new uploads, ends running ones (they reject with StoppedError, keeping nothing). */
async function stop(ctx: DfsContext): Promise<void> {
  if (!ctx.stopping.signal.aborted) ctx.stopping.abort(new StoppedError("dfs store stopped"));
  await Promise.allSettled([...ctx.active]);
}
