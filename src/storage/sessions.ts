/**
 * DID login (D4) and restricted calls (D5).
 *
 * Login: the time window is checked before any signature work; the signer must be allowed to
 * sign for the DID. A login opens (or resets) the session (did, token), and its timestamp must be
 * newer than that session's last accepted one (D14): each session's logins are monotonic, so a
 * captured login cannot be replayed, while two devices (two tokens) may log in in the same second.
 *
 * Restricted calls carry `requestID`: any id of the session not seen before and greater than
 * (highest seen − 64) is accepted, so parallel calls work; an id is claimed by a unique insert,
 * and only after its signature verified.
 */
import { and, desc, eq, lt, max, sql } from "drizzle-orm";
import type { Address, Hex, TypedDataDomain } from "viem";
import type { Db } from "../db/open.ts";
import { storageError } from "../http/errors.ts";
import { parseDid, type Did } from "../identity/did.ts";
import { isSignature, recoverLogin, recoverRequest } from "../identity/eip712.ts";
import type { DidResolver } from "../identity/resolver.ts";
import { sessionRequests, storageSessions } from "./schema.ts";

export const LOGIN_WINDOW_S = 60;
export const REQUEST_WINDOW = 64;

export interface LoginInput {
  did?: string;
  token?: string;
  timestamp?: string | number;
  signature?: string;
}

export interface RestrictedInput {
  did?: string;
  token?: string;
  requestID?: string | number;
  payload?: string;
  signature?: string;
}

const refuse = (why: string) => storageError.unauthorized(why);

/** The user's token: 16–64 bytes of hex, with or without 0x, stored lower-case with 0x. */
export function normalizeToken(token: string): Hex {
  const hex = token.trim().toLowerCase().replace(/^0x/, "");
  if (!/^[0-9a-f]+$/.test(hex) || hex.length % 2 || hex.length < 32 || hex.length > 128) throw refuse("token must be 16 to 64 bytes of hex");
  return `0x${hex}`;
}

const integer = (v: string | number | undefined, what: string): bigint => {
  const s = String(v ?? "").trim();
  if (!/^\d{1,16}$/.test(s) || !Number.isSafeInteger(Number(s))) throw refuse(`${what} must be a non-negative integer below 2^53`);
  return BigInt(s);
};

function did(value: string, chainId: number): Did {
  try {
    return parseDid(value, chainId);
  } catch (err) {
    throw refuse((err as Error).message);
  }
}

async function authorizedSigner(resolver: DidResolver, who: Did, recover: () => Promise<Address>) {
  let signer: Address;
  try {
    signer = await recover();
  } catch {
    throw refuse("signature cannot be verified");
  }
  if (!(await resolver.canSign(who, signer))) throw refuse("the signer is not the DID's owner or a valid delegate");
  return signer;
}

export function createSessions(deps: { db: Db; resolver: DidResolver; domain: TypedDataDomain; chainId: number; now?: () => number }) {
  const { db, resolver, domain, chainId } = deps;
  const nowS = () => Math.floor((deps.now ?? Date.now)() / 1000);

  async function login(input: LoginInput): Promise<{ did: Did; signer: Address }> {
    if (!input.did || !input.token || input.timestamp === undefined || input.timestamp === "" || !input.signature) throw refuse("Missing parameter");
    const timestamp = integer(input.timestamp, "timestamp");
    const drift = Number(timestamp) - nowS();
    if (drift > LOGIN_WINDOW_S) throw refuse("timestamp is in the future");
    if (drift < -LOGIN_WINDOW_S) throw refuse("login expired: signed more than 1 minute ago");
    const token = normalizeToken(input.token);
    const who = did(input.did, chainId);
    if (!isSignature(input.signature)) throw refuse("signature must be 65 bytes of 0x-hex");
    const signature = input.signature;
    const signer = await authorizedSigner(resolver, who, () => recoverLogin(domain, { did: input.did as string, token, timestamp }, signature));

    const at = Number(timestamp);
    db.transaction(
      (tx) => {
        // "Latest session" (GET /login) must be well defined when two tokens share a second: the
        // later login gets the later created_at, even within one millisecond.
        const tie = tx.select({ at: max(storageSessions.createdAt) }).from(storageSessions).where(and(eq(storageSessions.did, who.canonical), eq(storageSessions.timestamp, at))).get();
        const session = { timestamp: at, highestRequest: 0, createdAt: Math.max(Date.now(), (tie?.at ?? 0) + 1) };
        // One statement decides: a new session, or an existing one whose last login is older.
        // The (did, token) key makes two identical logins at once collide, and only one updates.
        const opened = tx
          .insert(storageSessions)
          .values({ did: who.canonical, token, ...session })
          .onConflictDoUpdate({ target: [storageSessions.did, storageSessions.token], set: session, setWhere: sql`${storageSessions.timestamp} < excluded.timestamp` })
          .returning({ did: storageSessions.did })
          .get();
        if (!opened) throw refuse("timestamp is not newer than this session's last login: replayed or out of order");
        tx.delete(sessionRequests).where(and(eq(sessionRequests.did, who.canonical), eq(sessionRequests.token, token))).run();
      },
      { behavior: "immediate" },
    );
    return { did: who, signer };
  }

  /** Login info (spec 2.2) of the DID's latest session. */
  function info(didParam: string | undefined) {
    if (!didParam) throw storageError.badRequest("did is required");
    let who: Did;
    try {
      who = parseDid(didParam, chainId);
    } catch (err) {
      throw storageError.badRequest((err as Error).message);
    }
    const s = db.select().from(storageSessions).where(eq(storageSessions.did, who.canonical)).orderBy(desc(storageSessions.timestamp), desc(storageSessions.createdAt)).get();
    if (!s) throw storageError.notFound("no login for this DID");
    return { token: s.token, timestamp: s.timestamp, requestID: String(s.highestRequest) };
  }

  /** Verifies a restricted call and claims its requestID. `caller` is the Bearer token's DID. */
  async function restricted(input: RestrictedInput, action: "upload" | "delete", caller: Did): Promise<bigint> {
    if (!input.did || !input.token || input.requestID === undefined || input.requestID === "" || input.payload === undefined || !input.signature) throw refuse("Missing parameter");
    const who = did(input.did, chainId);
    if (who.canonical !== caller.canonical) throw refuse("the signed did is not the Bearer token's DID");
    const token = normalizeToken(input.token);
    const requestID = integer(input.requestID, "requestID");
    if (requestID < 1n) throw refuse("requestID starts at 1 after a login");
    const session = () => db.select().from(storageSessions).where(and(eq(storageSessions.did, who.canonical), eq(storageSessions.token, token))).get();
    const open = session();
    if (!open) throw refuse("no session for this token: log in first");
    if (Number(requestID) <= open.highestRequest - REQUEST_WINDOW) throw refuse("requestID is too old");
    if (!isSignature(input.signature)) throw refuse("signature must be 65 bytes of 0x-hex");
    const signature = input.signature;
    const payload = input.payload;
    await authorizedSigner(resolver, who, () => recoverRequest(domain, { did: input.did as string, token, requestID, action, payload }, signature));

    db.transaction(
      (tx) => {
        // Read again: a login or other calls may have moved the session while we verified.
        const now = tx.select().from(storageSessions).where(and(eq(storageSessions.did, who.canonical), eq(storageSessions.token, token))).get();
        if (!now || now.timestamp !== open.timestamp) throw refuse("the session changed: log in again");
        if (Number(requestID) <= now.highestRequest - REQUEST_WINDOW) throw refuse("requestID is too old");
        const claimed = tx.insert(sessionRequests).values({ did: who.canonical, token, requestId: Number(requestID) }).onConflictDoNothing().returning().get();
        if (!claimed) throw refuse("requestID already used");
        const highest = Math.max(now.highestRequest, Number(requestID));
        tx.update(storageSessions).set({ highestRequest: highest }).where(and(eq(storageSessions.did, who.canonical), eq(storageSessions.token, token))).run();
        tx.delete(sessionRequests).where(and(eq(sessionRequests.did, who.canonical), eq(sessionRequests.token, token), lt(sessionRequests.requestId, highest - REQUEST_WINDOW))).run();
      },
      { behavior: "immediate" },
    );
    return requestID;
  }

  return { login, info, restricted };
}

export type Sessions = ReturnType<typeof createSessions>;
