/**
 * Pins of the ipfs back-end: one row per pinned root Cid with its reference count (how many
 * committed uploads hold it). A row exists only while `refs` > 0; the start-up gc keeps exactly
 * the blocks reachable from these roots. Counting here (not in Helia's pin store) makes commit and
 * release one SQLite transaction each.
 */
import { integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const ipfsPins = sqliteTable("ipfs_pins", {
  /** CIDv1, base32 (the canonical string form). */
  cid: text("cid").primaryKey(),
  refs: integer("refs").notNull(),
  /** Content size in bytes (known at import; spares a block read per stat). */
  size: integer("size").notNull(),
});
