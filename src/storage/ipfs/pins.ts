/**
 * Reference counts of pinned roots and of their blocks (schema.ts). Each function is one SQLite
 * statement or one IMMEDIATE transaction, so parallel commits and releases never lose a count,
 * and a block's row and its root's row change together: a block is referenced exactly while some
 * pinned root's DAG contains it.
 */
import { and, count, eq, gt, inArray, lte, notExists, sql } from "drizzle-orm";
import type { Db } from "../../db/open.ts";
import type { BlockSizes } from "./put.ts";
import { ipfsBlocks, ipfsObjectBlocks, ipfsPins } from "./schema.ts";

type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** Rows per INSERT (SQLite binds at most 32,766 variables per statement). */
const BATCH = 500;

/** One more reference to `cid`; the first one also makes its blocks referenced. */
export function addRef(db: Db, cid: string, size: number, blocks: BlockSizes): void {
  db.transaction(
    (tx) => {
      const row = tx.select({ refs: ipfsPins.refs }).from(ipfsPins).where(eq(ipfsPins.cid, cid)).get();
      if (row) {
        tx.update(ipfsPins).set({ refs: sql`${ipfsPins.refs} + 1` }).where(eq(ipfsPins.cid, cid)).run();
        return;
      }
      tx.insert(ipfsPins).values({ cid, refs: 1, size }).run();
      referenceBlocks(tx, cid, blocks);
    },
    { behavior: "immediate" },
  );
}

/** Writes the DAG's rows of a root whose pin row exists and that has none yet. */
function referenceBlocks(tx: Tx, cid: string, blocks: BlockSizes): void {
  const entries = [...blocks];
  for (let i = 0; i < entries.length; i += BATCH) {
    const part = entries.slice(i, i + BATCH);
    tx.insert(ipfsObjectBlocks).values(part.map(([key]) => ({ cid, key }))).onConflictDoNothing().run();
    tx.insert(ipfsBlocks)
      .values(part.map(([key, size]) => ({ key, size, refs: 1 })))
      .onConflictDoUpdate({ target: ipfsBlocks.key, set: { refs: sql`${ipfsBlocks.refs} + 1` } })
      .run();
  }
}

/**
 * One reference less. At zero the root's row and its block rows go, and every block no other
 * root contains loses its row: those keys are returned, for the caller to delete through the
 * guard. `left` is undefined when there was no reference.
 */
export function dropRef(db: Db, cid: string): { left: number | undefined; freed: string[] } {
  return db.transaction(
    (tx) => {
      const row = tx.select({ refs: ipfsPins.refs }).from(ipfsPins).where(eq(ipfsPins.cid, cid)).get();
      if (!row) return { left: undefined, freed: [] };
      if (row.refs > 1) {
        tx.update(ipfsPins).set({ refs: row.refs - 1 }).where(eq(ipfsPins.cid, cid)).run();
        return { left: row.refs - 1, freed: [] };
      }
      tx.delete(ipfsPins).where(eq(ipfsPins.cid, cid)).run();
      const mine = tx.select({ key: ipfsObjectBlocks.key }).from(ipfsObjectBlocks).where(eq(ipfsObjectBlocks.cid, cid));
      tx.update(ipfsBlocks).set({ refs: sql`${ipfsBlocks.refs} - 1` }).where(inArray(ipfsBlocks.key, mine)).run();
      const freed = tx.delete(ipfsBlocks).where(and(lte(ipfsBlocks.refs, 0), inArray(ipfsBlocks.key, mine))).returning({ key: ipfsBlocks.key }).all();
      tx.delete(ipfsObjectBlocks).where(eq(ipfsObjectBlocks.cid, cid)).run();
      return { left: 0, freed: freed.map((r) => r.key) };
    },
    { behavior: "immediate" },
  );
}

/** Whether a pinned root contains the block (for the guard's deciding transaction). */
export function blockReferenced(tx: Db | Tx, key: string): boolean {
  return tx.select({ n: sql<number>`1` }).from(ipfsBlocks).where(and(eq(ipfsBlocks.key, key), gt(ipfsBlocks.refs, 0))).get() !== undefined;
}

/** The keys among `keys` that a pinned root contains. */
export function referencedAmong(db: Db, keys: readonly string[]): Set<string> {
  if (keys.length === 0) return new Set();
  const rows = db.select({ key: ipfsBlocks.key }).from(ipfsBlocks).where(and(inArray(ipfsBlocks.key, [...keys]), gt(ipfsBlocks.refs, 0))).all();
  return new Set(rows.map((r) => r.key));
}

/** Pinned roots whose blocks are not indexed yet (content from before migration 0012). */
export function unindexedRoots(db: Db): string[] {
  return db
    .select({ cid: ipfsPins.cid })
    .from(ipfsPins)
    .where(notExists(db.select({ n: sql`1` }).from(ipfsObjectBlocks).where(eq(ipfsObjectBlocks.cid, ipfsPins.cid))))
    .all()
    .map((r) => r.cid);
}

/** Indexes an existing pin's DAG once (a no-op if the pin is gone or already indexed). */
export function indexRoot(db: Db, cid: string, blocks: BlockSizes): void {
  db.transaction(
    (tx) => {
      if (!tx.select({ n: sql`1` }).from(ipfsPins).where(eq(ipfsPins.cid, cid)).get()) return;
      if (tx.select({ n: sql`1` }).from(ipfsObjectBlocks).where(eq(ipfsObjectBlocks.cid, cid)).get()) return;
      referenceBlocks(tx, cid, blocks);
    },
    { behavior: "immediate" },
  );
}

export function pinned(db: Db, cid: string): { refs: number; size: number } | undefined {
  return db.select({ refs: ipfsPins.refs, size: ipfsPins.size }).from(ipfsPins).where(eq(ipfsPins.cid, cid)).get();
}

export function pinnedCount(db: Db): number {
  return db.select({ n: count() }).from(ipfsPins).get()?.n ?? 0;
}
