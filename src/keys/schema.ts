/**
 * S3 access keys (D18): issued to a DID account by a signed restricted request, each tied to the
 * key that signed it (`signer`), so it stops working once that key may no longer sign for the
 * DID. The secret is kept encrypted (AES-256-GCM under the secrets key), never in the clear:
 * the S3 listener needs it back to check SigV4, so a hash would not do.
 */
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const accessKeys = sqliteTable(
  "access_keys",
  {
    /** The row's own id (what DELETE /v2/keys/<id> names), and the secret's associated data. */
    id: text("id").primaryKey(),
    /** AWS-like: 20 characters, A–Z and 2–7. */
    accessKeyId: text("access_key_id").notNull().unique(),
    /** Canonical DID of the account the key acts for. */
    did: text("did").notNull(),
    /** Lower-case address recovered from the minting request's signature. */
    signer: text("signer").notNull(),
    /** rw, ro: S3 keys; pins: a Pinning Service API token (its bucket is always ipfs). */
    access: text("access", { enum: ["rw", "ro", "pins"] }).notNull(),
    bucket: text("bucket", { enum: ["dfs", "ipfs", "*"] }).notNull(),
    /** `v1.` + base64url(nonce ‖ ciphertext ‖ tag). */
    secretEnc: text("secret_enc").notNull(),
    /** Epoch ms; null = no expiry. */
    expiresAt: integer("expires_at"),
    createdAt: integer("created_at").notNull(),
    revokedAt: integer("revoked_at"),
  },
  (t) => [index("access_keys_did").on(t.did, t.createdAt)],
);
