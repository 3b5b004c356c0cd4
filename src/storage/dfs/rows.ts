/**
 * The store's SQLite rows. Every method is synchronous (bun:sqlite) and each write is one
 * transaction; `chunkReferenced` also runs inside the blob guard's deciding transaction (D15).
 */
import { and, count, eq, gt, inArray, like, lte, sql, sum } from "drizzle-orm";
import { blobPins } from "../../blob/schema.ts";
import type { Db } from "../../db/open.ts";
import { dfsChunks, dfsObjectChunks, dfsObjects } from "./schema.ts";

type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** One position of a manifest. */
export interface ChunkRef {
  hash: string;
  size: number;
}

/** Rows per multi-row statement: far below SQLite's 32766 bound parameters. */
const BATCH = 500;

function* batches<T>(items: readonly T[]): Generator<T[]> {
  for (let i = 0; i < items.length; i += BATCH) yield items.slice(i, i + BATCH);
}

/** Whether a row keeps this chunk (rows at zero refs never outlive their transaction). */
export function chunkReferenced(db: Db | Tx, hash: string): boolean {
  return db.select({ one: sql`1` }).from(dfsChunks).where(eq(dfsChunks.hash, hash)).get() !== undefined;
}

export class Rows {
  constructor(private readonly db: Db) {}

  object(cid: string): { size: number; chunks: number; refs: number } | undefined {
    return this.db
      .select({ size: dfsObjects.size, chunks: dfsObjects.chunks, refs: dfsObjects.refs })
      .from(dfsObjects)
      .where(eq(dfsObjects.cid, cid))
      .get();
  }

  chunkAt(cid: string, idx: number): ChunkRef | undefined {
    return this.db
      .select({ hash: dfsObjectChunks.hash, size: dfsObjectChunks.size })
      .from(dfsObjectChunks)
      .where(and(eq(dfsObjectChunks.cid, cid), eq(dfsObjectChunks.idx, idx)))
      .get();
  }

  isReferenced(hash: string): boolean {
    return chunkReferenced(this.db, hash);
  }

  /** Those of `hashes` a row keeps (for sweeps, which look at many keys at once). */
  referencedAmong(hashes: readonly string[]): Set<string> {
    const out = new Set<string>();
    for (const batch of batches(hashes)) {
      for (const r of this.db.select({ hash: dfsChunks.hash }).from(dfsChunks).where(inArray(dfsChunks.hash, batch)).all()) out.add(r.hash);
    }
    return out;
  }

  /**
   * One more reference to `cid`: the first commit writes the manifest and gives each distinct
   * chunk one more reference; later commits of the same Cid only count (same Cid, same chunks).
   */
  commit(cid: string, size: number, manifest: readonly ChunkRef[]): void {
    this.db.transaction(
      (tx) => {
        const updated = tx
          .update(dfsObjects)
          .set({ refs: sql`${dfsObjects.refs} + 1` })
          .where(eq(dfsObjects.cid, cid))
          .returning({ refs: dfsObjects.refs })
          .all();
        if (updated.length > 0) return;
        tx.insert(dfsObjects).values({ cid, size, chunks: manifest.length, refs: 1, createdAt: Date.now() }).run();
        addChunkRefs(tx, distinct(manifest));
        for (const rows of batches(manifest.map((c, idx) => ({ cid, idx, hash: c.hash, size: c.size })))) {
          tx.insert(dfsObjectChunks).values(rows).run();
        }
      },
      { behavior: "immediate" },
    );
  }

  /**
   * One reference fewer. Returns undefined for an unknown Cid, else the chunks whose last
   * reference went (their rows are gone; their files are for the caller to delete).
   */
  release(cid: string): string[] | undefined {
    return this.db.transaction(
      (tx) => {
        const row = tx.select({ refs: dfsObjects.refs }).from(dfsObjects).where(eq(dfsObjects.cid, cid)).get();
        if (!row) return undefined;
        if (row.refs > 1) {
          tx.update(dfsObjects).set({ refs: row.refs - 1 }).where(eq(dfsObjects.cid, cid)).run();
          return [];
        }
        return dropObject(tx, cid);
      },
      { behavior: "immediate" },
    );
  }

  /** Removes rows at zero references (none exist unless written by hand or by a bug). */
  dropDeadRows(): { objects: number; chunks: string[] } {
    return this.db.transaction(
      (tx) => {
        const dead = tx.select({ cid: dfsObjects.cid }).from(dfsObjects).where(lte(dfsObjects.refs, 0)).all();
        const chunks = dead.flatMap((o) => dropObject(tx, o.cid));
        const zero = tx.delete(dfsChunks).where(lte(dfsChunks.refs, 0)).returning({ hash: dfsChunks.hash }).all();
        return { objects: dead.length, chunks: [...chunks, ...zero.map((z) => z.hash)] };
      },
      { behavior: "immediate" },
    );
  }

  /** Chunk keys some live upload pins (D15), for health. */
  pinnedChunks(prefix: string, at = Date.now()): number {
    return this.db.select({ n: sql<number>`COUNT(DISTINCT ${blobPins.key})` }).from(blobPins).where(and(like(blobPins.key, `${prefix}%`), gt(blobPins.expiresAt, at))).get()?.n ?? 0;
  }

  counts(): { objects: number; chunks: number; bytes: number } {
    const objects = this.db.select({ n: count() }).from(dfsObjects).get()?.n ?? 0;
    const chunks = this.db.select({ n: count(), bytes: sum(dfsChunks.size) }).from(dfsChunks).get();
    return { objects, chunks: chunks?.n ?? 0, bytes: Number(chunks?.bytes ?? 0) };
  }
}

function distinct(manifest: readonly ChunkRef[]): ChunkRef[] {
  return [...new Map(manifest.map((c) => [c.hash, c] as const)).values()];
}

function addChunkRefs(tx: Tx, chunks: readonly ChunkRef[]): void {
  for (const rows of batches(chunks.map((c) => ({ hash: c.hash, size: c.size, refs: 1 })))) {
    tx.insert(dfsChunks)
      .values(rows)
      .onConflictDoUpdate({ target: dfsChunks.hash, set: { refs: sql`${dfsChunks.refs} + 1` } })
      .run();
  }
}

/** Deletes an object and its manifest; its chunks lose a reference. Returns chunks now at zero. */
function dropObject(tx: Tx, cid: string): string[] {
  const hashes = tx
    .selectDistinct({ hash: dfsObjectChunks.hash })
    .from(dfsObjectChunks)
    .where(eq(dfsObjectChunks.cid, cid))
    .all()
    .map((r) => r.hash);
  tx.delete(dfsObjectChunks).where(eq(dfsObjectChunks.cid, cid)).run();
  tx.delete(dfsObjects).where(eq(dfsObjects.cid, cid)).run();
  const gone: string[] = [];
  for (const batch of batches(hashes)) {
    tx.update(dfsChunks).set({ refs: sql`${dfsChunks.refs} - 1` }).where(inArray(dfsChunks.hash, batch)).run();
    const zero = tx
      .delete(dfsChunks)
      .where(and(inArray(dfsChunks.hash, batch), lte(dfsChunks.refs, 0)))
      .returning({ hash: dfsChunks.hash })
      .all();
    gone.push(...zero.map((z) => z.hash));
  }
  return gone;
}
