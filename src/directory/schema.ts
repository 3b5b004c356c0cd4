/**
 * The directory index (D10): what the Directory contract's events say, in SQLite. `directory_events`
 * is the log of every applied event and the source of truth for rollbacks; the other tables are
 * the current state derived from it. The FTS5 table `directory_fts` (rowid = entry id, columns
 * name and keywords) is created by a hand-written migration, since drizzle-kit cannot express
 * virtual tables; it is kept in step with `directory_entries` inside the same transaction.
 */
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/** One published entry per (owner, Mid). */
export const directoryEntries = sqliteTable(
  "directory_entries",
  {
    /** The FTS5 rowid of this entry's name and keywords. */
    id: integer("id").primaryKey(),
    /** EIP-55 address, as viem decodes it from the log. */
    owner: text("owner").notNull(),
    /** Exactly the string the owner published (spec 2.7 `Mid`). */
    mid: text("mid").notNull(),
    /** The owner's canonical DID: the bucket key of the storage `files` table. */
    did: text("did").notNull(),
    /** `mid` as a canonical CIDv1 string (what `files.cid` holds); null when it is no Cid. */
    cid: text("cid"),
    name: text("name").notNull(),
    /** uint64 in decimal: a uint64 does not fit SQLite's signed integers, and an event the
     * indexer cannot store would stall it. */
    size: text("size").notNull(),
    /** Gwei, uint64 in decimal (see `size`). */
    price: text("price").notNull(),
    public: integer("public", { mode: "boolean" }).notNull(),
    keywords: text("keywords", { mode: "json" }).$type<string[]>().notNull(),
    /** Block of the Published or Updated event that set these fields. */
    block: integer("block").notNull(),
  },
  (t) => [uniqueIndex("directory_entries_key").on(t.owner, t.mid), index("directory_entries_cid").on(t.cid, t.did)],
);

/** Read permission granted by the owner (ReadGranted, until ReadRevoked or Unpublished). */
export const directoryGrants = sqliteTable(
  "directory_grants",
  {
    owner: text("owner").notNull(),
    mid: text("mid").notNull(),
    reader: text("reader").notNull(),
    block: integer("block").notNull(),
  },
  (t) => [primaryKey({ columns: [t.owner, t.mid, t.reader] })],
);

/** Read permission bought (ReadBought); only Unpublished ends it. */
export const directoryPurchases = sqliteTable(
  "directory_purchases",
  {
    owner: text("owner").notNull(),
    mid: text("mid").notNull(),
    reader: text("reader").notNull(),
    /** Wei, decimal. */
    paid: text("paid").notNull(),
    block: integer("block").notNull(),
    tx: text("tx").notNull(),
  },
  (t) => [primaryKey({ columns: [t.owner, t.mid, t.reader] })],
);

/** Every applied event, by chain position. A rollback deletes the events after the common block
 * and rebuilds the state of the (owner, Mid) pairs they touched from the events that remain. */
export const directoryEvents = sqliteTable(
  "directory_events",
  {
    block: integer("block").notNull(),
    logIndex: integer("log_index").notNull(),
    tx: text("tx").notNull(),
    kind: text("kind", { enum: ["Published", "Updated", "Unpublished", "ReadGranted", "ReadRevoked", "ReadBought"] }).notNull(),
    owner: text("owner").notNull(),
    mid: text("mid").notNull(),
    /** The event's other fields (bigints as decimal strings). */
    data: text("data", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
  },
  (t) => [primaryKey({ columns: [t.block, t.logIndex] }), index("directory_events_key").on(t.owner, t.mid, t.block, t.logIndex)],
);
