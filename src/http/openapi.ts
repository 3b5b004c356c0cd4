/**
 * What the OpenAPI document says about access and failures, written once (D19): the security
 * schemes of both APIs, each route's access as a spread into its `detail`, and its error answers
 * as a spread into its `response` (the bodies of D11). Thrown errors render themselves and are not
 * validated against these; they are here so a client generator knows every answer.
 *
 * @example
 *   .get("/v2/user/info", info, { detail: { summary, ...access.bearer }, response: { 200: user, ...accountErrors(401, 429) } })
 */
import { t } from "elysia";
import { accountErrorBody, STORAGE_KINDS, storageErrorBody } from "./model.ts";

export const securitySchemes = {
  bearer: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "JWT",
    description:
      "An access token of the account API (/v2 logins, or POST /login with Accept: application/json). A token of a DID account acts for the DID only while the key that signed in may sign for it in the DID registry (its owner or a valid delegate; checked on every use, answers cached at most 10 s): after an owner change or a revoked delegate it answers 401.",
  },
  signedRequest: {
    type: "apiKey",
    in: "query",
    name: "signature",
    description: "A signed call: did, token, requestID, payload and the EIP-712 Request signature, in the query (or, for an upload, multipart fields before the file)",
  },
  voucher: {
    type: "apiKey",
    in: "query",
    name: "sign",
    description:
      "A traffic voucher: size, sign (the payer's EIP-712 signature of Voucher(address seller,uint256 size,string cid,uint64 expires), cid being the Cid of the one file the transfer moves; the payer pays the transfer from its traffic) and expires (unix seconds) when it is not 0. Each is accepted once and refused after expires; the old Voucher(address seller,uint64 size) is refused",
  },
  pinsToken: {
    type: "http",
    scheme: "bearer",
    description: "The Pinning Service API's token: an access key of scope pins (POST /v2/keys with payload pins:ipfs:<expiry>, or `stowage keys create --scope pins`), revocable with DELETE /v2/keys/<id>",
  },
} as const;

type Security = { security: Record<string, string[]>[] };

/** Each route's access, spread into its `detail`. */
export const access: Record<"public" | "bearer" | "restricted" | "upload" | "download" | "pins", Security> = {
  /** Anyone: logins, discovery, health, search. */
  public: { security: [] },
  bearer: { security: [{ bearer: [] }] },
  /** Bearer and a signed restricted request (D5). */
  restricted: { security: [{ bearer: [], signedRequest: [] }] },
  /** An upload: Bearer, the signed request and the payer's voucher. */
  upload: { security: [{ bearer: [], signedRequest: [], voucher: [] }] },
  /** A download: the voucher is the only credential; public content of the trustless gateway needs none (D17). */
  download: { security: [{ voucher: [] }, {}] },
  /** The Pinning Service API: a pins token. */
  pins: { security: [{ pinsToken: [] }] },
};

const errors = <S extends number, B>(body: B, statuses: readonly S[]) => Object.fromEntries(statuses.map((s) => [s, body])) as Record<S, B>;
/** Storage error answers (spec 7, D11), spread into a route's `response`. */
export const storageErrors = <S extends number>(...statuses: S[]) => errors(storageErrorBody, statuses);
/** Account API error answers (D11), spread into a route's `response`. */
export const accountErrors = <S extends number>(...statuses: S[]) => errors(accountErrorBody, statuses);

/** `:type` of the storage routes: documented as its two values, validated by the route (any other is 518, not a 422). */
export const storageTypeParam = t.String({ enum: [...STORAGE_KINDS], description: "dfs or ipfs; any other answers 518" });
