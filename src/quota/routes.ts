/**
 * Quota routes (spec 4.1 rows 9–12): the space and traffic records, and purchases. `dfs` and
 * `ipfs` answer the same records: one pool per kind is shared by both back-ends (D7).
 */
import { Elysia, t } from "elysia";
import { storageError } from "../http/errors.ts";
import { purchaseResult, quotaRecord } from "../http/model.ts";
import { wholeBytes } from "../byte-count.ts";
import { access, storageErrors, storageTypeParam } from "../http/openapi.ts";
import { rememberedDids, requireCaller, requireKind, type AccessTokens } from "../http/storage-guard.ts";
import { parseDid } from "../identity/did.ts";
import type { Meter } from "./meter.ts";
import type { Purchases } from "./purchase.ts";
import { DEFAULT_PACKAGE } from "./purchase.ts";
import type { Kind } from "./records.ts";

const params = t.Object({ type: storageTypeParam });


function parseSize(raw: string | undefined, kind: Kind): number {
  if (raw === undefined || raw === "") return DEFAULT_PACKAGE[kind];
  const bytes = wholeBytes(raw);
  if (!bytes) throw storageError.badRequest("size must be a positive whole number of bytes");
  return bytes;
}

export const quotaRoutes = ({ meter, purchases, tokens, chainId }: { meter: Meter; purchases: Purchases; tokens: AccessTokens; chainId: number }) => {
  const readDid = rememberedDids((did) => parseDid(did, chainId));
  const caller = (request: Request) => requireCaller(request, tokens, readDid);
  const show = (kind: Kind) => async ({ request, params, path, set }: { request: Request; params: { type: string }; path: string; set: { headers: Record<string, string | number> } }) => {
    requireKind(params.type, path);
    const who = await caller(request);
    set.headers["cache-control"] = "no-store";
    return meter.record(who.did.address, who.did.canonical, kind);
  };
  const buy =
    (kind: Kind) =>
    async ({ request, params, query, path, set }: { request: Request; params: { type: string }; query: { size?: string }; path: string; set: { headers: Record<string, string | number> } }) => {
      requireKind(params.type, path);
      const who = await caller(request);
      set.headers["cache-control"] = "no-store";
      const key = request.headers.get("idempotency-key") ?? undefined;
      if (key !== undefined && (key.length < 1 || key.length > 200)) throw storageError.badRequest("Idempotency-Key must be 1 to 200 characters");
      return purchases.buy(who.did.address, kind, parseSize(query.size, kind), key);
    };
  const buyDoc = (kind: Kind) => ({
    summary: `Buy ${kind} with the deposit: optional size (default ${DEFAULT_PACKAGE[kind]} bytes) and Idempotency-Key header; answers the mined transaction`,
    tags: ["quota"],
    ...access.bearer,
  });
  const record = { 200: quotaRecord, ...storageErrors(401, 518) };
  const purchase = { 200: purchaseResult, ...storageErrors(400, 401, 402, 409, 500, 518) };
  return new Elysia({ name: "quota" })
    .get("/:type/space", show("space"), { params, detail: { summary: "Remaining storage space, shared by dfs and ipfs", tags: ["quota"], ...access.bearer }, response: record })
    .get("/:type/traffic", show("traffic"), { params, detail: { summary: "Remaining traffic, shared by dfs and ipfs", tags: ["quota"], ...access.bearer }, response: record })
    .get("/:type/buyspace", buy("space"), { params, query: t.Object({ size: t.Optional(t.String()) }), detail: buyDoc("space"), response: purchase })
    .get("/:type/buytraffic", buy("traffic"), { params, query: t.Object({ size: t.Optional(t.String()) }), detail: buyDoc("traffic"), response: purchase });
};
