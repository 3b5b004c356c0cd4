/**
 * The Bearer guard of storage routes (spec 5): the account API's access token, which must belong
 * to an account with a DID (D2). Failures are the spec's 401s.
 */
import type { TokenService } from "../accounts/tokens.ts";
import { TokenError } from "../accounts/tokens.ts";
import { storageError } from "../http/errors.ts";
import { bearerToken } from "../http/params.ts";
import { parseDid, type Did } from "../identity/did.ts";

export interface Caller {
  uid: string;
  did: Did;
}

const REASONS: Record<TokenError["reason"], string> = {
  missing: "Token is null",
  invalid: "invalid token",
  expired: "invalid token: expired",
  "wrong-type": "invalid token payload: not an access token",
};

export async function requireCaller(request: Request, tokens: Pick<TokenService, "verifyAccessToken">, chainId: number): Promise<Caller> {
  const token = bearerToken(request.headers.get("authorization"));
  if (!token) throw storageError.unauthorized("Token is null");
  let claims: Awaited<ReturnType<TokenService["verifyAccessToken"]>>;
  try {
    claims = await tokens.verifyAccessToken(token);
  } catch (err) {
    if (err instanceof TokenError) throw storageError.unauthorized(REASONS[err.reason]);
    throw err;
  }
  if (!claims.did) throw storageError.unauthorized("invalid token payload: this account has no DID; storage needs a DID or wallet login");
  try {
    return { uid: claims.uid, did: parseDid(claims.did, chainId) };
  } catch {
    throw storageError.unauthorized("invalid token payload: bad DID");
  }
}
