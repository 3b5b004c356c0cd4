/**
 * Content rows' references against their holders: the file rows naming the content and the S3
 * multipart parts holding it (each holds one reference). The two change in transactions of their
 * own: a deleted or replaced file's row goes, then its content is released; an S3 part's content
 * is stored, then its row is written. So a running gateway shows a count above its holders for a
 * moment, and a snapshot of the database (a backup's) may keep one: a release that was in flight,
 * which no process will finish in the copy. `settle` finishes them there, as the release would
 * have: the count is set to the holders, and content no one holds goes with its rows (its blobs
 * are then named by no row: not copied, or the sweep's). Only where no process runs on the rows.
 */
import type { Sql } from "../db/sql.ts";
import type { BackendKind } from "../storage/backend.ts";
import { contentHolders, holdersOf } from "../storage/audit.ts";
import { setObjectRefs } from "../storage/dfs/audit.ts";
import { Rows } from "../storage/dfs/rows.ts";
import { setPinRefs } from "../storage/ipfs/audit.ts";
import { dropRef } from "../storage/ipfs/pins.ts";
import { partHolders, partHoldersOf } from "../s3api/audit.ts";

export interface ContentDrift {
  backend: BackendKind;
  cid: string;
  refs: number;
  holders: number;
}

/** Content rows whose count is not their holders', one pass over every content row. */
export async function contentDrift(sql: Sql): Promise<ContentDrift[]> {
  const parts = await partHolders(sql);
  const out: ContentDrift[] = [];
  for (const backend of ["dfs", "ipfs"] as const) {
    for await (const c of contentHolders(sql, backend)) {
      const holders = c.files + (parts.get(`${backend}:${c.cid}`) ?? 0);
      if (c.refs !== holders) out.push({ backend, cid: c.cid, refs: c.refs, holders });
    }
  }
  return out;
}

/** One content row's count and holders now (undefined once it is gone). */
export async function driftOf(sql: Sql, backend: BackendKind, cid: string): Promise<ContentDrift | undefined> {
  const now = await holdersOf(sql, backend, cid);
  if (!now) return undefined;
  return { backend, cid, refs: now.refs, holders: now.files + (await partHoldersOf(sql, backend, cid)) };
}

/** Sets a content row's count to its holders; with none, its rows go as a last release's do. */
export async function setToHolders(sql: Sql, d: Pick<ContentDrift, "backend" | "cid" | "holders">): Promise<void> {
  if (d.backend === "dfs") {
    await setObjectRefs(sql, d.cid, d.holders);
    if (d.holders === 0) await new Rows(sql).dropDeadRows();
    return;
  }
  await setPinRefs(sql, d.cid, Math.max(d.holders, 1));
  if (d.holders === 0) await dropRef(sql, d.cid);
}

/** Finishes the releases in flight in a copy no process uses: counts above their holders only
 * (below is no release in flight but a fault, which the check reports). Returns how many. */
export async function settleReleases(sql: Sql): Promise<number> {
  let n = 0;
  for (const d of await contentDrift(sql)) {
    if (d.refs <= d.holders) continue;
    await setToHolders(sql, d);
    n++;
  }
  return n;
}
