/**
 * Tables of the account API (/v2). Every secret a client holds (refresh tokens, email codes) is
 * stored only as a keyed hash, so a copy of the database logs nobody in.
 */
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/** Provider details shown in user info (spec 2.12); every value is a string. */
export type ProviderInfo = Record<string, string>;

export const users = sqliteTable(
  "users",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    /** Stable public id: an EIP-55 address for wallet accounts, `email:…`, `messenger:…`, `browser:…` otherwise (D2). */
    uid: text("uid").notNull().unique(),
    /** The internal user number of spec 4.2 (rows 7 and 11), a sequence from 100001. */
    number: integer("number").notNull().unique(),
    /** Lower-cased; unique when present. */
    email: text("email").unique(),
    /** argon2id (PHC string) or null when the account has no password. */
    passwordHash: text("password_hash"),
    did: text("did"),
    address: text("address"),
    name: text("name").notNull().default(""),
    icon: text("icon").notNull().default(""),
    points: integer("points").notNull().default(0),
    browserInfo: text("browser_info", { mode: "json" }).$type<ProviderInfo>(),
    microblogInfo: text("microblog_info", { mode: "json" }).$type<ProviderInfo>(),
    messengerInfo: text("messenger_info", { mode: "json" }).$type<ProviderInfo>(),
    communityInfo: text("community_info", { mode: "json" }).$type<ProviderInfo>(),
    socialFollowed: integer("social_followed", { mode: "boolean" }).notNull().default(false),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  // One account per wallet: its own, or the one it was linked to (users.ts).
  (t) => [uniqueIndex("users_address_uq").on(t.address)],
);

/**
 * One row per login session. `headId` is the newest refresh token the client has proven to hold:
 * only it and its direct child are valid, so any other token of the family is a replay (D3).
 */
export const refreshFamilies = sqliteTable(
  "refresh_families",
  {
    id: text("id").primaryKey(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    headId: text("head_id").notNull(),
    /** How the session began (email, password, messenger, browser, evm, did): later checks key off it. */
    method: text("method").notNull(),
    source: text("source").notNull().default(""),
    userAgent: text("user_agent").notNull().default(""),
    /** The key that signed a DID login: the session ends when it may no longer sign for the DID (D3). */
    signer: text("signer"),
    createdAt: integer("created_at").notNull(),
    /** The last refresh; null until the first (a session list's "last used" is then its start). */
    lastUsedAt: integer("last_used_at"),
    revokedAt: integer("revoked_at"),
    revokedReason: text("revoked_reason"),
  },
  // By revocation time: each gateway reads the sessions ended lately, to refuse their access tokens.
  (t) => [index("refresh_families_user_idx").on(t.userId), index("refresh_families_revoked_idx").on(t.revokedAt)],
);

export const refreshTokens = sqliteTable(
  "refresh_tokens",
  {
    /** The JWT's `jti`. */
    id: text("id").primaryKey(),
    familyId: text("family_id")
      .notNull()
      .references(() => refreshFamilies.id, { onDelete: "cascade" }),
    parentId: text("parent_id"),
    /** HMAC-SHA-256 of the whole token. */
    tokenHash: text("token_hash").notNull().unique(),
    issuedAt: integer("issued_at").notNull(),
    expiresAt: integer("expires_at").notNull(),
  },
  (t) => [index("refresh_tokens_family_idx").on(t.familyId)],
);

export const emailCodes = sqliteTable(
  "email_codes",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    email: text("email").notNull(),
    /** HMAC-SHA-256 of email and code: six digits are too few to survive a plain hash. */
    codeHash: text("code_hash").notNull(),
    createdAt: integer("created_at").notNull(),
    expiresAt: integer("expires_at").notNull(),
    /** Wrong tries from the client that asked for the code: other clients' never count here. */
    failedAttempts: integer("failed_attempts").notNull().default(0),
    /** Set when the code is used, voided by too many wrong tries, or replaced by a newer code of its client. */
    closedAt: integer("closed_at"),
    /** The client (`clientKey()`) that asked for the code: a newer code replaces only its own client's. */
    client: text("client"),
  },
  (t) => [index("email_codes_email_idx").on(t.email, t.createdAt)],
);

/**
 * How an account backs off failed secrets from clients it never signed in from (limits.ts'
 * `Backoff`): one row per (kind, account) and window, moved by compare-and-set (login-guard.ts).
 */
export const loginBackoff = sqliteTable(
  "login_backoff",
  {
    /** "code" or "password". */
    kind: text("kind").notNull(),
    /** The normalised email. */
    account: text("account").notNull(),
    windowStart: integer("window_start").notNull(),
    failures: integer("failures").notNull(),
    /** The delay the last try set before the next (doubled by each try past the free ones). */
    delayMs: integer("delay_ms").notNull(),
    /** No try from such a client before this (epoch ms). */
    nextAt: integer("next_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.kind, t.account] }), index("login_backoff_window_idx").on(t.windowStart)],
);

/** The clients (`clientKey()`) each account signed in from lately: they skip its backoff. */
export const knownClients = sqliteTable(
  "known_clients",
  {
    /** The normalised email. */
    account: text("account").notNull(),
    client: text("client").notNull(),
    seenAt: integer("seen_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.account, t.client] })],
);

export const siweNonces = sqliteTable("siwe_nonces", {
  nonce: text("nonce").primaryKey(),
  /** EIP-55 address the challenge was issued to. */
  address: text("address").notNull(),
  chainId: integer("chain_id").notNull(),
  /** The exact message issued: a login must sign this text and no other. */
  message: text("message").notNull(),
  issuedAt: integer("issued_at").notNull(),
  expiresAt: integer("expires_at").notNull(),
  usedAt: integer("used_at"),
});

export const actionRecords = sqliteTable(
  "action_records",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    action: integer("action").notNull(),
    points: integer("points").notNull(),
    /** Unix seconds. */
    time: integer("time").notNull(),
    /**
     * What makes this record unique among the user's records of the action: "once" for a
     * once-only action, the id of the record it follows for a repeatable one. The unique index
     * turns "at most once" into a constraint, whatever number of requests race.
     */
    slot: text("slot").notNull(),
  },
  (t) => [uniqueIndex("action_records_slot_uq").on(t.userId, t.action, t.slot), index("action_records_latest_idx").on(t.userId, t.action, t.time)],
);
