/**
 * Access and refresh tokens (DESIGN.md D3): HS256 JWTs signed with the key in DATA_DIR/secrets,
 * claims `sub` (uid), `did` and `key` (when a login proved a key for the account's DID), `sid`
 * (an access token's session), `typ`, `jti`, `iat`, `exp`.
 *
 * Authority follows the registry (D21): a token acts for its DID only while `key`, the key that
 * signed in, may sign for it. Every use of an access token asks the resolver (cached, so a map
 * lookup), and so does every refresh (a refusal there ends the whole session): once the DID's owner
 * changes or a delegate is revoked, the old key's tokens stop within the resolver's cache time.
 *
 * Refresh rotates lazily: a refresh answers a new pair, the presented token stays usable until
 * its child is first used, and any other token of the session ("family") presented after that
 * is a replay that revokes the whole family. Refresh tokens are stored as keyed hashes only.
 * Gateways sharing a database (D16) move a family's head with one conditional update, so two
 * racing refreshes cannot both extend a family from tokens that exclude each other.
 *
 * Sessions end: a family lives at most `sessionMaxAge` from its login however often it is
 * refreshed (no token of it is signed to outlive that), and its user can list and end it (logout,
 * revoke). Access tokens carry their family as `sid`, and one of an ended family is refused at once
 * on the gateway that ended it and within `ENDED_SYNC_MS` on the others, which read the families
 * ended lately from the shared database that often (one indexed query, not one per request).
 *
 * @example
 *   const tokens = createTokenService(ctx, jwtKey)
 *   const pair = await tokens.issue(user, "evm", { source: "web" })
 *   const { uid, did } = await tokens.verifyAccessToken(pair.accessToken)
 */
import { SignJWT, errors as joseErrors, jwtVerify, type JWTPayload } from "jose";
import { getAddress, isAddress, type Address } from "viem";
import { InvalidDid, parseDid, type Did } from "../identity/did.ts";
import type { DidResolver } from "../identity/resolver.ts";
import { fail, type AccountErrorCode } from "./error-codes.ts";
import { keyedHash, safeEqual } from "./hash.ts";
import { enforce } from "./limits.ts";
import type { ClientKey } from "../http/client-key.ts";
import type { ClientInfo, Ctx, LoginMethod, TokenPair, UserRow } from "./types.ts";

export type TokenType = "access" | "refresh";

/** Why a token was refused; storage routes map this to their own 401. */
export class TokenError extends Error {
  override name = "TokenError";
  constructor(
    /** `bad-did`: the token names a DID this gateway cannot read; `key-revoked`: its key may no longer sign for its DID; `revoked`: its session ended. */
    readonly reason: "missing" | "invalid" | "expired" | "wrong-type" | "bad-did" | "key-revoked" | "revoked",
    message: string,
  ) {
    super(message);
  }
}

export interface AccessClaims {
  uid: string;
  did?: string;
  /** The key that signed in for `did`: it may sign for the DID (checked on every use). */
  key?: Address;
  /** The session (refresh family) the token belongs to; absent from tokens signed without one. */
  sid?: string;
}

/** One live session of an account, as GET /v2/auth/sessions answers it (times in Unix seconds). */
export interface SessionInfo {
  id: string;
  method: string;
  source: string;
  useragent: string;
  createdAt: number;
  lastUsedAt: number;
  /** When it ends unless refreshed again: the refresh token's lifetime after its last use, or its maximum age. */
  expiresAt: number;
  /** Whether the token that asked belongs to it. */
  current: boolean;
}

export interface TokenService {
  issue(user: UserRow, method: LoginMethod, client?: ClientInfo): Promise<TokenPair>;
  /** `from` (the client's key) counts the call against the per-client refresh limit. */
  refresh(refreshToken: string, from?: ClientKey): Promise<TokenPair>;
  /** Resolves with the claims of a valid `typ: access` token, or throws TokenError. */
  verifyAccessToken(token: string | undefined | null): Promise<AccessClaims>;
  revokeAll(userId: number, reason: string): Promise<void>;
  /** Ends the session of `token`: an access token (Bearer or bare) or a refresh token. */
  logout(token: string | undefined): Promise<void>;
  /** The account's live sessions, most recently used first (at most `SESSIONS_LISTED`). */
  sessions(userId: number, current: string | undefined): Promise<SessionInfo[]>;
  /** Ends one of the account's sessions; SESSION_UNKNOWN when it has no live one of that id. */
  revokeSession(userId: number, sessionId: string): Promise<void>;
}

const REASON_CODES: Record<TokenError["reason"], AccountErrorCode> = {
  missing: "TOKEN_MISSING",
  invalid: "TOKEN_INVALID",
  expired: "TOKEN_EXPIRED",
  "wrong-type": "TOKEN_NOT_ACCESS",
  "bad-did": "TOKEN_INVALID",
  "key-revoked": "TOKEN_KEY_REVOKED",
  revoked: "SESSION_ENDED",
};

/** The account API's answer to a TokenError. */
export const tokenFailure = (err: TokenError) => fail(REASON_CODES[err.reason]);

/** How stale a gateway's list of ended sessions may be: how long another gateway's logout may
 * leave an access token of that session working here. */
export const ENDED_SYNC_MS = 5_000;
/** Each read of ended sessions goes this far behind the last one's start: a revocation committed
 * late, or stamped by a gateway whose clock lags, is still seen. */
const ENDED_OVERLAP_MS = 60_000;
/** The session list answers the most recently used sessions, this many at most. */
export const SESSIONS_LISTED = 100;

const newId = () => crypto.randomUUID();

const INSERT_FAMILY = `INSERT INTO refresh_families (id, user_id, head_id, method, source, user_agent, signer, created_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`;
const INSERT_TOKEN = "INSERT INTO refresh_tokens (id, family_id, parent_id, token_hash, issued_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)";
/** The presented token with its session and account (the account's fields as the user row's). */
const FIND_TOKEN = `SELECT t.token_hash AS "tokenHash", t.parent_id AS "parentId", f.id AS "familyId", f.method, f.signer,
  f.created_at AS "createdAt", f.revoked_at AS "revokedAt", u.id AS "userId", u.uid, u.did
  FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id JOIN users u ON u.id = f.user_id WHERE t.id = $1`;
/**
 * A refresh with token $2 (child of $3) may go on when the family's head is the token itself or
 * its parent; it then becomes the head. One statement: on PostgreSQL a racing update of the same
 * family waits for this one and re-checks the head it left.
 */
const ADVANCE_HEAD = "UPDATE refresh_families SET head_id = $2, last_used_at = $4 WHERE id = $1 AND revoked_at IS NULL AND (head_id = $2 OR head_id = $3)";
const REVOKE_FAMILY = "UPDATE refresh_families SET revoked_at = $2, revoked_reason = $3 WHERE id = $1 AND revoked_at IS NULL";
const REVOKE_USER = "UPDATE refresh_families SET revoked_at = $2, revoked_reason = $3 WHERE user_id = $1 AND revoked_at IS NULL RETURNING id";
const REVOKE_OWN = "UPDATE refresh_families SET revoked_at = $3, revoked_reason = $4 WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL";
/** Families ended since $1: their access tokens are refused until those expire. */
const ENDED_SINCE = `SELECT id, revoked_at AS "revokedAt" FROM refresh_families WHERE revoked_at >= $1`;
/** $2: started after (maximum age), $3: last used after (refresh token lifetime). */
const LIVE_SESSIONS = `SELECT id, method, source, user_agent AS "userAgent", created_at AS "createdAt", COALESCE(last_used_at, created_at) AS "lastUsedAt"
  FROM refresh_families WHERE user_id = $1 AND revoked_at IS NULL AND created_at > $2 AND COALESCE(last_used_at, created_at) > $3
  ORDER BY COALESCE(last_used_at, created_at) DESC, id LIMIT ${SESSIONS_LISTED}`;

interface Found {
  tokenHash: string;
  parentId: string | null;
  familyId: string;
  method: string;
  signer: string | null;
  createdAt: number;
  revokedAt: number | null;
  userId: number;
  uid: string;
  did: string | null;
}
const seconds = (ms: number) => Math.floor(ms / 1000);

/** The session a token is signed for: its family, and when the family ends. */
interface Session {
  id: string;
  endsAt: number;
}

/** For whom a token acts: a DID and the key that signed in for it. */
interface Authority {
  did: string;
  key: Address;
}

/**
 * The key a session signed in with: the one its login recorded, or for a wallet sign-in (EIP-4361)
 * that recorded none, the address that signed, which is its uid. No key, no authority.
 */
function sessionKey(found: Pick<Found, "signer" | "method" | "uid">): Address | undefined {
  const key = found.signer ?? (found.method === "evm" ? found.uid : null);
  return key !== null && isAddress(key, { strict: false }) ? getAddress(key) : undefined;
}

/** Whether the session's login signed with a key: a wallet's sign-in or a DID login (whose key a row of an older version may not have recorded). */
const provedAKey = (found: Pick<Found, "signer" | "method">) => found.signer !== null || found.method === "evm" || found.method === "did";

/**
 * Access tokens verified lately, by their text. The HMAC and the claims of a token that verified
 * once need not be checked again on every request (≈ 25 µs each): a hit is checked against the
 * clock as jose does, and its DID's authority (parsed once, kept with it) is asked of the
 * resolver's cache every time, as is whether its session has ended. Only valid access tokens
 * enter, so the size is bounded by the tokens issued; past it the oldest entry goes.
 */
const VERIFIED_MAX = 4096;

/**
 * `resolver` says who may sign for a DID now: a token acts for its DID only while its key may.
 */
export function createTokenService(ctx: Ctx, jwtKey: Uint8Array, resolver: DidResolver): TokenService {
  const { sql, config, now } = ctx;
  const hashToken = (token: string) => keyedHash(jwtKey, "refresh-token", token);
  // Imported once: given raw bytes, jose would import the key again on every sign and verify.
  const hmacKey = crypto.subtle.importKey("raw", new Uint8Array(jwtKey), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);

  /** `session`: the family the token belongs to (an access token names it) and when it ends (no token outlives it). */
  const sign = async (typ: TokenType, uid: string, authority: Authority | undefined, jti: string, issuedMs: number, session: Session) => {
    const ttl = typ === "access" ? config.accessTokenTtl : config.refreshTokenTtl;
    const claims: JWTPayload = { typ, ...(authority ? { did: authority.did, key: authority.key } : {}), ...(typ === "access" ? { sid: session.id } : {}) };
    return new SignJWT(claims)
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setSubject(uid)
      .setJti(jti)
      .setIssuedAt(seconds(issuedMs))
      .setExpirationTime(seconds(Math.min(issuedMs + ttl, session.endsAt)))
      .sign(await hmacKey);
  };

  /** The claims of a token this server signed, of type `typ` when one is asked for. */
  async function decode(token: string | undefined | null, typ?: TokenType) {
    if (!token) throw new TokenError("missing", "token is missing");
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, await hmacKey, { algorithms: ["HS256"], currentDate: new Date(now()) }));
    } catch (err) {
      if (err instanceof joseErrors.JWTExpired) throw new TokenError("expired", "token has expired");
      throw new TokenError("invalid", "token is invalid");
    }
    if (typeof payload.sub !== "string" || typeof payload.jti !== "string") throw new TokenError("invalid", "token lacks sub or jti");
    if (typ !== undefined && payload.typ !== typ) throw new TokenError("wrong-type", `token is not a ${typ} token`);
    const text = (v: unknown) => (typeof v === "string" ? v : undefined);
    return { sub: payload.sub, jti: payload.jti, typ: payload.typ, did: text(payload.did), key: text(payload.key), sid: text(payload.sid), exp: payload.exp };
  }

  /** Whether `key` may sign for `did` now; a DID this gateway cannot read has no one who may. */
  async function mayAct(did: string, key: Address): Promise<boolean> {
    let who: Did;
    try {
      who = parseDid(did, config.chainId);
    } catch (err) {
      if (err instanceof InvalidDid) return false;
      throw err;
    }
    return resolver.canSign(who, key);
  }

  /** An access token's DID (parsed) and key, kept with its claims so that each use asks the resolver alone. */
  interface Verified {
    claims: AccessClaims;
    exp: number;
    act?: { did: Did; key: Address };
  }
  const verified = new Map<string, Verified>();

  /** The claims of a verified token, once its key may still sign for its DID and its session goes on. */
  async function authorized(entry: Verified): Promise<AccessClaims> {
    if (entry.act && !(await resolver.canSign(entry.act.did, entry.act.key))) {
      throw new TokenError("key-revoked", "the key this token was issued to may no longer sign for its DID");
    }
    if (entry.claims.sid !== undefined && (await endedSessions()).has(entry.claims.sid)) throw new TokenError("revoked", "the token's session has ended");
    return entry.claims;
  }

  /** What a freshly verified access token acts for: its DID, parsed, and its key. */
  function actsFor(claims: { did?: string; key?: string }): Verified["act"] {
    if (claims.did === undefined) return undefined;
    let did: Did;
    try {
      did = parseDid(claims.did, config.chainId);
    } catch {
      throw new TokenError("bad-did", "the token's DID is not one of this gateway's chain");
    }
    // Every token this gateway issues with a DID names its key; one that names none stands for the
    // DID's own address, which may sign only while it owns the DID.
    if (claims.key === undefined) return { did, key: did.address };
    if (!isAddress(claims.key, { strict: false })) throw new TokenError("invalid", "token's key is not an address");
    return { did, key: getAddress(claims.key) };
  }

  /** Sessions ended lately (id → when), as this gateway last read them from the shared database. */
  const ended = new Map<string, number>();
  let endedReadAt = Number.NEGATIVE_INFINITY;
  let endedReading: Promise<void> | undefined;
  /** The ended sessions, read again when the last read is `ENDED_SYNC_MS` old (one read for all waiting). */
  async function endedSessions(): Promise<ReadonlyMap<string, number>> {
    if (now() - endedReadAt < ENDED_SYNC_MS) return ended;
    endedReading ??= (async () => {
      const t = now();
      // An access token outlives its session's end by at most its own lifetime.
      const horizon = t - config.accessTokenTtl - ENDED_OVERLAP_MS;
      try {
        for (const row of await sql.all<{ id: string; revokedAt: number }>(ENDED_SINCE, [Math.max(endedReadAt - ENDED_OVERLAP_MS, horizon)])) ended.set(row.id, row.revokedAt);
        for (const [id, at] of ended) if (at < horizon) ended.delete(id);
        endedReadAt = t;
      } finally {
        endedReading = undefined;
      }
    })();
    await endedReading;
    return ended;
  }

  /** Ends a session, here at once (other gateways read it within ENDED_SYNC_MS). */
  async function revokeFamily(familyId: string, reason: string) {
    const t = now();
    await sql.run(REVOKE_FAMILY, [familyId, t, reason]);
    ended.set(familyId, t);
  }

  return {
    async issue(user, method, client) {
      const t = now();
      const familyId = newId();
      const accessId = newId();
      const refreshId = newId();
      // A DID only with the key that proved it: a login that signed nothing acts for no DID.
      const signer = client?.signer !== undefined && isAddress(client.signer, { strict: false }) ? getAddress(client.signer) : undefined;
      const authority = user.did && signer ? { did: user.did, key: signer } : undefined;
      const session = { id: familyId, endsAt: t + config.sessionMaxAge };
      const [accessToken, refreshToken] = await Promise.all([
        sign("access", user.uid, authority, accessId, t, session),
        sign("refresh", user.uid, authority, refreshId, t, session),
      ]);
      await sql.tx(
        async (tx) => {
          await tx.run(INSERT_FAMILY, [familyId, user.id, refreshId, method, client?.source ?? "", client?.useragent ?? "", client?.signer ?? null, t]);
          await tx.run(INSERT_TOKEN, [refreshId, familyId, null, hashToken(refreshToken), t, Math.min(t + config.refreshTokenTtl, session.endsAt)]);
        },
        // Two inserts of new rows: nothing read, so nothing to serialise.
        { isolation: "read committed" },
      );
      return { accessToken, refreshToken };
    },

    async refresh(presented, from) {
      if (from !== undefined) await enforce(ctx, ctx.limits.refreshesPerIp, from);
      let claims: Awaited<ReturnType<typeof decode>>;
      try {
        claims = await decode(presented, "refresh");
      } catch (err) {
        if (!(err instanceof TokenError)) throw err;
        throw fail(err.reason === "missing" ? "REFRESH_MISSING" : err.reason === "wrong-type" ? "TOKEN_NOT_REFRESH" : REASON_CODES[err.reason]);
      }
      const found = await sql.get<Found>(FIND_TOKEN, [claims.jti]);
      if (!found || !safeEqual(found.tokenHash, hashToken(presented))) throw fail("TOKEN_INVALID");
      if (found.revokedAt !== null) throw fail("REFRESH_REVOKED");
      // However often it is refreshed, a session ends at its maximum age (a token signed before
      // that limit existed may still say otherwise).
      const session = { id: found.familyId, endsAt: found.createdAt + config.sessionMaxAge };
      if (now() >= session.endsAt) throw fail("SESSION_EXPIRED");

      // An account with a DID refreshes only while the key that signed in may sign for it (D3, D21):
      // once the DID's owner changes or the delegate goes, the whole session ends here. A session
      // that signed nothing (an email code, a password, a messenger: an account that gained its DID
      // by a wallet link after it began) never acted for the DID and goes on acting for none.
      let authority: Authority | undefined;
      if (found.did !== null && provedAKey(found)) {
        const key = sessionKey(found);
        if (key === undefined || !(await mayAct(found.did, key))) {
          await revokeFamily(found.familyId, "login key no longer valid");
          throw fail("REFRESH_REVOKED", "the key this session signed in with may no longer sign for its DID");
        }
        authority = { did: found.did, key };
      }

      const t = now();
      const childId = newId();
      const [accessToken, refreshToken] = await Promise.all([
        sign("access", found.uid, authority, newId(), t, session),
        sign("refresh", found.uid, authority, childId, t, session),
      ]);
      // Another refresh may have moved the head while this one was signing: the head moves only
      // if it is still this token or its parent, and the child is written in the same transaction.
      const outcome = await sql.tx(
        async (tx) => {
          const id = claims.jti;
          if ((await tx.run(ADVANCE_HEAD, [found.familyId, id, found.parentId ?? id, t])) === 0) {
            // Revoked meanwhile, or the head is neither this token nor its parent: a replay.
            return (await tx.run(REVOKE_FAMILY, [found.familyId, t, "refresh token reused"])) === 0 ? ("revoked" as const) : ("reused" as const);
          }
          await tx.run(INSERT_TOKEN, [childId, found.familyId, id, hashToken(refreshToken), t, Math.min(t + config.refreshTokenTtl, session.endsAt)]);
          return "ok" as const;
        },
        // Conditional updates only: each re-checks its row after waiting for a racing writer.
        { isolation: "read committed" },
      );
      if (outcome === "revoked") throw fail("REFRESH_REVOKED");
      if (outcome === "reused") {
        ended.set(found.familyId, t);
        ctx.log.warn("refresh token reuse: session revoked", { uid: found.uid, family: found.familyId });
        throw fail("REFRESH_REUSED");
      }
      return { accessToken, refreshToken };
    },

    async verifyAccessToken(token) {
      const hit = token ? verified.get(token) : undefined;
      if (hit) {
        // jose's test: expired once `exp` <= now, in whole seconds.
        if (hit.exp > seconds(now())) return authorized(hit);
        verified.delete(token as string);
        throw new TokenError("expired", "token has expired");
      }
      const claims = await decode(token, "access");
      const act = actsFor(claims);
      const answer: AccessClaims = Object.freeze({ uid: claims.sub, ...(act ? { did: claims.did, key: act.key } : {}), ...(claims.sid ? { sid: claims.sid } : {}) });
      const entry: Verified = { claims: answer, exp: claims.exp ?? Number.POSITIVE_INFINITY, ...(act ? { act } : {}) };
      if (claims.exp !== undefined) {
        if (verified.size >= VERIFIED_MAX) verified.delete(verified.keys().next().value as string);
        verified.set(token as string, entry);
      }
      return authorized(entry);
    },

    async revokeAll(userId, reason) {
      const t = now();
      for (const { id } of await sql.all<{ id: string }>(REVOKE_USER, [userId, t, reason])) ended.set(id, t);
    },

    async logout(presented) {
      const token = presented?.trim().replace(/^Bearer\s+/i, "") ?? "";
      let claims: Awaited<ReturnType<typeof decode>>;
      try {
        claims = await decode(token);
      } catch (err) {
        throw err instanceof TokenError ? tokenFailure(err) : err;
      }
      let familyId: string;
      if (claims.typ === "access") {
        if (claims.sid === undefined) throw fail("TOKEN_NO_SESSION");
        familyId = claims.sid;
      } else if (claims.typ === "refresh") {
        const found = await sql.get<Found>(FIND_TOKEN, [claims.jti]);
        if (!found || !safeEqual(found.tokenHash, hashToken(token))) throw fail("TOKEN_INVALID");
        familyId = found.familyId;
      } else {
        throw fail("TOKEN_INVALID");
      }
      // An ended session stays ended: logging out twice is not an error.
      await revokeFamily(familyId, "logged out");
    },

    async sessions(userId, current) {
      const t = now();
      const rows = await sql.all<{ id: string; method: string; source: string; userAgent: string; createdAt: number; lastUsedAt: number }>(LIVE_SESSIONS, [
        userId,
        t - config.sessionMaxAge,
        t - config.refreshTokenTtl,
      ]);
      return rows.map((r) => ({
        id: r.id,
        method: r.method,
        source: r.source,
        useragent: r.userAgent,
        createdAt: seconds(r.createdAt),
        lastUsedAt: seconds(r.lastUsedAt),
        expiresAt: seconds(Math.min(r.lastUsedAt + config.refreshTokenTtl, r.createdAt + config.sessionMaxAge)),
        current: r.id === current,
      }));
    },

    async revokeSession(userId, sessionId) {
      const t = now();
      if ((await sql.run(REVOKE_OWN, [sessionId, userId, t, "revoked by its user"])) === 0) throw fail("SESSION_UNKNOWN");
      ended.set(sessionId, t);
    },
  };
}
