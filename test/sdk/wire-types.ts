/**
 * The SDK's wire types (src/sdk/wire.ts) are its own, so the package ships no server module; this
 * file holds them identical to the server's models, under `tsc` (the typecheck script, and
 * test/sdk/wire-types.test.ts, which also shows a drifted field is refused). Not a test file:
 * nothing runs, a mismatch is a type error on the line that names it.
 */
import type { SessionInfo as ServerSessionInfo } from "../../src/accounts/tokens.ts";
import type { CurrentUser as ServerCurrentUser, UserInfo as ServerUserInfo } from "../../src/accounts/users.ts";
import type { ChainRecord as ServerChainRecord } from "../../src/chain/records.ts";
import type { SearchResult as ServerSearchResult } from "../../src/directory/search.ts";
import type * as server from "../../src/http/model.ts";
import type { DelegateType as ServerDelegateType } from "../../src/identity/delegates.ts";
import type { RequestAction as ServerRequestAction } from "../../src/identity/eip712.ts";
import type { GrantNonceView as ServerGrantNonce, GrantView as ServerSessionGrant, RegisteredGrantView as ServerRegisteredGrant } from "../../src/grants/routes.ts";
import type { ListedKey as ServerListedKey, MintedKey as ServerMintedKey } from "../../src/keys/model.ts";
import type { KeyAccess as ServerKeyScope, KeyBucket as ServerKeyBucket } from "../../src/keys/service.ts";
import type * as sdk from "../../src/sdk/wire.ts";

/** Identical, not merely assignable both ways (optional vs required, readonly, any all differ);
 * both sides are flattened first, so an interface and a schema's mapped type compare by shape. */
type Flat<T> = T extends object ? { [K in keyof T]: Flat<T[K]> } : T;
export type Equals<A, B> = (<T>() => T extends Flat<A> ? 1 : 2) extends <T>() => T extends Flat<B> ? 1 : 2 ? true : false;

export const wireTypesEqual: Record<string, true> = {
  FileEntry: true satisfies Equals<sdk.FileEntry, server.FileEntry>,
  FileList: true satisfies Equals<sdk.FileList, server.FileList>,
  QuotaRecord: true satisfies Equals<sdk.QuotaRecord, server.QuotaRecord>,
  PurchaseResult: true satisfies Equals<sdk.PurchaseResult, server.PurchaseResult>,
  TrafficHashResult: true satisfies Equals<sdk.TrafficHashResult, server.TrafficHashResult>,
  DidLoginTokens: true satisfies Equals<sdk.DidLoginTokens, server.DidLoginTokens>,
  LoginInfo: true satisfies Equals<sdk.LoginInfo, server.LoginInfo>,
  StorageErrorBody: true satisfies Equals<sdk.StorageErrorBody, server.StorageErrorBody>,
  RequestAction: true satisfies Equals<sdk.RequestAction, ServerRequestAction>,
  CurrentUser: true satisfies Equals<sdk.CurrentUser, ServerCurrentUser>,
  UserInfo: true satisfies Equals<sdk.UserInfo, ServerUserInfo>,
  SessionInfo: true satisfies Equals<sdk.SessionInfo, ServerSessionInfo>,
  ChainRecord: true satisfies Equals<sdk.ChainRecord, ServerChainRecord>,
  DelegateType: true satisfies Equals<sdk.DelegateType, ServerDelegateType>,
  // The server types Owner as a string it checksums (EIP-55); the SDK narrows it to an address.
  SearchResult: true satisfies Equals<Omit<sdk.SearchResult, "Owner">, Omit<ServerSearchResult, "Owner">>,
  SearchResultOwner: true satisfies Equals<sdk.SearchResult["Owner"] extends ServerSearchResult["Owner"] ? true : false, true>,
  KeyScope: true satisfies Equals<sdk.KeyScope, ServerKeyScope>,
  KeyBucket: true satisfies Equals<sdk.KeyBucket, ServerKeyBucket>,
  MintedKey: true satisfies Equals<sdk.MintedKey, ServerMintedKey>,
  ListedKey: true satisfies Equals<sdk.ListedKey, ServerListedKey>,
  SessionGrant: true satisfies Equals<sdk.SessionGrant, ServerSessionGrant>,
  RegisteredGrant: true satisfies Equals<sdk.RegisteredGrant, ServerRegisteredGrant>,
  GrantNonce: true satisfies Equals<sdk.GrantNonce, ServerGrantNonce>,
};
