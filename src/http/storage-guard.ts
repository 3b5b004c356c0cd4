/**
 * The guard of the storage and quota routes (spec 5): the `:type` of the path, and the account
 * API's Bearer access token, which must belong to an account with a DID (D2). Failures are the
 * spec's 518 and 401s. It lives with the HTTP layer so that storage and quota, which both guard
 * their routes with it, need not import each other; what it needs of the account API and of
 * DIDs is handed in, so the HTTP layer imports neither.
 */
import { accountError, isAccountPath, storageError } from "./errors.ts";
import { isStorageKind, type StorageKind } from "./model.ts";
import { bearerToken } from "./params.ts";

/** Throws the account API's 404 for a `/v2/...` path that reached a storage route. */
export function checkNotAccount(path: string) {
  if (isAccountPath(path)) throw accountError("NOT_FOUND", "No such endpoint");
}

/** A storage route's `:type`, or the spec's 518. Such a route also catches unknown `/v2/...`
 * paths, which answer in the account model instead. */
export function requireKind(type: string, path: string): StorageKind {
  checkNotAccount(path);
  if (!isStorageKind(type)) throw storageError.unsupportedType();
  return type;
}

/** What the guard needs of the account API: an access token's claims. A refusal is thrown as an
 * error whose `reason` is one of REASONS' keys (the account API's TokenError). */
export interface AccessTokens {
  verifyAccessToken(token: string): Promise<{ uid: string; did?: string }>;
}

const REASONS: Record<string, string> = {
  missing: "Token is null",
  invalid: "invalid token",
  expired: "invalid token: expired",
  "wrong-type": "invalid token payload: not an access token",
  "bad-did": "invalid token payload: bad DID",
  "key-revoked": "invalid token: the key it was issued to may no longer sign for its DID; log in again",
  revoked: "invalid token: its session has ended",
};

const refusal = (err: unknown): string | undefined => {
  const reason = typeof err === "object" && err !== null && "reason" in err ? err.reason : undefined;
  return typeof reason === "string" ? REASONS[reason] : undefined;
};

/** Distinct DIDs a reader made by `rememberedDids` keeps parsed; past it, it starts over. */
const REMEMBERED_DIDS = 4096;

/**
 * `read` with its answers kept by the DID's text: every storage and quota request parses its
 * token's DID, and the parse (an EIP-55 checksum of the address, twice) is the same each time.
 * A DID that fails to parse is not kept: it throws again on every request.
 */
export function rememberedDids<D>(read: (did: string) => D): (did: string) => D {
  const parsed = new Map<string, D>();
  return (did) => {
    let out = parsed.get(did);
    if (out === undefined) {
      out = read(did);
      if (parsed.size >= REMEMBERED_DIDS) parsed.clear();
      parsed.set(did, out);
    }
    return out;
  };
}

/** The caller of a storage route: its account and its DID, as `readDid` parses it (throwing when bad). */
export async function requireCaller<D>(request: Request, tokens: AccessTokens, readDid: (did: string) => D): Promise<{ uid: string; did: D }> {
  const token = bearerToken(request.headers.get("authorization"));
  if (!token) throw storageError.unauthorized("Token is null");
  let claims: { uid: string; did?: string };
  try {
    claims = await tokens.verifyAccessToken(token);
  } catch (err) {
    const why = refusal(err);
    if (why) throw storageError.unauthorized(why);
    throw err;
  }
  if (!claims.did) throw storageError.unauthorized("invalid token payload: this session acts for no DID (it signed in by email, password or a messenger); storage needs a wallet or DID login, and an account without a wallet links one first (POST /v2/user/link-wallet)");
  try {
    return { uid: claims.uid, did: readDid(claims.did) };
  } catch {
    throw storageError.unauthorized("invalid token payload: bad DID");
  }
}
