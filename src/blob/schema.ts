/**
 * The deletion protocol of D15, in the database that every gateway shares: whoever may still need
 * a blob says so with a pin before it looks whether the blob exists, and whoever deletes one says
 * so with a tombstone before the DELETE. An object's age never decides anything.
 */
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

/** "Keep this blob": an upload's claim on a key, from before its dedup check until its rows commit.
 * Dead holders' pins stop counting once `expires_at` passes (live ones renew). */
export const blobPins = sqliteTable(
  "blob_pins",
  {
    key: text("key").notNull(),
    holder: text("holder").notNull(),
    /** Epoch ms. */
    expiresAt: integer("expires_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.key, t.holder] }), index("blob_pins_holder").on(t.holder)],
);

/** "Being deleted": written in the transaction that decided the blob is unused, dropped once the
 * DELETE is done. Uploads that meet one wait, then write the blob again; one whose deleter died
 * (`expires_at` passed) is finished by whoever meets it. */
export const blobTombstones = sqliteTable("blob_tombstones", {
  key: text("key").primaryKey(),
  holder: text("holder").notNull(),
  /** Epoch ms. */
  expiresAt: integer("expires_at").notNull(),
});
