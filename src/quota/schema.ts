/**
 * Off-chain quota state (D7): bytes held by in-flight transfers, traffic moved per period, and
 * purchases by Idempotency-Key (D8). Bytes stored now come from the storage `files` table.
 */
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/** Bytes an in-flight upload or download holds against a pool until it settles. */
export const quotaReservations = sqliteTable(
  "quota_reservations",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    /** Checksummed address of the account (the DID's identity). */
    account: text("account").notNull(),
    kind: text("kind", { enum: ["space", "traffic"] }).notNull(),
    bytes: integer("bytes").notNull(),
    createdAt: integer("created_at").notNull(),
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
