/**
 * The database's own table. Every capability keeps its tables in its own folder's `schema.ts`;
 * src/schema.ts gathers them all for drizzle-kit (add a new capability's tables there).
 */
import { sqliteTable, text, integer } from "drizzle-orm/sqlite-core";

/** Small facts about this installation (schema-independent key/value pairs). */
export const appState = sqliteTable("app_state", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
  updatedAt: integer("updated_at").notNull(),
});

/**
 * Cluster singletons (D16): the indexer, the sweeps and gc run on one gateway at a time, the one
 * holding the unexpired lease. `epoch` grows at every takeover, so a former holder that lost its
 * lease (a partition, a pause) cannot write: its compare-and-set on the epoch fails.
 */
export const leases = sqliteTable("leases", {
  name: text("name").primaryKey(),
  holder: text("holder").notNull(),
  epoch: integer("epoch").notNull(),
  expiresAt: integer("expires_at").notNull(),
});

/**
 * Fixed-window counters shared by every gateway (D12's login rate limits under D16): one row per
 * limited key and window, removed once its window is over.
 */
export const rateCounters = sqliteTable("rate_counters", {
  key: text("key").primaryKey(),
  windowStart: integer("window_start").notNull(),
  count: integer("count").notNull(),
});
