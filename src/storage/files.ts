/**
 * The file catalog (D9): buckets named by canonical DID, files unique by (bucket, back-end,
 * name) — an upload with an existing name replaces that entry — and the entries of spec 2.5.
 */
import { and, asc, eq, gt, sql } from "drizzle-orm";
import type { Db } from "../db/open.ts";
import { storageError } from "../http/errors.ts";
import type { FileEntry } from "../http/model.ts";
import type { BackendKind } from "./backend.ts";
import { buckets, files } from "./schema.ts";

export type FileRow = typeof files.$inferSelect;
type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** A file entry as spec 2.5 names its fields. */
export function fileEntry(row: FileRow, isPublic = false): FileEntry {
  return {
    ID: row.id,
    Name: row.name,
    Size: row.size,
    Cid: row.cid,
    ModTime: new Date(row.modTime).toISOString(),
    Public: isPublic,
    UserDefined: { encryption: row.encryption, etag: row.cid },
  };
}

/** A file name as a client may give it: the last path part, no control characters, ≤ 255 bytes. */
export function cleanName(raw: string | undefined): string {
  const base = (raw ?? "").split(/[\\/]/).pop() ?? "";
  const name = base.replace(/[\u0000-\u001f\u007f]/g, "").trim();
  if (!name || name === "." || name === "..") throw storageError.badRequest("the file part needs a file name");
  if (Buffer.byteLength(name) > 255) throw storageError.badRequest("file names are at most 255 bytes");
  return name;
}

/**
 * Bytes `did` stores on both back-ends (one space pool, D7), leaving out the file named `except`
 * (the entry an upload would replace). The quota meter counts with it, inside its transactions.
 */
export function storedBytes(db: Db, did: string, except?: { backend: string; name: string }): number {
  return (
    db
      .select({ n: sql<number>`coalesce(sum(${files.size}), 0)` })
      .from(files)
      .where(and(eq(files.did, did), except ? sql`not (${files.backend} = ${except.backend} and ${files.name} = ${except.name})` : undefined))
      .get()?.n ?? 0
  );
}

export function createFiles(db: Db, now: () => number = Date.now) {
  return {
    /**
     * Records a stored file; returns the new row and the Cid of an entry it replaced. `settle` runs
     * in the same transaction once the row is in (the quota's exact check); throwing undoes it all.
     */
    add(f: { did: string; backend: BackendKind; name: string; cid: string; size: number; encryption: string }, settle?: (tx: Tx) => void): { row: FileRow; replaced?: string } {
      return db.transaction(
        (tx) => {
          tx.insert(buckets).values({ did: f.did, createdAt: now() }).onConflictDoNothing().run();
          const old = tx.delete(files).where(and(eq(files.did, f.did), eq(files.backend, f.backend), eq(files.name, f.name))).returning().get();
          const row = tx.insert(files).values({ ...f, modTime: now() }).returning().get();
          settle?.(tx);
          return { row, replaced: old?.cid };
        },
        { behavior: "immediate" },
      );
    },

    list(did: string, backend: BackendKind, page: { limit?: number; after?: number } = {}): FileRow[] {
      const where = and(eq(files.did, did), eq(files.backend, backend), page.after !== undefined ? gt(files.id, page.after) : undefined);
      const q = db.select().from(files).where(where).orderBy(asc(files.id));
      return page.limit !== undefined ? q.limit(page.limit).all() : q.all();
    },

    /** Deletes a file of `did` on `backend`: 404 unknown id, 403 someone else's. */
    remove(did: string, backend: BackendKind, id: number): FileRow {
      return db.transaction(
        (tx) => {
          const row = tx.select().from(files).where(and(eq(files.id, id), eq(files.backend, backend))).get();
          if (!row) throw storageError.notFound("File not found");
          if (row.did !== did) throw storageError.forbidden("Permission denied: the file belongs to another account");
          tx.delete(files).where(eq(files.id, id)).run();
          return row;
        },
        { behavior: "immediate" },
      );
    },

    /** Whether `did` stores a file with this Cid on this back-end. */
    owns(did: string, backend: BackendKind, cid: string): FileRow | undefined {
      return db.select().from(files).where(and(eq(files.backend, backend), eq(files.cid, cid), eq(files.did, did))).get();
    },
  };
}

export type Files = ReturnType<typeof createFiles>;
