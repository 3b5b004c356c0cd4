/**
 * Off-chain quota state (D7): bytes held by in-flight transfers, traffic moved per period, and
 * purchases by Idempotency-Key (D8). Bytes stored now come from the storage catalog: its
 * `stored_totals` row per DID, kept by triggers on `files` (src/storage/schema.ts).
 */
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/**
 * One row per account that has metered a transfer: the row a quota transaction locks first (D16,
 * `SELECT … FOR UPDATE`), so two gateways' checks of one account's pools run one after the other.
 * It holds nothing else: what counts lives in the rows below and in the storage catalog.
 */
export const quotaAccounts = sqliteTable("quota_accounts", {
  account: text("account").primaryKey(),
});

/** Bytes an in-flight upload or download holds against a pool until it settles, or until it expires
 * (its gateway died or its client went silent): only expired rows are ever cleared. */
export const quotaReservations = sqliteTable(
  "quota_reservations",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    /** Checksummed address of the account (the DID's identity). */
    account: text("account").notNull(),
    kind: text("kind", { enum: ["space", "traffic"] }).notNull(),
    /** Bytes the transfer is sure to count: an upload's bytes received so far, a download's length. */
    bytes: integer("bytes").notNull(),
    createdAt: integer("created_at").notNull(),
    /** The gateway that holds it (its data dir's gateway id), or "lasting" for a hold no process
     * renews (a multipart upload's parts). Older gateways wrote a random id per process. */
    gateway: text("gateway").notNull().default(""),
    /** Epoch ms after which nobody holds it any more (renewed while bytes flow); 0 = a row from before expiry existed. */
    expiresAt: integer("expires_at").notNull().default(0),
  },
  (t) => [index("quota_reservations_account").on(t.account, t.kind)],
);

/** Traffic moved per account in a period; a new period (chain `periodStart`) starts from zero. */
export const trafficUsage = sqliteTable(
  "traffic_usage",
  {
    account: text("account").notNull(),
    periodStart: integer("period_start").notNull(),
    bytes: integer("bytes").notNull(),
  },
  (t) => [primaryKey({ columns: [t.account, t.periodStart] })],
);

/** Purchases by Idempotency-Key: the same key answers the same transaction and buys once. */
export const purchases = sqliteTable(
  "purchases",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    account: text("account").notNull(),
    kind: text("kind", { enum: ["space", "traffic"] }).notNull(),
    idempotencyKey: text("idempotency_key").notNull(),
    bytes: integer("bytes").notNull(),
    status: text("status", { enum: ["pending", "done", "failed"] }).notNull(),
    tx: text("tx"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("purchases_key").on(t.account, t.kind, t.idempotencyKey)],
);

/**
 * Purchases and free grants as the Proxy contract's events say (`Purchased`, `FreeGranted`),
 * indexed from the chain (events.ts): the usage report's record of what each account bought or
 * was given, whichever gateway or wallet sent the transaction. Keyed by chain position, so a range
 * read twice adds nothing twice; a chain rewind deletes the rows after the common block.
 */
export const quotaEvents = sqliteTable(
  "quota_events",
  {
    block: integer("block").notNull(),
    logIndex: integer("log_index").notNull(),
    tx: text("tx").notNull(),
    kind: text("kind", { enum: ["purchase", "grant"] }).notNull(),
    /** EIP-55 address of the account. */
    account: text("account").notNull(),
    pool: text("pool", { enum: ["space", "traffic"] }).notNull(),
    /** Bytes bought or granted, in decimal: the event's uint64, which may pass 2^53 (a 9 EiB grant). */
    bytes: text("bytes").notNull(),
    /** What a purchase cost from the deposit, in wei (decimal: a uint256); "0" for a grant. */
    cost: text("cost").notNull(),
    /** The block's time, epoch ms. */
    at: integer("at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.block, t.logIndex] }), index("quota_events_account").on(t.account, t.at)],
);
