/**
 * Encryption state kept at the gateway (D20). The gateway never holds a key that opens a file:
 * an account's age identity is stored wrapped under a key only the DID owner's wallet can derive,
 * and a share is an age header wrapping a file key to a reader's public recipient. Both are
 * opaque text here, stored and handed back as they came.
 */
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

/** One wrapped age identity per DID (its identity address), written by the account's client. */
export const ageIdentities = sqliteTable("age_identities", {
  /** Checksummed address of the DID's identity. */
  account: text("account").primaryKey(),
  /** The client's wrapped identity, opaque (size-limited by the route). */
  wrapped: text("wrapped").notNull(),
  /** Epoch ms of the last write. */
  updatedAt: integer("updated_at").notNull(),
  /**
   * The client's random salt (32 bytes, 0x-hex) that the wrapping key's derivation signs with the
   * deployment: stored beside the blob so any client of the account derives the same key. Null on
   * identities wrapped the earlier way, which their next unlock re-wraps.
   */
  salt: text("salt"),
});

/** A file key shared with a reader: keyed by owner, Mid and reader, so two owners of one Cid never
 * touch each other's shares. */
export const ageShares = sqliteTable(
  "age_shares",
  {
    /** Checksummed address of the owner's DID identity. */
    owner: text("owner").notNull(),
    /** The directory entry's Mid (the file's Cid). */
    mid: text("mid").notNull(),
    /** Checksummed address of the reader. */
    reader: text("reader").notNull(),
    /** An age v1 header (ASCII) wrapping the file key to the reader's recipient. */
    header: text("header").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.owner, t.mid, t.reader] })],
);

/** A priced encrypted entry's file key escrowed to this gateway's age identity (D20), so the
 * gateway can write each buyer's share. Only a wrap checked against the stored file's header MAC
 * is kept: a row here is a verified escrow. */
export const ageEscrows = sqliteTable(
  "age_escrows",
  {
    owner: text("owner").notNull(),
    mid: text("mid").notNull(),
    /** The gateway recipient (`age1…`) the key is wrapped to: after a rotation, old rows do not open. */
    keyId: text("key_id").notNull(),
    /** An age v1 header wrapping the file key to `keyId`. */
    header: text("header").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.owner, t.mid] })],
);
