/**
 * The keys API (D18): mint, list and revoke S3 access keys, under /v2 (the account API's error
 * model). Thin: each route finds the Bearer caller's DID and hands typed values to the service.
 * Only `DELETE /v2/keys/:id` has a parameter, so `/v2/keys/age` (the encryption API's, D20) is
 * never answered here for GET or PUT.
 */
import { Elysia } from "elysia";
import type { TokenService } from "../accounts/tokens.ts";
import { didBearer } from "../accounts/did-bearer.ts";
import { fail } from "./error-codes.ts";
import { keyId, keysErrors, listAnswer, mintAnswer, mintRequest, revokeAnswer } from "./model.ts";
import type { Keys } from "./service.ts";
import { access } from "../http/openapi.ts";

const TAG = ["keys"];

export function keysRoutes({ keys, tokens, chainId }: { keys: Keys; tokens: Pick<TokenService, "verifyAccessToken">; chainId: number }) {
  /** The Bearer account's DID; accounts without one (email, messenger, browser logins) get none. */
  const caller = didBearer(tokens, chainId, (why) => fail("KEY_NEEDS_DID", why));

  return new Elysia({ name: "keys" })
    .post(
      "/v2/keys",
      async ({ headers, body, set }) => {
        const minted = await keys.create(await caller(headers), body);
        // The secret is in this answer and in no other: no cache may keep it.
        set.headers["cache-control"] = "no-store";
        return { result: 1 as const, data: minted };
      },
      {
        body: mintRequest,
        response: { 200: mintAnswer, ...keysErrors },
        detail: {
          summary: "Mint an S3 access key (Bearer token and a signed restricted request, action \"keys\"); the secret is shown only here",
          tags: TAG,
          ...access.restricted,
        },
      },
    )
    .get("/v2/keys", async ({ headers }) => ({ result: 1 as const, data: await keys.list(await caller(headers)) }), {
      response: { 200: listAnswer, 401: keysErrors[401] },
      detail: { summary: "The account's S3 access keys not revoked (no secrets)", tags: TAG, ...access.bearer },
    })
    .delete(
      "/v2/keys/:id",
      async ({ headers, params }) => {
        await keys.revoke(await caller(headers), params.id);
        return { result: 1 as const };
      },
      {
        params: keyId,
        response: { 200: revokeAnswer, ...keysErrors },
        detail: { summary: "Revoke one of the account's S3 access keys, by its id or access key id", tags: TAG, ...access.bearer },
      },
    );
}
