/**
 * The operator's own denylist (`stowage admin block|unblock`): one row per block, kept after it
 * is lifted (`lifted_at` set), so the table is also the record of what was blocked, when and why.
 * Rows are only ever added, and lifted once: the largest id and the count of lifted rows change
 * with every block and unblock, which is how each gateway of a cluster notices a change with one
 * cheap query (operator.ts). Blocking never touches the content or its owner's files.
 */
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const blocked = sqliteTable(
  "blocked",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    /** What the rule matches, one spelling per meaning (`ipfs <multihash> <path> <prefix>` or
     * `double <fn> <hash>`): an unblock finds the block however its CID was written. */
    key: text("key").notNull(),
    /** The rule in the compact denylist format, as the operator named it (`/ipfs/<cid>[/path][*]`, `//<hash>`). */
    rule: text("rule").notNull(),
    reason: text("reason").notNull(),
    /** Epoch ms. */
    blockedAt: integer("blocked_at").notNull(),
    /** Epoch ms when unblocked; null while the block holds. */
    liftedAt: integer("lifted_at"),
  },
  (t) => [index("blocked_key").on(t.key)],
);
