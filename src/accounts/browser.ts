/**
 * Browser wallet login (DESIGN.md D2, D12): the raw `Authorization` header is a JWT from the wallet
 * provider, verified against its JWKS, issuer and audience, and it must expire (`exp`, D14: a
 * token that never expires would log in for ever once leaked). The account's uid is
 * `browser:<sub>`: a provider's word about an address is not a signature, so it never becomes a bare address uid.
 */
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload } from "jose";
import { isAddress } from "viem";
import { fail } from "./error-codes.ts";
import { enforce } from "./limits.ts";
import type { ClientKey } from "../http/client-key.ts";
import type { TokenService } from "./tokens.ts";
import type { UserService } from "./users.ts";
import type { ClientInfo, Ctx, TokenPair } from "./types.ts";

export interface BrowserService {
  login(authorization: string | undefined, client: ClientInfo, from: ClientKey): Promise<TokenPair>;
}

/** jose failures that mean "this token is no good"; any other failure is the provider's outage. */
const TOKEN_FAULTS = new Set<string>([
  joseErrors.JWTExpired.code,
  joseErrors.JWTClaimValidationFailed.code,
  joseErrors.JWTInvalid.code,
  joseErrors.JWSInvalid.code,
  joseErrors.JWSSignatureVerificationFailed.code,
  joseErrors.JWKSNoMatchingKey.code,
  joseErrors.JWKSMultipleMatchingKeys.code,
  joseErrors.JOSEAlgNotAllowed.code,
  joseErrors.JOSENotSupported.code,
]);

/** Asymmetric algorithms only: a provider never shares a secret key with us. */
const ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"];

const claim = (payload: JWTPayload, ...names: string[]) => {
  for (const name of names) {
    const v = payload[name];
    if (typeof v === "string" && v) return v;
  }
  return "";
};

/** The first wallet address the provider states: `address`, `wallet_address` or `wallets[].address`. */
function statedAddress(payload: JWTPayload): string {
  const wallets = Array.isArray(payload.wallets) ? (payload.wallets as unknown[]) : [];
  const candidates = [payload.address, payload.wallet_address, ...wallets.map((w) => (w && typeof w === "object" ? (w as Record<string, unknown>).address : undefined))];
  const found = candidates.find((c): c is string => typeof c === "string" && isAddress(c, { strict: false }));
  return found ?? "";
}

export function createBrowserService(ctx: Ctx, deps: { tokens: TokenService; users: UserService }): BrowserService {
  const { config, now, limits, log } = ctx;
  const { browserJwksUrl: url, browserIssuer: issuer, browserAudience: audience } = config;
  // One key set for the server's life: jose caches its keys and refetches on an unknown key id.
  const jwks = url ? createRemoteJWKSet(new URL(url)) : undefined;

  return {
    async login(authorization, client, from) {
      if (!jwks || !issuer || !audience) throw fail("BROWSER_NOT_CONFIGURED");
      await enforce(ctx, limits.loginsPerIp, from);
      // The spec sends the token bare; a "Bearer " prefix is forgiven.
      const token = authorization?.replace(/^Bearer\s+/i, "").trim();
      if (!token) throw fail("BROWSER_TOKEN_MISSING");

      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, jwks, { issuer, audience, algorithms: ALGORITHMS, requiredClaims: ["exp"], currentDate: new Date(now()) }));
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (typeof code === "string" && TOKEN_FAULTS.has(code)) throw fail("BROWSER_TOKEN_INVALID", (err as Error).message);
        log.warn("browser wallet keys unavailable", { err: (err as Error).message });
        throw fail("BROWSER_JWKS_UNAVAILABLE");
      }
      if (!payload.sub) throw fail("BROWSER_TOKEN_INVALID", "the token has no subject");

      const username = claim(payload, "preferred_username", "username", "name", "nickname");
      const user = await deps.users.upsert(`browser:${payload.sub}`, {
        refresh: {
          name: username,
          icon: claim(payload, "picture", "profileImage", "avatar"),
          browserInfo: { browser_id: payload.sub, browser_username: username, browser_address: statedAddress(payload) },
        },
      });
      return deps.tokens.issue(user, "browser", client);
    },
  };
}
