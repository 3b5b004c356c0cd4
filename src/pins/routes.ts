/**
 * The Pinning Service API's routes at /psa (the spec's paths below it), so a user runs
 * `ipfs pin remote service add stowage https://HOST/psa TOKEN`. Thin: each route finds the Bearer
 * token's account and hands typed values to the service; errors take the spec's shape
 * (http/error-handler.ts sends every failure under /psa through pins/errors.ts).
 */
import { Elysia } from "elysia";
import { MAX_PARSED_BODY } from "../http/body-limit.ts";
import { access } from "../http/openapi.ts";
import { isPsaPath, pinsError, PSA_PREFIX } from "./errors.ts";
import { pinBody, pinErrors, pinResults, pinStatus, requestId } from "./model.ts";
import type { Pins } from "./service.ts";

const TAG = ["pins"];
const LIST_PARAMS = ["cid", "name", "match", "status", "before", "after", "limit", "meta"] as const;

/** The list's query as the service reads it: a repeated parameter (`cid=a&cid=b`) as the spec's comma form. */
function queryOf(url: string): Record<string, string | undefined> {
  const params = new URL(url).searchParams;
  const out: Record<string, string | undefined> = {};
  for (const name of LIST_PARAMS) {
    const all = params.getAll(name);
    if (all.length > 0) out[name] = name === "cid" || name === "status" ? all.join(",") : all[all.length - 1];
  }
  return out;
}

/**
 * The gateway's cap on bodies read whole, for /psa in the spec's error shape: mounted before the
 * app's own (http/body-limit.ts), whose failure comes before routing and so before any error edge.
 */
export const pinsBodyLimit = new Elysia({ name: "pins-body-limit" }).onRequest(({ request }) => {
  if (request.method !== "POST") return;
  const length = request.headers.get("content-length");
  if (length === null || Number(length) <= MAX_PARSED_BODY || !isPsaPath(new URL(request.url).pathname)) return;
  throw pinsError("CONTENT_TOO_LARGE", `Body larger than ${MAX_PARSED_BODY} bytes`);
});

export function pinsRoutes(pins: Pins) {
  const noStore = { "cache-control": "no-store" };
  return new Elysia({ name: "pins", prefix: PSA_PREFIX })
    .get(
      "/pins",
      async ({ headers, request, set }) => {
        const who = await pins.caller(headers.authorization);
        Object.assign(set.headers, noStore);
        return pins.list(who, queryOf(request.url));
      },
      {
        response: { 200: pinResults, ...pinErrors },
        detail: { summary: "List pin requests (by default only pinned ones), newest first, with filters: cid, name and match, status, before, after, meta, limit", tags: TAG, ...access.pins },
      },
    )
    .post(
      "/pins",
      async ({ headers, body, set }) => {
        const who = await pins.caller(headers.authorization);
        const made = await pins.add(who, body);
        set.status = 202;
        Object.assign(set.headers, noStore);
        return made;
      },
      {
        body: pinBody,
        response: { 202: pinStatus, ...pinErrors },
        detail: { summary: "Pin a CID: fetched over bitswap from its origins and this gateway's peers, it becomes a file among the account's ipfs files", tags: TAG, ...access.pins },
      },
    )
    .get(
      "/pins/:requestid",
      async ({ headers, params, set }) => {
        const who = await pins.caller(headers.authorization);
        Object.assign(set.headers, noStore);
        return pins.get(who, params.requestid);
      },
      { params: requestId, response: { 200: pinStatus, ...pinErrors }, detail: { summary: "A pin request and its status", tags: TAG, ...access.pins } },
    )
    .post(
      "/pins/:requestid",
      async ({ headers, params, body, set }) => {
        const who = await pins.caller(headers.authorization);
        const made = await pins.replace(who, params.requestid, body);
        set.status = 202;
        Object.assign(set.headers, noStore);
        return made;
      },
      {
        params: requestId,
        body: pinBody,
        response: { 202: pinStatus, ...pinErrors },
        detail: { summary: "Replace a pin request by a new one (a new requestid); a file it pinned stays", tags: TAG, ...access.pins },
      },
    )
    .delete(
      "/pins/:requestid",
      async ({ headers, params, set }) => {
        const who = await pins.caller(headers.authorization);
        await pins.remove(who, params.requestid);
        set.status = 202;
        return new Response(null, { status: 202, headers: noStore });
      },
      {
        params: requestId,
        detail: { summary: "Remove a pin request (a pin in flight stops and keeps nothing; a pinned file stays among the account's ipfs files)", tags: TAG, ...access.pins },
      },
    );
}
