/**
 * Pin requests of the Pinning Service API (D25): one row per request, from `queued` through
 * `pinning` to `pinned` or `failed`. A row in flight is worked by the gateway that holds its lease
 * (`lease_holder` until `lease_until`): a gateway that dies stops renewing, and another takes the
 * row over once the lease has lapsed, so pins survive restarts and a cluster works each once.
 * The pinned content itself is a file of the account's `ipfs` files (the storage catalog's row):
 * this table keeps only what the API shows of the request.
 */
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const pinRequests = sqliteTable(
  "pin_requests",
  {
    /** The API's `requestid`: random, unguessable. */
    id: text("id").primaryKey(),
    /** Canonical DID of the account the pin is for. */
    did: text("did").notNull(),
    /** The Cid as the client gave it (shown back in `pin.cid`). */
    cid: text("cid").notNull(),
    /** The same Cid in its canonical form (CIDv1, base32): what the `cid` filter and the file row compare. */
    root: text("root").notNull(),
    /** The pin's `name`, or null; the file is named by it, else by the Cid. */
    name: text("name"),
    /** JSON array of multiaddrs (`origins`). */
    origins: text("origins").notNull(),
    /** JSON object of strings (`meta`). */
    meta: text("meta").notNull(),
    status: text("status", { enum: ["queued", "pinning", "pinned", "failed"] }).notNull(),
    /** Why it failed (or what it waits for): `info.status_details`. */
    details: text("details"),
    /** Epoch ms: `created`. */
    createdAt: integer("created_at").notNull(),
    /** Epoch ms of the last status change. */
    updatedAt: integer("updated_at").notNull(),
    /** The gateway working it, until `lease_until` (epoch ms); null when nobody is. */
    leaseHolder: text("lease_holder"),
    leaseUntil: integer("lease_until"),
  },
  (t) => [index("pin_requests_did").on(t.did, t.createdAt), index("pin_requests_work").on(t.status, t.leaseUntil)],
);
