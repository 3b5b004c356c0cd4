/**
 * Tables of the ipfs back-end. Reference counts, as in dfs:
 * - `ipfs_pins.refs`: commits of this root Cid minus releases (routes hold one per file entry);
 *   the content is pinned while the row exists.
 * - `ipfs_blocks.refs`: how many distinct pinned roots contain this block, however many times
 *   each links it (a file of zeros links one leaf many times: refs 1).
 * - `ipfs_object_blocks`: every block of a pinned root's DAG (the root itself included), written
 *   in the commit transaction; also the block → root index a trustless gateway needs (D17).
 * Rows at zero refs are deleted in the transaction that brings them to zero, so a row always
 * means "keep this block"; blobs under `ipfs/` without a row are garbage for the sweep (D15).
 */
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const ipfsPins = sqliteTable("ipfs_pins", {
  /** CIDv1, base32 (the canonical string form). */
  cid: text("cid").primaryKey(),
  refs: integer("refs").notNull(),
  /** Content size in bytes (known at import; spares a block read per stat). */
  size: integer("size").notNull(),
});

export const ipfsBlocks = sqliteTable("ipfs_blocks", {
  /** The blob key, `ipfs/<multihash, base32>` (see blocks.ts). */
  key: text("key").primaryKey(),
  size: integer("size").notNull(),
  refs: integer("refs").notNull(),
});

export const ipfsObjectBlocks = sqliteTable(
  "ipfs_object_blocks",
  {
    /** The pinned root (as `ipfs_pins.cid`). */
    cid: text("cid").notNull(),
    /** A block of its DAG (as `ipfs_blocks.key`). */
    key: text("key").notNull(),
  },
  (t) => [primaryKey({ columns: [t.cid, t.key] }), index("ipfs_object_blocks_key").on(t.key)],
);
