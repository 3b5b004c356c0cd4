/**
 * The session-grant API (D19) under /v2, in the account API's error model: a nonce for a grant,
 * register the grant a wallet signed for a console's session key, list the live ones, revoke
 * one. Thin: each route finds the Bearer caller's DID and hands typed values to the service.
 */
import { Elysia, t, type Static } from "elysia";
import type { TokenService } from "../accounts/tokens.ts";
import { didBearer } from "../accounts/did-bearer.ts";
import { accountError } from "../http/errors.ts";
import { access, accountErrors } from "../http/openapi.ts";
import { GRANT_ABILITIES } from "../sdk/grants.ts";
import { MAX_MESSAGE, type Grants } from "./service.ts";

const TAG = ["grants"];
const NEEDS_DID = "Session grants are for DID accounts only: sign in with a wallet";

export const grantView = t.Object({
  key: t.String({ description: "The session key's address" }),
  validUntil: t.Integer({ description: "Unix seconds: the grant's Expiration Time" }),
  signer: t.String({ description: "The address that signed the grant; the grant holds while it may sign for the DID" }),
  createdAt: t.Integer({ description: "Unix seconds" }),
  abilities: t.Array(t.String({ enum: [...GRANT_ABILITIES] }), { description: "What the key may sign, from the grant's ReCap" }),
  origin: t.String({ description: "The site that asked for the grant (the signed message's scheme and domain)" }),
});
const registeredGrant = t.Composite([grantView, t.Object({ token: t.String({ description: "The storage session opened for the key (hex): it signs requests with this token, from requestID 1" }) })]);
const grantNonce = t.Object({ nonce: t.String(), expiresAt: t.Integer({ description: "Unix seconds" }) });

/** A grant as the API shows it; the SDK's SessionGrant is held equal to it (test/sdk/wire-types.ts). */
export type GrantView = Static<typeof grantView>;
export type RegisteredGrantView = Static<typeof registeredGrant>;
export type GrantNonceView = Static<typeof grantNonce>;

export function grantsRoutes({ grants, tokens, chainId }: { grants: Grants; tokens: Pick<TokenService, "verifyAccessToken">; chainId: number }) {
  const caller = didBearer(tokens, chainId, () => accountError("UNAUTHORIZED", NEEDS_DID));

  return new Elysia({ name: "grants" })
    .post("/v2/session-grants/nonce", async ({ headers, set }) => {
      set.headers["cache-control"] = "no-store";
      return { result: 1 as const, data: await grants.nonce(await caller(headers)) };
    }, {
      response: { 200: t.Object({ result: t.Literal(1), data: grantNonce }), ...accountErrors(401, 429) },
      detail: { summary: "A nonce for one session grant of the caller's DID: valid 10 minutes, used once", tags: TAG, ...access.bearer },
    })
    .post("/v2/session-grants", async ({ headers, body, set }) => {
      set.headers["cache-control"] = "no-store";
      return { result: 1 as const, data: await grants.register(await caller(headers), body) };
    }, {
      body: t.Object({
        message: t.Optional(t.String({ maxLength: MAX_MESSAGE, description: "An EIP-4361 (Sign-In with Ethereum) message from an allowed origin: the nonce from POST /v2/session-grants/nonce, URI did:pkh:eip155:<chain id>:<session key>, an Expiration Time at most 24 h after Issued At, and as its one resource an ERC-5573 ReCap naming the caller's DID with any of stowage/upload, stowage/delete, stowage/voucher" })),
        signature: t.Optional(t.String({ maxLength: 65536, description: "The wallet's signature of message (personal_sign; a smart wallet's EIP-1271 or ERC-6492 signature too), by the DID's owner or a delegate" })),
        key: t.Optional(t.String({ maxLength: 64, description: "Retired (the EIP-712 SessionGrant): refused with an error naming the format above" })),
        validUntil: t.Optional(t.Union([t.Integer(), t.String({ maxLength: 20 })], { description: "Retired, as key" })),
      }),
      response: { 200: t.Object({ result: t.Literal(1), data: registeredGrant }), ...accountErrors(400, 401, 403, 409, 503) },
      detail: {
        summary: "Register a session key the DID granted: it may then sign what its ReCap names (uploads, deletes, vouchers), never logins, purchases, key mints or the age identity; answers the key's storage session",
        tags: TAG,
        ...access.bearer,
      },
    })
    .get("/v2/session-grants", async ({ headers }) => ({ result: 1 as const, data: await grants.list(await caller(headers)) }), {
      response: { 200: t.Object({ result: t.Literal(1), data: t.Array(grantView) }), ...accountErrors(401) },
      detail: { summary: "The DID's live session grants", tags: TAG, ...access.bearer },
    })
    .delete(
      "/v2/session-grants/:key",
      async ({ headers, params }) => {
        await grants.revoke(await caller(headers), params.key);
        return { result: 1 as const };
      },
      {
        params: t.Object({ key: t.String({ maxLength: 64 }) }),
        response: { 200: t.Object({ result: t.Literal(1) }), ...accountErrors(400, 401, 404) },
        detail: { summary: "Revoke a session grant at once", tags: TAG, ...access.bearer },
      },
    );
}
