/**
 * Accounts: finding or making them by uid, the current user (spec 2.11) and user info (2.12).
 *
 * @example
 *   const user = users.upsert("0xAbC…", { create: { address: "0xAbC…", did: "did:ethr:0x3d9:0xAbC…" } })
 *   users.info(user) // { name, icon, address, did, points, social_info, … }
 */
import { eq, sql } from "drizzle-orm";
import { isAddress } from "viem";
import { users } from "./schema.ts";
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
  byUid(uid: string): UserRow | undefined;
  byEmail(email: string): UserRow | undefined;
  /** Finds the account with `uid` (updating `refresh` fields) or makes it with the next number. */
  upsert(uid: string, fields: { create?: UserFields; refresh?: UserFields }): UserRow;
  update(id: number, fields: UserFields): UserRow;
  /** The account behind a verified token; a token of a vanished account is refused. */
  require(uid: string): UserRow;
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

export function createUserService(ctx: Ctx): UserService {
  const { db, now, config } = ctx;
  const admins = new Set(config.adminAddresses.map((a) => a.toLowerCase()));

  const byUid = (uid: string) => db.select().from(users).where(eq(users.uid, uid)).get();
  // D2: only a bare address uid is ever proven by a signature, so only those can be admin.
  const role = (user: UserRow) => (isAddress(user.uid, { strict: false }) && admins.has(user.uid.toLowerCase()) ? ("admin" as const) : ("user" as const));

  const update = (id: number, fields: UserFields) => {
    const row = db
      .update(users)
      .set({ ...fields, updatedAt: now() })
      .where(eq(users.id, id))
      .returning()
      .get();
    if (!row) throw new Error(`user ${id} vanished during an update`);
    return row;
  };

  return {
    byUid,
    byEmail: (email) => db.select().from(users).where(eq(users.email, email)).get(),
    upsert(uid, { create = {}, refresh = {} }) {
      // One synchronous transaction: bun:sqlite runs it whole, so the number sequence and the
      // uid's uniqueness cannot race.
      return db.transaction((tx) => {
        const existing = tx.select().from(users).where(eq(users.uid, uid)).get();
        if (existing) {
          return Object.keys(refresh).length ? update(existing.id, refresh) : existing;
        }
        const next = tx
          .select({ n: sql<number>`coalesce(max(${users.number}), ${FIRST_NUMBER - 1}) + 1` })
          .from(users)
          .get();
        const t = now();
        return tx
          .insert(users)
          .values({ ...create, ...refresh, uid, number: next?.n ?? FIRST_NUMBER, createdAt: t, updatedAt: t })
          .returning()
          .get();
      });
    },
    update,
    require(uid) {
      const user = byUid(uid);
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
