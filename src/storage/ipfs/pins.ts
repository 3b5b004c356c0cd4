/**
 * Reference counts of pinned roots (table `ipfs_pins`). Each function is one SQLite statement or
 * one IMMEDIATE transaction, so parallel commits and releases of one Cid never lose a count.
 */
import { count, eq, sql } from "drizzle-orm";
import type { Db } from "../../db/open.ts";
import { ipfsPins } from "./schema.ts";

/** One more reference; inserts the row at 1. */
export function addRef(db: Db, cid: string, size: number): void {
  db.insert(ipfsPins)
    .values({ cid, refs: 1, size })
    .onConflictDoUpdate({ target: ipfsPins.cid, set: { refs: sql`${ipfsPins.refs} + 1` } })
    .run();
}

/** One reference less; the row goes at 0. Answers the references left, or undefined if none were. */
export function dropRef(db: Db, cid: string): number | undefined {
  return db.transaction(
    (tx) => {
      const row = tx.select({ refs: ipfsPins.refs }).from(ipfsPins).where(eq(ipfsPins.cid, cid)).get();
      if (!row) return undefined;
      if (row.refs <= 1) {
        tx.delete(ipfsPins).where(eq(ipfsPins.cid, cid)).run();
        return 0;
      }
      tx.update(ipfsPins).set({ refs: row.refs - 1 }).where(eq(ipfsPins.cid, cid)).run();
      return row.refs - 1;
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

export function pinnedRoots(db: Db): string[] {
  return db.select({ cid: ipfsPins.cid }).from(ipfsPins).all().map((r) => r.cid);
}
