/**
 * Multipart uploads of the S3 API (D18). An upload lives in the database, not in one gateway's
 * memory, so any gateway of a cluster can take its parts and complete it; it expires after 24 h.
 * Each part's bytes are content of the upload's back-end holding one reference (`cid`), dropped
 * when the upload completes, is aborted or expires; `reservation` is the quota hold (a
 * `quota_reservations` row) that keeps the parts' space counted against the account meanwhile.
 */
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const s3Uploads = sqliteTable(
  "s3_uploads",
  {
    /** The UploadId clients send back. */
    id: text("id").primaryKey(),
    /** Canonical DID of the account the upload's file will belong to. */
    did: text("did").notNull(),
    backend: text("backend", { enum: ["dfs", "ipfs"] }).notNull(),
    /** The object key: the file name it will have. */
    name: text("name").notNull(),
    /** Content-Type given at creation, if any (kept for the completed object). */
    contentType: text("content_type"),
    /** The object's metadata given at creation (s3api/metadata.ts's JSON), kept for the completed object. */
    metadata: text("metadata"),
    reservation: integer("reservation"),
    createdAt: integer("created_at").notNull(),
    expiresAt: integer("expires_at").notNull(),
    /** The flexible checksum CreateMultipartUpload named (x-amz-checksum-algorithm, as its header
     * spells it: `crc32`, …), which every part then carries; null: none. */
    checksumAlgorithm: text("checksum_algorithm"),
    /** COMPOSITE (a checksum of the parts' checksums, `-N`) or FULL_OBJECT (of the whole object's bytes). */
    checksumType: text("checksum_type"),
  },
  (t) => [index("s3_uploads_did").on(t.did, t.backend, t.name), index("s3_uploads_expiry").on(t.expiresAt)],
);

export const s3Parts = sqliteTable(
  "s3_parts",
  {
    uploadId: text("upload_id").notNull(),
    partNumber: integer("part_number").notNull(),
    cid: text("cid").notNull(),
    size: integer("size").notNull(),
    /** MD5 of the part's bytes, hex: its ETag. */
    md5: text("md5").notNull(),
    createdAt: integer("created_at").notNull(),
    /** Whether the part was copied from a stored object (UploadPartCopy) rather than sent: its
     * bytes crossed no wire, so the completed file counts no traffic for them. Null: sent. */
    copied: integer("copied", { mode: "boolean" }),
    /** The part's checksum in its upload's algorithm (base64), when the upload names one. */
    checksum: text("checksum"),
  },
  (t) => [primaryKey({ columns: [t.uploadId, t.partNumber] })],
);
