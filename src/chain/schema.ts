/** Indexer state: one cursor per consumer, and recent block hashes to notice a chain rewind. */
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const chainCursors = sqliteTable("chain_cursors", {
  name: text("name").primaryKey(),
  /** Last block whose events are applied. */
  block: integer("block").notNull(),
  hash: text("hash"),
});

export const chainBlocks = sqliteTable(
  "chain_blocks",
  {
    name: text("name").notNull(),
    number: integer("number").notNull(),
    hash: text("hash").notNull(),
  },
  (t) => [primaryKey({ columns: [t.name, t.number] })],
);

/**
 * The next transaction nonce of each operator account on each chain (D16): allocated in one
 * relative update, so purchases on many gateways never reuse a nonce nor wait for a block.
 */
export const operatorNonces = sqliteTable(
  "operator_nonces",
  {
    chainId: integer("chain_id").notNull(),
    address: text("address").notNull(),
    next: integer("next").notNull(),
  },
  (t) => [primaryKey({ columns: [t.chainId, t.address] })],
);
