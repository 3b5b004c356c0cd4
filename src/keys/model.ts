/**
 * The wire model of the keys API (D18), written once: the routes validate and document with these
 * schemas, and the SDK takes its types from them (types only, no Elysia at run time).
 */
import { t, type Static } from "elysia";
import { accountErrorBody } from "../http/model.ts";

const scope = t.Union([t.Literal("rw"), t.Literal("ro"), t.Literal("pins")], {
  description: "rw: S3 read and write; ro: S3 read only; pins: a Pinning Service API token (/psa), on ipfs only",
});
const bucket = t.Union([t.Literal("dfs"), t.Literal("ipfs"), t.Literal("*")], { description: "The bucket (back-end) the key may use; * = both" });
const expiresAt = t.Union([t.Integer(), t.Null()], { description: "Unix seconds; null = no expiry" });

/** POST /v2/keys: the fields of a signed restricted request (D5) with action "keys". */
export const mintRequest = t.Object({
  did: t.Optional(t.String({ maxLength: 200 })),
  token: t.Optional(t.String({ maxLength: 200, description: "The session's token (hex)" })),
  requestID: t.Optional(t.Union([t.String({ maxLength: 20 }), t.Integer()])),
  payload: t.Optional(t.String({ maxLength: 64, description: "<rw|ro>:<dfs|ipfs|*>:<expiry unix seconds, 0 = none>, or pins:ipfs:<expiry> for a Pinning Service API token" })),
  signature: t.Optional(t.String({ maxLength: 200, description: "EIP-712 Request signature, 0x-hex" })),
});

/** The answer to a mint: the only time the secret is shown. */
export const mintedKey = t.Object({
  accessKeyId: t.String(),
  secretAccessKey: t.String({ description: "Shown once; the gateway keeps it encrypted and never shows it again" }),
  scope,
  bucket,
  expiresAt,
  token: t.Optional(t.String({ description: "A pins key only: the Bearer token of the Pinning Service API (its access key id and secret), shown once" })),
});
export type MintedKey = Static<typeof mintedKey>;

/** A key as GET /v2/keys lists it: never its secret. */
export const listedKey = t.Object({
  id: t.String(),
  accessKeyId: t.String(),
  scope,
  bucket,
  expiresAt,
  createdAt: t.Integer({ description: "Unix seconds" }),
  signer: t.String({ description: "The address that signed the minting request; the key works while it may sign for the DID" }),
});
export type ListedKey = Static<typeof listedKey>;

export const keyId = t.Object({ id: t.String({ maxLength: 64, description: "The key's id or its access key id" }) });

const ok = <T extends Parameters<typeof t.Object>[0]>(fields: T) => t.Object({ result: t.Literal(1), ...fields });
export const mintAnswer = ok({ data: mintedKey });
export const listAnswer = ok({ data: t.Array(listedKey) });
export const revokeAnswer = ok({});
export const keysErrors = { 400: accountErrorBody, 401: accountErrorBody, 404: accountErrorBody, 409: accountErrorBody, 429: accountErrorBody };
