/**
 * Storage state: DID login sessions and their restricted-call ids (D4, D5), buckets and files
 * (D9), and the traffic voucher counter (D6). Content itself belongs to the back-ends.
 */
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/**
 * No longer read or written: each login is a session of its own, kept in `storage_sessions`. The table stays so that migrations remain additive (D16); drop it in a later
 * version.
 */
export const didLogins = sqliteTable("did_logins", {
  did: text("did").primaryKey(),
  lastTimestamp: integer("last_timestamp").notNull(),
});

/** One session per (did, token): several devices can be logged in at once. A token opens one
 * session, once: a row is never deleted, so a login with a used token is refused (no replay, and
 * no reset of the ids its calls used). `timestamp` is its login's. */
export const storageSessions = sqliteTable(
  "storage_sessions",
  {
    did: text("did").notNull(),
    token: text("token").notNull(),
    timestamp: integer("timestamp").notNull(),
    /** Highest requestID accepted in this session (0 after login). */
    highestRequest: integer("highest_request").notNull().default(0),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.did, t.token] }), index("storage_sessions_latest").on(t.did, t.timestamp)],
);

/** requestIDs claimed in a session; the primary key makes each one usable once. */
export const sessionRequests = sqliteTable(
  "session_requests",
  {
    did: text("did").notNull(),
    token: text("token").notNull(),
    requestId: integer("request_id").notNull(),
  },
  (t) => [primaryKey({ columns: [t.did, t.token, t.requestId] })],
);

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

/** All-time bytes moved per payer at this seller, and vouchers already accepted (D6). */
export const voucherCounters = sqliteTable("voucher_counters", {
  payer: text("payer").primaryKey(),
  used: integer("used").notNull().default(0),
});

export const vouchersUsed = sqliteTable(
  "vouchers_used",
  {
    payer: text("payer").notNull(),
    size: integer("size").notNull(),
    /** The counter when the voucher was accepted: the transfer may move size − base bytes. */
    base: integer("base").notNull(),
    usedAt: integer("used_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.payer, t.size] })],
);
