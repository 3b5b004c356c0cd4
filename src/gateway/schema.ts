/**
 * The trustless gateway's table (D17): bytes served from an owner's public content per UTC day.
 * These reads are paid by the operator, never from the owner's traffic pool, up to
 * STOWAGE_PUBLIC_EGRESS per owner per day; the count lives in the shared database so that every
 * gateway of a cluster spends from the same allowance (relative updates only, see egress.ts).
 * Rows of past days are cleared by the gateway that counts the next day's first bytes.
 */
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const publicEgress = sqliteTable(
  "public_egress",
  {
    /** EIP-55 address of the directory entry's owner. */
    owner: text("owner").notNull(),
    /** Days since the epoch (UTC). */
    day: integer("day").notNull(),
    bytes: integer("bytes").notNull(),
  },
  (t) => [primaryKey({ columns: [t.owner, t.day] })],
);
