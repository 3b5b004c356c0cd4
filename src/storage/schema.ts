/**
 * Storage state: buckets and files (D9). Content itself belongs to the back-ends; who may act and
 * pay (sessions, vouchers) to the authorities.
 */
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

export const buckets = sqliteTable("buckets", {
  did: text("did").primaryKey(),
  createdAt: integer("created_at").notNull(),
});

export const files = sqliteTable(
  "files",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    did: text("did").notNull().references(() => buckets.did),
    backend: text("backend", { enum: ["dfs", "ipfs"] }).notNull(),
    name: text("name").notNull(),
    cid: text("cid").notNull(),
    size: integer("size").notNull(),
    encryption: text("encryption").notNull().default(""),
    modTime: integer("mod_time").notNull(),
    /** The S3 API's ETag (D18), unquoted: the MD5 of the bytes in hex, or `<md5 of part MD5s>-N`
     * for a multipart upload; null for files uploaded without one (the S3 API then shows a non-hex tag). */
    etag: text("etag"),
    /** The headers an S3 client stored with the object (Content-Type, Cache-Control, …,
     * `x-amz-meta-*`) as a JSON object of lower-case header names to values (s3api/metadata.ts);
     * null for none (a file uploaded over HTTP: its type then follows from its name). */
    metadata: text("metadata"),
    /** The S3 API's flexible checksum (x-amz-checksum-*), as `<algorithm>:<base64>`, the
     * algorithm as its header names it (`crc32`, `crc32c`, `crc64nvme`, `sha1`, `sha256`); a
     * multipart upload's composite one ends in `-<parts>`. Null when the client sent none. */
    checksum: text("checksum"),
    /** A multipart upload's part sizes, in order, runs of equal sizes as `<size>*<count>`, joined by
     * commas (`8388608*4,1048576`): what GET ?partNumber= reads. Null for an object of one part. */
    parts: text("parts"),
  },
  (t) => [
    uniqueIndex("files_name").on(t.did, t.backend, t.name),
    index("files_cid").on(t.backend, t.cid, t.did),
    // listobjects' page (WHERE did, backend, id > after ORDER BY id): read in order, no sort.
    index("files_listing").on(t.did, t.backend, t.id),
  ],
);

/**
 * Bytes each DID stores in `files`, both back-ends together (one space pool, D7): the quota's
 * "stored" (src/quota/meter.ts), read as one row instead of a SUM over every file of the account.
 * Written only by triggers on `files` (migrations 0023 / pg 0013, hand-written: drizzle-kit cannot
 * express triggers), with relative updates, so no code path — nor a gateway of the previous
 * version sharing the database (D16) — can insert, replace or delete a file without it.
 */
export const storedTotals = sqliteTable("stored_totals", {
  did: text("did").primaryKey(),
  bytes: integer("bytes").notNull().default(0),
});
