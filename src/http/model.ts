/**
 * The wire model of the storage API (spec 2.5, 2.6, 7; D11), written once: the routes validate and
 * document with these schemas (OpenAPI reads them from the routes), the errors build their bodies
 * to them, and the SDK takes its types from them, so server, docs and client cannot drift apart.
 *
 * @example
 *   .get("/:type/space", show, { response: { 200: quotaRecord } })
 *   import type { FileEntry } from "../http/model.ts"   // in the SDK: types only, no Elysia at run time
 */
import { t, type Static } from "elysia";

/** The storage types of `/:type/...` routes (spec 4.1); any other is 518. */
export const STORAGE_KINDS = ["dfs", "ipfs"] as const;
export type StorageKind = (typeof STORAGE_KINDS)[number];
export const isStorageKind = (type: string): type is StorageKind => (STORAGE_KINDS as readonly string[]).includes(type);

/** A file entry (spec 2.5). */
export const fileEntry = t.Object({
  ID: t.Number(),
  Name: t.String(),
  Size: t.Number(),
  Cid: t.String(),
  ModTime: t.String({ description: "RFC 3339 time" }),
  Public: t.Boolean(),
  UserDefined: t.Object({ encryption: t.String(), etag: t.String() }),
});
export type FileEntry = Static<typeof fileEntry>;

/** GET /:type/listobjects (spec 2.5). */
export const fileList = t.Object({ Address: t.String(), Storage: t.String(), Object: t.Array(fileEntry) });
export type FileList = Static<typeof fileList>;

/** A quota record (spec 2.6): `Balance` is the deposit in gwei, `Expire` unix seconds. */
export const quotaRecord = t.Object({
  Nonce: t.Number(),
  Balance: t.Number({ description: "deposit in gwei" }),
  SizeByte: t.Number(),
  FreeByte: t.Number(),
  Expire: t.Number({ description: "unix seconds" }),
});
export type QuotaRecord = Static<typeof quotaRecord>;

/** 0x-prefixed hex (an address, a hash, a transaction). */
const hex = t.TemplateLiteral("0x${string}");

/** A purchase's mined transaction (D8). */
export const purchaseResult = t.Object({ tx: hex });
export type PurchaseResult = Static<typeof purchaseResult>;

/** GET /traffichash (D6, D22): the payer's counter, and with a `cid` the digest to sign for a
 * voucher of `size` for that file (`cid` canonical, `expires` unix seconds or "0"). */
export const trafficHashResult = t.Object({
  hash: t.Optional(hex),
  cid: t.Optional(t.String()),
  expires: t.Optional(t.String()),
  seller: hex,
  size: t.String(),
  chainId: t.Number(),
  verifyingContract: hex,
  used: t.String(),
  remaining: t.String(),
});
export type TrafficHashResult = Static<typeof trafficHashResult>;

/** POST /login with Accept: application/json: the account API's tokens for the DID, under `data`. */
export const didLoginTokens = t.Object({ did: t.String(), accessToken: t.String(), refreshToken: t.String() });
export type DidLoginTokens = Static<typeof didLoginTokens>;

/** GET /login?did= (spec 2.2). */
export const loginInfo = t.Object({ token: t.String(), timestamp: t.Number(), requestID: t.String() });
export type LoginInfo = Static<typeof loginInfo>;

/** A delete's answer (D9); its failures carry `Status: "Failure"` in the error body. */
export const deleteResult = t.Object({ Status: t.Literal("Success") });

/** The storage error body (spec 7, D11); a failed delete adds `Status: "Failure"`. */
export const storageErrorBody = t.Object(
  { Code: t.String(), Description: t.String(), HTTPStatusCode: t.Number(), Status: t.Optional(t.Literal("Failure")) },
  { additionalProperties: true },
);
export type StorageErrorBody = Static<typeof storageErrorBody>;

/** The account API's error body (`/v2/...`, D11). */
export const accountErrorBody = t.Object({ result: t.Literal(-1), error: t.String(), message: t.String() });
export type AccountErrorBody = Static<typeof accountErrorBody>;
