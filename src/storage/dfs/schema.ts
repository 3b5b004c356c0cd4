/**
 * Tables of the `dfs` store. A chunk file exists under `DATA_DIR/dfs/` once per SHA-256; rows say
 * who needs it. Reference counts:
 * - `dfs_objects.refs`: commits of this Cid minus releases (routes hold one per file entry).
 * - `dfs_chunks.refs`: how many distinct objects (refs > 0) name this chunk in their manifest,
 *   however many times each names it (a file of zeros names one chunk 100 times, refs 1).
 * Rows at zero refs are deleted in the transaction that brings them to zero, so a row always
 * means "keep this"; chunk files without a row are garbage for the sweep.
 */
import { foreignKey, index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const dfsChunks = sqliteTable("dfs_chunks", {
  /** SHA-256 of the chunk, lower-case hex (= the raw leaf Cid's digest, and the file name). */
  hash: text("hash").primaryKey(),
  size: integer("size").notNull(),
  refs: integer("refs").notNull(),
});

export const dfsObjects = sqliteTable("dfs_objects", {
  /** UnixFS CIDv1 of the whole file, base32 (D9: the same as the ipfs back-end gives). */
  cid: text("cid").primaryKey(),
  size: integer("size").notNull(),
  /** Number of manifest rows (chunk positions), for health and integrity checks. */
  chunks: integer("chunks").notNull(),
  refs: integer("refs").notNull(),
  createdAt: integer("created_at").notNull(),
});

/** The manifest: chunk `idx` of `cid` is `hash` (`size` bytes, at byte idx × 1 MiB). */
export const dfsObjectChunks = sqliteTable(
  "dfs_object_chunks",
  {
    cid: text("cid").notNull(),
    idx: integer("idx").notNull(),
    hash: text("hash").notNull(),
    size: integer("size").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.cid, t.idx] }),
    foreignKey({ columns: [t.cid], foreignColumns: [dfsObjects.cid] }).onDelete("cascade"),
    // A chunk row cannot be deleted while a manifest names it: a refcount bug fails loudly
    // instead of deleting live data. The index makes that check (and deletes) cheap.
    foreignKey({ columns: [t.hash], foreignColumns: [dfsChunks.hash] }),
    index("dfs_object_chunks_hash").on(t.hash),
  ],
);

/**
 * D9's verification record: what the chunk file looked like (`file`: device, inode, size, mtime
 * and ctime in ns, as one string) when its bytes last matched `hash`, so a read that finds the
 * same file trusts it without hashing (local blob store only: an S3 object has no inode). `state`
 * "damaged" marks a chunk found wrong: never served while the file stays as it was. No foreign
 * key: a record may be written before its chunk's row commits, and outlive it (the scrub drops
 * records no chunk row names). Lost records only cost a verification.
 */
export const dfsChunkChecks = sqliteTable(
  "dfs_chunk_checks",
  {
    hash: text("hash").primaryKey(),
    file: text("file").notNull(),
    /** "ok" or "damaged". */
    state: text("state").notNull(),
    /** When the bytes were last hashed (ms): the periodic scrub takes the oldest first. */
    checkedAt: integer("checked_at").notNull(),
  },
  (t) => [index("dfs_chunk_checks_checked_at").on(t.checkedAt)],
);
