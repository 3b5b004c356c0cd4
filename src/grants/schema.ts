/**
 * Session grants (D19): a wallet's one off-chain EIP-712 `SessionGrant(address key, uint64
 * validUntil)` lets a key the console made in the browser sign `Request` and `Voucher` messages
 * for the DID until `validUntil` or revocation. Registered once (POST /v2/session-grants) rather
 * than sent with every call: a download's voucher is its only credential, and revocation needs a
 * row anyway. `signer` is the address that signed the grant: the grant holds only while that
 * address may still sign for the DID (the D3 rule for refresh tokens).
 */
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const sessionGrants = sqliteTable(
  "session_grants",
  {
    /** Canonical DID the key may sign for. */
    did: text("did").notNull(),
    /** Lower-case address of the session key. */
    key: text("key").notNull(),
    /** Unix seconds, as signed. */
    validUntil: integer("valid_until").notNull(),
    /** Lower-case address recovered from the grant's signature. */
    signer: text("signer").notNull(),
    /** Epoch ms. */
    createdAt: integer("created_at").notNull(),
    revokedAt: integer("revoked_at"),
  },
  (t) => [primaryKey({ columns: [t.did, t.key] }), index("session_grants_key").on(t.key)],
);
