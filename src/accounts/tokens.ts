/**
 * Access and refresh tokens (DESIGN.md D3): HS256 JWTs signed with the key in DATA_DIR/secrets,
 * claims `sub` (uid), `did` (when the account has one), `typ`, `jti`, `iat`, `exp`.
 *
 * Refresh rotates lazily: a refresh answers a new pair, the presented token stays usable until
 * its child is first used, and any other token of the session ("family") presented after that
 * is a replay that revokes the whole family. Refresh tokens are stored as keyed hashes only.
 *
 * @example
 *   const tokens = createTokenService(ctx, jwtKey)
 *   const pair = await tokens.issue(user, "evm", { source: "web" })
 *   const { uid, did } = await tokens.verifyAccessToken(pair.accessToken)
 */
import { and, eq, isNull } from "drizzle-orm";
import { SignJWT, errors as joseErrors, jwtVerify, type JWTPayload } from "jose";
import { refreshFamilies, refreshTokens, users } from "./schema.ts";
import { fail, type AccountErrorCode } from "./error-codes.ts";
import { keyedHash, safeEqual } from "./hash.ts";
import { enforce } from "./limits.ts";
import type { ClientInfo, Ctx, LoginMethod, TokenPair, UserRow } from "./types.ts";

export type TokenType = "access" | "refresh";

/** Why a token was refused; storage routes map this to their own 401. */
export class TokenError extends Error {
  override name = "TokenError";
  constructor(
    readonly reason: "missing" | "invalid" | "expired" | "wrong-type",
    message: string,
  ) {
    super(message);
  }
}

export interface AccessClaims {
  uid: string;
  did?: string;
}

/**
 * A check run before a session's refresh; false revokes the session. D3: a DID login's session
 * ends at refresh once the key that logged in is no longer valid for the DID.
 */
export type RefreshGuard = (session: { method: string; userId: number; uid: string; did: string | null; signer: string | null }) => Promise<boolean>;

export interface TokenService {
  issue(user: UserRow, method: LoginMethod, client?: ClientInfo): Promise<TokenPair>;
  /** `ip` counts the call against the per-IP refresh limit. */
  refresh(refreshToken: string, ip?: string): Promise<TokenPair>;
  /** Resolves with the claims of a valid `typ: access` token, or throws TokenError. */
  verifyAccessToken(token: string | undefined | null): Promise<AccessClaims>;
  revokeAll(userId: number, reason: string): void;
}

const REASON_CODES: Record<TokenError["reason"], AccountErrorCode> = {
  missing: "TOKEN_MISSING",
  invalid: "TOKEN_INVALID",
  expired: "TOKEN_EXPIRED",
  "wrong-type": "TOKEN_NOT_ACCESS",
};

/** The account API's answer to a TokenError. */
export const tokenFailure = (err: TokenError) => fail(REASON_CODES[err.reason]);

const newId = () => crypto.randomUUID();
const seconds = (ms: number) => Math.floor(ms / 1000);

export function createTokenService(ctx: Ctx, jwtKey: Uint8Array, guards: Partial<Record<LoginMethod, RefreshGuard>> = {}): TokenService {
  const { db, config, now } = ctx;
  const hashToken = (token: string) => keyedHash(jwtKey, "refresh-token", token);
  // Imported once: given raw bytes, jose would import the key again on every sign and verify.
  const hmacKey = crypto.subtle.importKey("raw", new Uint8Array(jwtKey), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);

  const sign = async (typ: TokenType, user: Pick<UserRow, "uid" | "did">, jti: string, issuedMs: number) => {
    const ttl = typ === "access" ? config.accessTokenTtl : config.refreshTokenTtl;
    const claims: JWTPayload = { typ, ...(user.did ? { did: user.did } : {}) };
    return new SignJWT(claims)
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setSubject(user.uid)
      .setJti(jti)
      .setIssuedAt(seconds(issuedMs))
      .setExpirationTime(seconds(issuedMs + ttl))
      .sign(await hmacKey);
  };

  async function decode(token: string | undefined | null, typ: TokenType) {
    if (!token) throw new TokenError("missing", "token is missing");
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, await hmacKey, { algorithms: ["HS256"], currentDate: new Date(now()) }));
    } catch (err) {
      if (err instanceof joseErrors.JWTExpired) throw new TokenError("expired", "token has expired");
      throw new TokenError("invalid", "token is invalid");
    }
    if (typeof payload.sub !== "string" || typeof payload.jti !== "string") throw new TokenError("invalid", "token lacks sub or jti");
    if (payload.typ !== typ) throw new TokenError("wrong-type", `token is not a ${typ} token`);
    return { sub: payload.sub, jti: payload.jti, did: typeof payload.did === "string" ? payload.did : undefined };
  }

  const revokeFamily = (familyId: string, reason: string) =>
    db
      .update(refreshFamilies)
      .set({ revokedAt: now(), revokedReason: reason })
      .where(and(eq(refreshFamilies.id, familyId), isNull(refreshFamilies.revokedAt)))
      .run();

  return {
    async issue(user, method, client) {
      const t = now();
      const familyId = newId();
      const accessId = newId();
      const refreshId = newId();
      const [accessToken, refreshToken] = await Promise.all([sign("access", user, accessId, t), sign("refresh", user, refreshId, t)]);
      db.transaction((tx) => {
        tx.insert(refreshFamilies)
          .values({ id: familyId, userId: user.id, headId: refreshId, method, source: client?.source ?? "", userAgent: client?.useragent ?? "", signer: client?.signer ?? null, createdAt: t })
          .run();
        tx.insert(refreshTokens)
          .values({ id: refreshId, familyId, parentId: null, tokenHash: hashToken(refreshToken), issuedAt: t, expiresAt: t + config.refreshTokenTtl })
          .run();
      });
      return { accessToken, refreshToken };
    },

    async refresh(presented, ip) {
      if (ip !== undefined) enforce(ctx, ctx.limits.refreshesPerIp, ip);
      let claims: Awaited<ReturnType<typeof decode>>;
      try {
        claims = await decode(presented, "refresh");
      } catch (err) {
        if (!(err instanceof TokenError)) throw err;
        throw fail(err.reason === "missing" ? "REFRESH_MISSING" : err.reason === "wrong-type" ? "TOKEN_NOT_REFRESH" : REASON_CODES[err.reason]);
      }
      const found = db
        .select({ token: refreshTokens, family: refreshFamilies, user: users })
        .from(refreshTokens)
        .innerJoin(refreshFamilies, eq(refreshFamilies.id, refreshTokens.familyId))
        .innerJoin(users, eq(users.id, refreshFamilies.userId))
        .where(eq(refreshTokens.id, claims.jti))
        .get();
      if (!found || !safeEqual(found.token.tokenHash, hashToken(presented))) throw fail("TOKEN_INVALID");
      if (found.family.revokedAt !== null) throw fail("REFRESH_REVOKED");

      const guard = guards[found.family.method as LoginMethod];
      if (guard && !(await guard({ method: found.family.method, userId: found.user.id, uid: found.user.uid, did: found.user.did, signer: found.family.signer }))) {
        revokeFamily(found.family.id, "login key no longer valid");
        throw fail("REFRESH_REVOKED");
      }

      const t = now();
      const childId = newId();
      const [accessToken, refreshToken] = await Promise.all([sign("access", found.user, newId(), t), sign("refresh", found.user, childId, t)]);
      // Re-read the family inside the transaction: another refresh may have moved its head while
      // this one was signing.
      const outcome = db.transaction((tx) => {
        const family = tx.select().from(refreshFamilies).where(eq(refreshFamilies.id, found.family.id)).get();
        if (!family || family.revokedAt !== null) return "revoked" as const;
        const { id, parentId } = found.token;
        if (id !== family.headId) {
          if (parentId !== family.headId) {
            tx.update(refreshFamilies).set({ revokedAt: t, revokedReason: "refresh token reused" }).where(eq(refreshFamilies.id, family.id)).run();
            return "reused" as const;
          }
          // First use of the head's child: it becomes the head, and every older token dies.
          tx.update(refreshFamilies).set({ headId: id }).where(eq(refreshFamilies.id, family.id)).run();
        }
        tx.insert(refreshTokens)
          .values({ id: childId, familyId: family.id, parentId: id, tokenHash: hashToken(refreshToken), issuedAt: t, expiresAt: t + config.refreshTokenTtl })
          .run();
        return "ok" as const;
      });
      if (outcome === "revoked") throw fail("REFRESH_REVOKED");
      if (outcome === "reused") {
        ctx.log.warn("refresh token reuse: session revoked", { uid: found.user.uid, family: found.family.id });
        throw fail("REFRESH_REUSED");
      }
      return { accessToken, refreshToken };
    },

    async verifyAccessToken(token) {
      const claims = await decode(token, "access");
      return { uid: claims.sub, ...(claims.did ? { did: claims.did } : {}) };
    },

    revokeAll(userId, reason) {
      db.update(refreshFamilies)
        .set({ revokedAt: now(), revokedReason: reason })
        .where(and(eq(refreshFamilies.userId, userId), isNull(refreshFamilies.revokedAt)))
        .run();
    },
  };
}
