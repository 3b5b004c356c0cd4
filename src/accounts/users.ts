/**
 * Accounts: finding or making them by uid, the current user (spec 2.11) and user info (2.12), and
 * linking a wallet to an account that has none.
 *
 * A wallet belongs to one account at most: its own (uid = its address, made when it first signs
 * in) or the account it was linked to (`address`, set once by `linkWallet` after the wallet signed
 * a message naming that account). A unique index on `address` holds this against races, and a
 * wallet's sign-in finds the account it was linked to rather than making one of its own.
 *
 * Plain statements on `Sql` (D16): an account is made by one insert that takes the next number,
 * so gateways sharing a database never hand out one number or one uid twice.
 *
 * @example
 *   const user = await users.upsert("0xAbC…", { create: { address: "0xAbC…", did: "did:ethr:0x3d9:0xAbC…" } })
 *   users.info(user) // { name, icon, address, did, points, social_info, … }
 */
import { isAddress } from "viem";
import type { ProviderInfo, users } from "./schema.ts";
import type { Queryable } from "../db/sql.ts";
import { fail } from "./error-codes.ts";
import type { Ctx, UserRow } from "./types.ts";

/** The first internal user number (spec 4.2, D12). */
export const FIRST_NUMBER = 100001;

type NewUser = typeof users.$inferInsert;
/** Fields a login may set: `create` only on a new account, `refresh` on every login. */
export type UserFields = Partial<Omit<NewUser, "id" | "uid" | "number" | "createdAt" | "updatedAt">>;

/** Spec 2.11 `data`. */
export interface CurrentUser {
  uid: string;
  email?: string;
  username?: string;
  role: "user" | "admin";
}

/** Spec 2.12. Optional objects appear only when the account has them. */
export interface UserInfo {
  name: string;
  icon: string;
  address: string;
  did: string;
  email?: string;
  points: number;
  browser_info?: Record<string, string>;
  microblog_info?: Record<string, string>;
  messenger_info?: Record<string, string>;
  community_info?: Record<string, string>;
  social_info: boolean;
}

export interface UserService {
  byUid(uid: string): Promise<UserRow | undefined>;
  byEmail(email: string): Promise<UserRow | undefined>;
  /**
   * Finds the account with `uid` (updating `refresh` fields) or makes it with the next number.
   * A `create.email` another account already has makes no account: that one is answered.
   */
  upsert(uid: string, fields: { create?: UserFields; refresh?: UserFields }): Promise<UserRow>;
  /**
   * Gives account `id` the wallet `address` and its `did`, when the account has no wallet yet and
   * the wallet belongs to no account. Linking the account's own wallet again changes nothing.
   */
  linkWallet(id: number, address: string, did: string): Promise<{ linked: UserRow } | { refused: "wallet-taken" | "account-has-wallet" }>;
  update(id: number, fields: UserFields): Promise<UserRow>;
  /** The account behind a verified token; a token of a vanished account is refused. */
  require(uid: string): Promise<UserRow>;
  role(user: UserRow): "user" | "admin";
  current(user: UserRow): CurrentUser;
  info(user: UserRow): UserInfo;
}

/** Provider-info columns and their names in user info. */
const INFO_FIELDS = [
  ["browserInfo", "browser_info"],
  ["microblogInfo", "microblog_info"],
  ["messengerInfo", "messenger_info"],
  ["communityInfo", "community_info"],
] as const;

/** Every column, under its row-type name; JSON and boolean columns are mapped by `toUser`. */
const COLUMNS = `id, uid, number, email, password_hash AS "passwordHash", did, address, name, icon, points,
  browser_info AS "browserInfo", microblog_info AS "microblogInfo", messenger_info AS "messengerInfo",
  community_info AS "communityInfo", social_followed AS "socialFollowed", created_at AS "createdAt", updated_at AS "updatedAt"`;

const BY_UID = `SELECT ${COLUMNS} FROM users WHERE uid = $1`;
const BY_EMAIL = `SELECT ${COLUMNS} FROM users WHERE email = $1`;
const BY_ID = `SELECT ${COLUMNS} FROM users WHERE id = $1`;
/** The account a wallet was linked to (its own account has the address as its uid). */
const BY_ADDRESS = `SELECT ${COLUMNS} FROM users WHERE address = $1`;
/** Another account than $2 that the wallet $1 belongs to: its own, or one it was linked to. */
const WALLET_HOLDER = "SELECT id FROM users WHERE (uid = $1 OR address = $1) AND id <> $2";
const LINK = `UPDATE users SET address = $2, did = $3, updated_at = $4 WHERE id = $1 AND address IS NULL AND did IS NULL RETURNING ${COLUMNS}`;
/**
 * The next number is read in the insert itself; two gateways that read the same one collide on
 * the unique index, and DO NOTHING (no target: uid, number or email) lets the loser look again.
 * `WHERE true` keeps SQLite from reading ON CONFLICT as a join's ON.
 */
const INSERT = `INSERT INTO users (uid, number, email, password_hash, did, address, name, icon, points,
  browser_info, microblog_info, messenger_info, community_info, social_followed, created_at, updated_at)
  SELECT $1, COALESCE(MAX(number), $2) + 1, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15 FROM users WHERE true
  ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`;

/** Field name → column, for the SET list of an update. */
const COLUMN_OF: Record<keyof UserFields, string> = {
  email: "email",
  passwordHash: "password_hash",
  did: "did",
  address: "address",
  name: "name",
  icon: "icon",
  points: "points",
  browserInfo: "browser_info",
  microblogInfo: "microblog_info",
  messengerInfo: "messenger_info",
  communityInfo: "community_info",
  socialFollowed: "social_followed",
};
const JSON_FIELDS = new Set<keyof UserFields>(["browserInfo", "microblogInfo", "messengerInfo", "communityInfo"]);
/**
 * A lost race for a number costs one more try, and each round has a winner, so this bounds how
 * many accounts may be made at the same instant; more than that in a row is a fault.
 */
const INSERT_TRIES = 32;

type Raw = Omit<UserRow, "browserInfo" | "microblogInfo" | "messengerInfo" | "communityInfo" | "socialFollowed"> & {
  browserInfo: string | null;
  microblogInfo: string | null;
  messengerInfo: string | null;
  communityInfo: string | null;
  socialFollowed: boolean | number;
};

const parseInfo = (text: string | null) => (text === null ? null : (JSON.parse(text) as ProviderInfo));
const json = (value: ProviderInfo | null | undefined) => (value == null ? null : JSON.stringify(value));

function toUser(r: Raw): UserRow {
  return {
    ...r,
    browserInfo: parseInfo(r.browserInfo),
    microblogInfo: parseInfo(r.microblogInfo),
    messengerInfo: parseInfo(r.messengerInfo),
    communityInfo: parseInfo(r.communityInfo),
    socialFollowed: Boolean(r.socialFollowed),
  };
}

export function createUserService(ctx: Ctx): UserService {
  const { sql, now, config } = ctx;
  const admins = new Set(config.adminAddresses.map((a) => a.toLowerCase()));

  const one = async (text: string, key: string) => {
    const r = await sql.get<Raw>(text, [key]);
    return r && toUser(r);
  };
  const byUid = (uid: string) => one(BY_UID, uid);
  const byEmail = (email: string) => one(BY_EMAIL, email);
  /** The account of `uid`; for a wallet's address, the account it was linked to when it has none of its own. */
  const find = async (uid: string) => (await byUid(uid)) ?? (isAddress(uid, { strict: false }) ? await one(BY_ADDRESS, uid) : undefined);
  // D2: only a bare address uid is ever proven by a signature, so only those can be admin.
  const role = (user: UserRow) => (isAddress(user.uid, { strict: false }) && admins.has(user.uid.toLowerCase()) ? ("admin" as const) : ("user" as const));

  const update = async (id: number, fields: UserFields) => {
    const keys = (Object.keys(fields) as (keyof UserFields)[]).filter((k) => fields[k] !== undefined && k in COLUMN_OF);
    const params: (string | number | boolean | null)[] = [id, now()];
    const sets = keys.map((k) => {
      const v = fields[k];
      params.push(JSON_FIELDS.has(k) ? json(v as ProviderInfo | null) : (v as string | number | boolean | null));
      return `${COLUMN_OF[k]} = $${params.length}`;
    });
    const r = await sql.get<Raw>(`UPDATE users SET ${[...sets, "updated_at = $2"].join(", ")} WHERE id = $1 RETURNING ${COLUMNS}`, params);
    if (!r) throw new Error(`user ${id} vanished during an update`);
    return toUser(r);
  };

  async function insert(uid: string, f: UserFields): Promise<UserRow | undefined> {
    const r = await sql.get<Raw>(INSERT, [
      uid,
      FIRST_NUMBER - 1,
      f.email ?? null,
      f.passwordHash ?? null,
      f.did ?? null,
      f.address ?? null,
      f.name ?? "",
      f.icon ?? "",
      f.points ?? 0,
      json(f.browserInfo),
      json(f.microblogInfo),
      json(f.messengerInfo),
      json(f.communityInfo),
      f.socialFollowed ?? false,
      now(),
    ]);
    return r && toUser(r);
  }

  return {
    byUid,
    byEmail,
    async upsert(uid, { create = {}, refresh = {} }) {
      // No transaction: every step is one statement that holds whatever other gateways do, and a
      // step that loses a race looks again.
      for (let attempt = 0; attempt < INSERT_TRIES; attempt++) {
        const existing = await find(uid);
        if (existing) return Object.keys(refresh).length ? update(existing.id, refresh) : existing;
        const made = await insert(uid, { ...create, ...refresh });
        if (made) return made;
        const holder = create.email ? await byEmail(create.email) : undefined;
        if (holder) return holder;
      }
      throw new Error(`could not make an account for ${uid}: its number was taken ${INSERT_TRIES} times`);
    },
    update,
    async linkWallet(id, address, did) {
      const look = async (q: Queryable) => {
        const me = await q.get<Raw>(BY_ID, [id]);
        if (!me) throw new Error(`user ${id} vanished while linking a wallet`);
        if (me.address !== null || me.did !== null) return me.address === address && me.did === did ? { linked: toUser(me) } : { refused: "account-has-wallet" as const };
        if (await q.get(WALLET_HOLDER, [address, id])) return { refused: "wallet-taken" as const };
        return undefined;
      };
      try {
        // SERIALIZABLE (the default): two accounts linking one wallet at once cannot both see it free.
        return await sql.tx(async (tx) => {
          const seen = await look(tx);
          if (seen) return seen;
          const r = await tx.get<Raw>(LINK, [id, address, did, now()]);
          if (!r) throw new Error(`user ${id} changed while linking a wallet`);
          return { linked: toUser(r) };
        });
      } catch (err) {
        // The wallet's first sign-in made its own account between the look and the update (a
        // plain insert, which no serializable check sees): the unique index refused the update.
        const seen = await look(sql);
        if (seen && "refused" in seen) return seen;
        throw err;
      }
    },
    async require(uid) {
      const user = await byUid(uid);
      if (!user) throw fail("ACCOUNT_GONE");
      return user;
    },
    role,
    current(user) {
      return {
        uid: user.uid,
        ...(user.email ? { email: user.email } : {}),
        ...(user.name ? { username: user.name } : {}),
        role: role(user),
      };
    },
    info(user) {
      const info: UserInfo = {
        name: user.name,
        icon: user.icon,
        address: user.address ?? "",
        did: user.did ?? "",
        ...(user.email ? { email: user.email } : {}),
        points: user.points,
        social_info: user.socialFollowed,
      };
      for (const [column, field] of INFO_FIELDS) {
        const value = user[column];
        if (value) info[field] = value;
      }
      return info;
    },
  };
}
