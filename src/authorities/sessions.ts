/**
 * DID login (D4) and restricted calls (D5).
 *
 * Login: the time window is checked before any signature work; the signer must be allowed to
 * sign for the DID. A login opens a new session (did, token): a token that already opened one is
 * refused, so a captured login cannot be replayed, and no login ever resets a session's used
 * requestIDs (were it to, every restricted call signed under that token could be sent again). Each
 * login brings a fresh token; two devices (two tokens) may log in in the same second.
 *
 * Restricted calls carry `requestID`: any id of the session not seen before and greater than
 * (highest seen − 64) is accepted, so parallel calls work; an id is claimed by a unique insert,
 * and only after its signature verified. Every write to a session runs after its row is locked
 * (or in the one statement that makes it), so two gateways that see one requestID at the same
 * moment accept it once (D16).
 */
import type { Address, Hex, TypedDataDomain } from "viem";
import { type Look, looks, type Queryable, type Sql, together } from "../db/sql.ts";
import { failure } from "../failure.ts";
import { parseDid, type Did } from "../identity/did.ts";
import { isSignature, type RequestAction } from "../identity/eip712.ts";
import { requestSigner } from "../identity/request-signer.ts";
import type { DidResolver } from "../identity/resolver.ts";
import { recoverLogin } from "../identity/signer.ts";
import type { GrantAbility } from "../sdk/grants.ts";

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

const LATEST_AT = "SELECT MAX(created_at) AS at FROM storage_sessions WHERE did = $1 AND timestamp = $2";
// One statement decides: a new session, or none when the token has had one (sessions are never
// deleted, so a token is used once for ever). The (did, token) key makes two logins with one token
// at once collide, and only one opens.
const OPEN = `INSERT INTO storage_sessions (did, token, timestamp, highest_request, created_at) VALUES ($1, $2, $3, 0, $4)
  ON CONFLICT (did, token) DO NOTHING RETURNING did`;
const LATEST = `SELECT token, timestamp, highest_request AS "highestRequest" FROM storage_sessions WHERE did = $1 ORDER BY timestamp DESC, created_at DESC LIMIT 1`;
// A call's look (`check`) also asks whether its id is claimed: a replay is refused before an
// upload's body is read, though an upload claims its id only where it records the file. Scalar
// expressions (db/sql.ts Look): null without a session.
const SESSION_LOOK = {
  timestamp: "(SELECT timestamp FROM storage_sessions WHERE did = $1 AND token = $2)",
  highestRequest: "(SELECT highest_request FROM storage_sessions WHERE did = $1 AND token = $2)",
  claimed: "EXISTS (SELECT 1 FROM session_requests WHERE did = $1 AND token = $2 AND request_id = $3)",
};
const CLAIM = "INSERT INTO session_requests (did, token, request_id) VALUES ($1, $2, $3) ON CONFLICT (did, token, request_id) DO NOTHING RETURNING request_id";
// The session's row lock and its read in one statement: raises the highest id (never lowers it)
// and answers the row as raised. An id too old for the highest before the raise is too old for
// the one after it: a raise moves the highest to that very id, never past it.
const RAISE = `UPDATE storage_sessions SET highest_request = CASE WHEN highest_request < $3 THEN $3 ELSE highest_request END WHERE did = $1 AND token = $2
  RETURNING timestamp, highest_request AS "highestRequest"`;
const PRUNE = "DELETE FROM session_requests WHERE did = $1 AND token = $2 AND request_id < $3";
/** Ids below the window are deleted when a call's id crosses a multiple of this above the highest
 * its verify read: a statement on one call in 16, not on each, and at most
 * REQUEST_WINDOW + PRUNE_EVERY ids kept per session, whatever ids its calls use — the first call
 * to commit past each multiple read a highest below it, so it prunes. */
const PRUNE_EVERY = 16;

type SessionRow = { timestamp: number; highestRequest: number };

const refuse = (why: string) => failure("unauthenticated", why);

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

/**
 * Opens the session (did, token) at `at` (Unix seconds); false when that token has had a session
 * already (a replayed login, or a client that reuses its token: a token opens once, for ever). The caller has checked that
 * whoever asks may open it: a login's signature, or a session grant (src/grants), which opens a
 * session of a fresh token for its key so that the key never signs a login.
 */
export async function openSession(sql: Sql, who: Did, token: Hex, at: number): Promise<boolean> {
  const key = who.canonical;
  return sql.tx(async (tx) => {
    // "Latest session" (GET /login) must be well defined when two tokens share a second: the
    // later login gets the later created_at, even within one millisecond.
    const tie = await tx.get<{ at: number | null }>(LATEST_AT, [key, at]);
    return (await tx.get(OPEN, [key, token, at, Math.max(Date.now(), (tie?.at ?? 0) + 1)])) !== undefined;
  });
}

/**
 * A console's session key, granted by the DID's wallet (D19, src/grants): asked only whether it
 * may sign one of the abilities a grant can carry, never for anything else.
 */
export interface SessionKeys {
  allows(did: Did, signer: Address, ability: GrantAbility): Promise<boolean>;
}

/** The restricted actions a session key may sign, when its grant says so (D19): never "keys" or "age", and logins never ask. */
const GRANTABLE: ReadonlySet<RequestAction & GrantAbility> = new Set(["upload", "delete"]);
const grantable = (action: RequestAction): action is RequestAction & GrantAbility => GRANTABLE.has(action as RequestAction & GrantAbility);

async function authorizedSigner(resolver: DidResolver, who: Did, recover: () => Promise<Address>, granted?: { keys: SessionKeys; ability: GrantAbility }) {
  let signer: Address;
  try {
    signer = await recover();
  } catch {
    throw refuse("signature cannot be verified");
  }
  if (!(await resolver.canSign(who, signer)) && !(await granted?.keys.allows(who, signer, granted.ability)))
    throw refuse("the signer is not the DID's owner or a valid delegate, nor a session key with a live grant for this (a grant ends at its expiry or when revoked)");
  return signer;
}

export function createSessions(deps: { sql: Sql; resolver: DidResolver; domain: TypedDataDomain; chainId: number; now?: () => number; sessionKeys?: SessionKeys }) {
  const { sql, resolver, domain, chainId } = deps;
  const signerOfRequest = requestSigner(domain);
  const nowS = () => Math.floor((deps.now ?? Date.now)() / 1000);

  /** `signed` runs once the signature proves a key that may sign for the DID, before the session opens (a limit per DID counts there). */
  async function login(input: LoginInput, signed?: (who: Did) => Promise<void>): Promise<{ did: Did; signer: Address }> {
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
    await signed?.(who);

    if (!(await openSession(sql, who, token, Number(timestamp)))) {
      throw refuse("this token was already used to log in (a replayed login, or a client that reuses its token): sign a login with a fresh random token");
    }
    return { did: who, signer };
  }

  /** Login info (spec 2.2) of the DID's latest session. */
  async function info(didParam: string | undefined) {
    if (!didParam) throw failure("bad-input", "did is required");
    let who: Did;
    try {
      who = parseDid(didParam, chainId);
    } catch (err) {
      throw failure("bad-input", (err as Error).message);
    }
    const s = await sql.get<{ token: string; timestamp: number; highestRequest: number }>(LATEST, [who.canonical]);
    if (!s) throw failure("not-found", "no login for this DID");
    return { token: s.token, timestamp: s.timestamp, requestID: String(s.highestRequest) };
  }

  /**
   * Verifies a restricted call (`caller` is the Bearer token's DID) without claiming it yet: its
   * signature now, and `look`, the read of its session (a call without one, with an id too old or
   * already claimed, is refused when the look is read). The caller reads the look, alone or with
   * others in one statement (db/sql.ts `looks`): an upload reads it with its voucher's and its
   * quota's before the body. Answers its id, the key that signed (D18 records it with an access
   * key) and `claim`, which claims the requestID in the caller's transaction (an upload's is the
   * one that records its file, with its voucher's claim), once the look was read. A call is
   * accepted once claimed.
   */
  async function check(input: RestrictedInput, action: RequestAction, caller: Did): Promise<{ requestID: bigint; signer: Address; look: Look<void>; claim(tx: Queryable): Promise<void> }> {
    if (!input.did || !input.token || input.requestID === undefined || input.requestID === "" || input.payload === undefined || !input.signature) throw refuse("Missing parameter");
    const who = did(input.did, chainId);
    if (who.canonical !== caller.canonical) throw refuse("the signed did is not the Bearer token's DID");
    const token = normalizeToken(input.token);
    const requestID = integer(input.requestID, "requestID");
    if (requestID < 1n) throw refuse("requestID starts at 1 after a login");
    const id = Number(requestID);
    if (!isSignature(input.signature)) throw refuse("signature must be 65 bytes of 0x-hex");
    const signature = input.signature;
    const payload = input.payload;
    const granted = grantable(action) && deps.sessionKeys ? { keys: deps.sessionKeys, ability: action } : undefined;
    const signer = await authorizedSigner(resolver, who, async () => signerOfRequest({ did: input.did as string, token, requestID, action, payload }, signature), granted);

    /** The session as the look read it. */
    let open: SessionRow | undefined;
    const look: Look<void> = {
      columns: SESSION_LOOK,
      params: [who.canonical, token, id],
      read(row) {
        if (row.timestamp === null || row.timestamp === undefined) throw refuse("no session for this token: log in first");
        const seen = { timestamp: Number(row.timestamp), highestRequest: Number(row.highestRequest) };
        if (id <= seen.highestRequest - REQUEST_WINDOW) throw refuse("requestID is too old");
        if (row.claimed === true || Number(row.claimed) === 1) throw refuse("requestID already used");
        open = seen;
      },
    };

    /**
     * Every read-modify-write here follows the session's row lock, which the raise takes first:
     * READ COMMITTED suffices (D16). The statements go together (one round trip on PostgreSQL,
     * where the session's calls wait for each other at the lock): the claim and the prune need
     * nothing the raise answers (the prune keeps the window below this id), and a refusal after
     * them rolls them back with the transaction.
     */
    async function claim(tx: Queryable) {
      if (!open) throw new Error("a restricted call's session was not looked at before its claim");
      const openedAt = open.timestamp;
      const prunes = Math.floor(id / PRUNE_EVERY) > Math.floor(open.highestRequest / PRUNE_EVERY);
      // The row as it is now, locked: a login or other calls may have moved the session while we
      // verified, and none can until this transaction ends.
      const [now, claimed] = await together(
        tx.get<SessionRow>(RAISE, [who.canonical, token, id]),
        tx.get(CLAIM, [who.canonical, token, id]),
        prunes ? tx.run(PRUNE, [who.canonical, token, id - REQUEST_WINDOW]) : undefined,
      );
      if (!now || now.timestamp !== openedAt) throw refuse("the session changed: log in again");
      if (id <= now.highestRequest - REQUEST_WINDOW) throw refuse("requestID is too old");
      if (!claimed) throw refuse("requestID already used");
    }
    return { requestID, signer, look, claim };
  }

  /** `check`, its look read by itself. */
  async function verify(input: RestrictedInput, action: RequestAction, caller: Did): Promise<{ requestID: bigint; signer: Address; claim(tx: Queryable): Promise<void> }> {
    const checked = await check(input, action, caller);
    await looks(sql, checked.look);
    return checked;
  }

  /** Verifies a restricted call and claims its requestID in a transaction of its own. */
  async function restricted(input: RestrictedInput, action: RequestAction, caller: Did): Promise<{ requestID: bigint; signer: Address }> {
    const { requestID, signer, claim } = await verify(input, action, caller);
    await sql.tx(claim, { isolation: "read committed" });
    return { requestID, signer };
  }

  return { login, info, check, verify, restricted };
}

export type Sessions = ReturnType<typeof createSessions>;
