/**
 * The authorities' state: DID login sessions and their restricted-call ids (D4, D5), and the
 * traffic vouchers' counter and the vouchers accepted (D6).
 */
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

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
