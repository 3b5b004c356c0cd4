/**
 * Session grants (D19): a wallet's one EIP-4361 (Sign-In with Ethereum) message, with an ERC-5573
 * ReCap naming the DID and the abilities, lets a key the console made in the browser sign
 * `Request` (upload, delete) and `Voucher` messages for the DID until its expiry or revocation.
 * Registered once (POST /v2/session-grants) rather than sent with every call: a download's voucher
 * is its only credential, and revocation needs a row anyway. `signer` is the address that signed
 * the grant: the grant holds only while that address may still sign for the DID.
 */
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const sessionGrants = sqliteTable(
  "session_grants",
  {
    /** Canonical DID the key may sign for. */
    did: text("did").notNull(),
    /** Lower-case address of the session key. */
    key: text("key").notNull(),
    /** Unix seconds: the grant's Expiration Time. */
    validUntil: integer("valid_until").notNull(),
    /** Lower-case address that signed the grant. */
    signer: text("signer").notNull(),
    /** Epoch ms. */
    createdAt: integer("created_at").notNull(),
    revokedAt: integer("revoked_at"),
    /**
     * What the key may sign, from the grant's ReCap: "delete", "upload", "voucher", space-separated.
     * Empty on rows registered as the retired EIP-712 SessionGrant, which therefore allow nothing.
     */
    abilities: text("abilities").notNull().default(""),
    /** The origin that asked for the grant (the message's scheme and domain). */
    origin: text("origin"),
  },
  (t) => [primaryKey({ columns: [t.did, t.key] }), index("session_grants_key").on(t.key)],
);

/** Nonces of grants: issued to a DID's Bearer caller, spent by the one registration that uses them. */
export const sessionGrantNonces = sqliteTable(
  "session_grant_nonces",
  {
    nonce: text("nonce").primaryKey(),
    /** Canonical DID it was issued for: a grant naming another DID does not take it. */
    did: text("did").notNull(),
    /** Epoch ms. */
    issuedAt: integer("issued_at").notNull(),
    /** Epoch ms. */
    expiresAt: integer("expires_at").notNull(),
    /** Epoch ms; set once, by the registration that spends it. */
    usedAt: integer("used_at"),
  },
  (t) => [index("session_grant_nonces_did").on(t.did), index("session_grant_nonces_expires").on(t.expiresAt)],
);
