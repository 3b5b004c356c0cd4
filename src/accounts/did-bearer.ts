/**
 * The DID of a `/v2` request's Bearer account. Access keys, session grants, age identities and
 * shares belong to a DID, so their routes refuse accounts without one (email, messenger, browser
 * logins) — each in its own words, given as `noDid`.
 *
 * @example
 *   const caller = didBearer(tokens, chainId, () => accountError("UNAUTHORIZED", "log in with a wallet"))
 *   const did = await caller(headers)
 */
import { bearerToken } from "../http/params.ts";
import { parseDid, type Did } from "../identity/did.ts";
import { TokenError, tokenFailure, type TokenService } from "./tokens.ts";

/** `why` says what was wrong when the token has a DID this gateway cannot take (another chain's). */
export function didBearer(tokens: Pick<TokenService, "verifyAccessToken">, chainId: number, noDid: (why?: string) => Error) {
  return async (headers: Record<string, string | undefined>): Promise<Did> => {
    let claims: { did?: string };
    try {
      claims = await tokens.verifyAccessToken(bearerToken(headers.authorization));
    } catch (err) {
      throw err instanceof TokenError ? tokenFailure(err) : err;
    }
    if (!claims.did) throw noDid();
    try {
      return parseDid(claims.did, chainId);
    } catch {
      throw noDid("the token's DID is not one of this gateway's chain");
    }
  };
}
