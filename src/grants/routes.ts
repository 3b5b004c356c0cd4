/**
 * The session-grant API (D19) under /v2, in the account API's error model: register the grant a
 * wallet signed for a console's session key, list the live ones, revoke one. Thin: each route
 * finds the Bearer caller's DID and hands typed values to the service.
 */
import { Elysia, t, type Static } from "elysia";
import type { TokenService } from "../accounts/tokens.ts";
import { didBearer } from "../accounts/did-bearer.ts";
import { accountError } from "../http/errors.ts";
import { access, accountErrors } from "../http/openapi.ts";
import type { Grants } from "./service.ts";

const TAG = ["grants"];
const NEEDS_DID = "Session grants are for DID accounts only: sign in with a wallet";

export const grantView = t.Object({
  key: t.String({ description: "The session key's address" }),
  validUntil: t.Integer({ description: "Unix seconds" }),
  signer: t.String({ description: "The address that signed the grant; the grant holds while it may sign for the DID" }),
  createdAt: t.Integer({ description: "Unix seconds" }),
});

/** A grant as the API shows it; the SDK's SessionGrant is held equal to it (test/sdk/wire-types.ts). */
export type GrantView = Static<typeof grantView>;

export function grantsRoutes({ grants, tokens, chainId }: { grants: Grants; tokens: Pick<TokenService, "verifyAccessToken">; chainId: number }) {
  const caller = didBearer(tokens, chainId, () => accountError("UNAUTHORIZED", NEEDS_DID));

  return new Elysia({ name: "grants" })
    .post("/v2/session-grants", async ({ headers, body }) => ({ result: 1 as const, data: await grants.register(await caller(headers), body) }), {
      body: t.Object({
        key: t.Optional(t.String({ maxLength: 64, description: "The session key's address" })),
        validUntil: t.Optional(t.Union([t.Integer(), t.String({ maxLength: 20 })], { description: "Unix seconds, at most 24 h ahead" })),
        signature: t.Optional(t.String({ maxLength: 200, description: "EIP-712 SessionGrant(address key, uint64 validUntil) in the storage domain, signed by the DID's owner or a delegate" })),
      }),
      response: { 200: t.Object({ result: t.Literal(1), data: grantView }), ...accountErrors(400, 401, 409) },
      detail: { summary: "Register a session key the DID granted (D19): it may then sign uploads, deletes and vouchers, never logins, purchases or key mints", tags: TAG, ...access.bearer },
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
