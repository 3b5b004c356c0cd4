/**
 * The shapes the SDK sends and receives, spelled out as plain types of its own, so the package's
 * declarations name nothing outside it (a user of @stowage/sdk needs neither Elysia nor drizzle).
 * They are not a second source of truth: test/sdk/wire-types.ts asserts, under `tsc`, that each
 * one is identical to the server's model (src/http/model.ts, src/keys/model.ts, …), so a field
 * added on one side and not the other fails the type check.
 */

/** A file entry (spec 2.5). */
export interface FileEntry {
  ID: number;
  Name: string;
  Size: number;
  Cid: string;
  /** RFC 3339 time. */
  ModTime: string;
  Public: boolean;
  UserDefined: { encryption: string; etag: string };
}

/** GET /:type/listobjects (spec 2.5). */
export interface FileList {
  Address: string;
  Storage: string;
  Object: FileEntry[];
}

/** A quota record as the gateway answers it (spec 2.6): `Balance` in gwei, `Expire` unix seconds. */
export interface QuotaRecord {
  Nonce: number;
  Balance: number;
  SizeByte: number;
  FreeByte: number;
  Expire: number;
}

/** A purchase's mined transaction (D8). */
export interface PurchaseResult {
  tx: `0x${string}`;
}

/** GET /traffichash: the payer's counter, and when asked with a `cid` the digest to sign for a
 * voucher of `size` for that file (`cid` canonical, `expires` unix seconds or "0"). */
export interface TrafficHashResult {
  /** With `cid` only. */
  hash?: `0x${string}`;
  cid?: string;
  expires?: string;
  seller: `0x${string}`;
  size: string;
  chainId: number;
  verifyingContract: `0x${string}`;
  used: string;
  remaining: string;
}

/** POST /login with Accept: application/json: the account API's tokens for the DID. */
export interface DidLoginTokens {
  did: string;
  accessToken: string;
  refreshToken: string;
}

/** GET /login?did= (spec 2.2). */
export interface LoginInfo {
  token: string;
  timestamp: number;
  requestID: string;
}

/** The storage error body (spec 7, D11); a failed delete adds `Status: "Failure"`. */
export interface StorageErrorBody {
  Code: string;
  Description: string;
  HTTPStatusCode: number;
  Status?: "Failure";
}

/** The action of a signed restricted request (D5 upload and delete, D18 keys, D20 age). */
export type RequestAction = "upload" | "delete" | "keys" | "age";

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

/** One live session of an account (GET /v2/auth/sessions); times in Unix seconds. */
export interface SessionInfo {
  id: string;
  method: string;
  source: string;
  useragent: string;
  createdAt: number;
  lastUsedAt: number;
  expiresAt: number;
  /** Whether it is the session of the token that asked. */
  current: boolean;
}

/** A quota record as the Proxy contract keeps it (D7). */
export interface ChainRecord {
  /** +1 per purchase or grant of this kind. */
  nonce: bigint;
  /** The user's deposit, in wei. */
  deposit: bigint;
  purchased: bigint;
  free: bigint;
  /** Unix seconds. */
  expire: bigint;
  /** Block time when the current period began. */
  periodStart: bigint;
}

/** ERC-1056 delegate types the registry knows. */
export type DelegateType = "sigAuth" | "veriKey";

/** One directory search hit (spec 2.7), plus `Owner` (EIP-55), which buyRead needs. */
export interface SearchResult {
  Mid: string;
  Name: string;
  Size: number;
  Public: boolean;
  /** Gwei to buy read permission. */
  Price: number;
  keywords: string[];
  Owner: `0x${string}`;
}

/** An access key's scope: S3 read and write, S3 read only, or a Pinning Service API token. */
export type KeyScope = "rw" | "ro" | "pins";
/** The back-end a key may use; `*` = both. */
export type KeyBucket = "dfs" | "ipfs" | "*";

/** The answer to a mint: the only time the secret is shown. */
export interface MintedKey {
  accessKeyId: string;
  secretAccessKey: string;
  scope: KeyScope;
  bucket: KeyBucket;
  /** Unix seconds; null = no expiry. */
  expiresAt: number | null;
  /** A pins key only: the Pinning Service API's Bearer token. */
  token?: string;
}

/** A key as GET /v2/keys lists it: never its secret. */
export interface ListedKey {
  id: string;
  accessKeyId: string;
  scope: KeyScope;
  bucket: KeyBucket;
  expiresAt: number | null;
  /** Unix seconds. */
  createdAt: number;
  /** The address that signed the minting request. */
  signer: string;
}

/** A session grant as GET /v2/session-grants lists it (D19). */
export interface SessionGrant {
  /** The session key's address. */
  key: string;
  /** Unix seconds: the grant's Expiration Time. */
  validUntil: number;
  /** The address that signed the grant; it holds while that address may sign for the DID. */
  signer: string;
  /** Unix seconds. */
  createdAt: number;
  /** What the key may sign (its ReCap): "delete", "upload", "voucher". */
  abilities: string[];
  /** The site that asked for the grant (the signed message's scheme and domain). */
  origin: string;
}

/** POST /v2/session-grants: the grant, and the storage session its registration opened for the key. */
export interface RegisteredGrant extends SessionGrant {
  /** The storage session's token (hex): the key signs requests with it, from requestID 1. */
  token: string;
}

/** POST /v2/session-grants/nonce. */
export interface GrantNonce {
  nonce: string;
  /** Unix seconds: the nonce is refused after this. */
  expiresAt: number;
}
