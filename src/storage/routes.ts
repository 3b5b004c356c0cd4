/**
 * Storage middleware routes (spec 4.1 rows 1–6 and 8). Thin: each parses its request and hands it
 * to the storage service. `:type` is the storage type; anything but `dfs` and `ipfs` is 518.
 */
import { Elysia, t } from "elysia";
import { isAccountPath, storageError, storageErrorBody } from "../http/errors.ts";
import { streamsBody } from "../http/body-limit.ts";
import { clientIp } from "../http/client-ip.ts";
import type { Storage } from "./service.ts";
import { checkNotAccount } from "./kinds.ts";
import { CID } from "multiformats/cid";

const isCid = (s: string) => {
  try {
    CID.parse(s);
    return true;
  } catch {
    return false;
  }
};

const entry = t.Object({
  ID: t.Number(),
  Name: t.String(),
  Size: t.Number(),
  Cid: t.String(),
  ModTime: t.String({ description: "RFC 3339 time" }),
  Public: t.Boolean(),
  UserDefined: t.Object({ encryption: t.String(), etag: t.String() }),
});
// No length limits here: D4 makes every refusal of a login a 401, and the login checks each field
// itself (the time window first, then cheap patterns), inside the 64 KiB cap on parsed bodies.
const loginFields = {
  did: t.Optional(t.String()),
  token: t.Optional(t.String()),
  timestamp: t.Optional(t.Union([t.String(), t.Number()])),
  signature: t.Optional(t.String()),
};
const voucherQuery = t.Object({ size: t.Optional(t.String()), sign: t.Optional(t.String()) }, { additionalProperties: true });
const typeParam = t.Object({ type: t.String() });



const wantsJson = (request: Request) => (request.headers.get("accept") ?? "").includes("application/json");

// Uploads: POST /:type (one path segment) other than the fixed single-segment routes.
streamsBody((method, path) => method === "POST" && /^\/[^/]+\/?$/.test(path) && path !== "/login" && path !== "/rpc");

export const storageRoutes = (storage: Storage) =>
  new Elysia({ name: "storage" })
    .post(
      "/login",
      async ({ body, query, request }) => {
        const input = { ...query, ...(typeof body === "object" && body ? body : {}) };
        const tokens = await storage.login(input, wantsJson(request), clientIp(request));
        if (tokens) return { result: 1, data: tokens };
        return new Response("Login success!", { headers: { "content-type": "text/plain; charset=utf-8" } });
      },
      {
        body: t.Optional(t.Object(loginFields, { additionalProperties: true })),
        query: t.Object(loginFields, { additionalProperties: true }),
        detail: {
          summary: "DID login (EIP-712 Login signature); JSON body, form or query. With Accept: application/json, answers tokens",
          tags: ["storage"],
        },
      },
    )
    .get("/login", ({ query }) => storage.loginInfo(query.did), {
      query: t.Object({ did: t.Optional(t.String({ maxLength: 200 })) }),
      detail: { summary: "Login info of a DID's latest session (spec 2.2)", tags: ["storage"] },
      response: { 200: t.Object({ token: t.String(), timestamp: t.Number(), requestID: t.String() }), 400: storageErrorBody, 404: storageErrorBody },
    })
    .get("/traffichash", ({ request, query }) => storage.trafficHash(request, query.size), {
      query: t.Object({ size: t.Optional(t.String()) }),
      detail: { summary: "The EIP-712 digest of a traffic voucher for a cumulative size, with the payer's counter (D6)", tags: ["storage"] },
    })
    .post("/:type", ({ request, params, path }) => (checkNotAccount(path), storage.upload(request, params.type)), {
      parse: "none",
      params: typeParam,
      detail: {
        summary: "Upload one file (multipart: did, token, requestID, payload, signature, size, sign, then file)",
        tags: ["storage"],
      },
      response: { 200: entry },
    })
    .get("/:type/listobjects", ({ request, params, query, path }) => (checkNotAccount(path), storage.list(request, params.type, query)), {
      params: typeParam,
      query: t.Object({ limit: t.Optional(t.String()), after: t.Optional(t.String()) }),
      detail: { summary: "The caller's files on this back-end (spec 2.5); optional limit/after paging", tags: ["storage"] },
    })
    .get("/:type/delete", ({ request, params, query, path }) => (checkNotAccount(path), storage.remove(request, params.type, query)), {
      params: typeParam,
      query: t.Record(t.String(), t.String()),
      detail: { summary: "Delete a dfs file by ID (signed restricted call); ipfs answers 518", tags: ["storage"] },
    })
    .get("/:type/:cid", ({ request, params, query, path }) => (checkNotAccount(path), storage.download(request, params.type, params.cid, query)), {
      params: t.Object({ type: t.String(), cid: t.String() }),
      query: voucherQuery,
      detail: { summary: "Download a file by Cid with a traffic voucher (size, sign); Range, HEAD, ETag", tags: ["storage"] },
    })
    // Elysia answers HEAD on a dynamic route with the GET handler and then sets Content-Length to
    // the (empty) body's length; a download's HEAD must tell the file's length, so it is served here.
    .onRequest(({ request }) => {
      if (request.method !== "HEAD") return;
      const url = new URL(request.url);
      const m = /^\/([^/]+)\/([^/]+)\/?$/.exec(url.pathname);
      if (!m || isAccountPath(`/${m[1]}`)) return;
      let type: string;
      let cid: string;
      try {
        [type, cid] = [decodeURIComponent(m[1] as string), decodeURIComponent(m[2] as string)];
      } catch {
        throw storageError.badRequest("malformed path");
      }
      // Only a Cid makes a download; other segments (listobjects, space, …) are routes of their own.
      if (!isCid(cid)) return;
      return storage.download(request, type, cid, Object.fromEntries(url.searchParams));
    });
