/**
 * Storage middleware routes (spec 4.1 rows 1–6 and 8). Thin: each reads its request (the Bearer
 * caller, the multipart form, the Range header, HEAD) and hands typed values to the storage
 * service, then writes its typed answer as HTTP. `:type` is the storage type; anything but `dfs`
 * and `ipfs` is 518. `GET|HEAD /ipfs/<cid>` asked as a raw block or a CAR is the trustless
 * gateway's (src/gateway, D17), and without a voucher the path gateway's (D25); the download
 * answers the rest.
 */
import { Elysia, t } from "elysia";
import { isAccountPath, storageError } from "../http/errors.ts";
import { deleteResult, didLoginTokens, fileEntry, fileList, loginInfo, trafficHashResult } from "../http/model.ts";
import { access, storageErrors, storageTypeParam } from "../http/openapi.ts";
import { streamsBody } from "../http/body-limit.ts";
import { requestClientKey } from "../http/client-key.ts";
import { readFilePart } from "../http/multipart.ts";
import { parseRange } from "../http/range.ts";
import { userContentHeaders } from "../http/user-content.ts";
import { checkNotAccount, rememberedDids, requireCaller, type AccessTokens } from "../http/storage-guard.ts";
import { parseDid } from "../identity/did.ts";
import { REFUSED_PAYER_LIMIT, type FileHead, type HeadAccess, type ReadableFile, type Storage } from "./service.ts";
import { CID } from "multiformats/cid";

const isCid = (s: string) => {
  try {
    CID.parse(s);
    return true;
  } catch {
    return false;
  }
};

// No length limits here: D4 makes every refusal of a login a 401, and the login checks each field
// itself (the time window first, then cheap patterns), inside the 64 KiB cap on parsed bodies.
const loginFields = {
  did: t.Optional(t.String()),
  token: t.Optional(t.String()),
  timestamp: t.Optional(t.Union([t.String(), t.Number()])),
  signature: t.Optional(t.String()),
};
const voucherQuery = t.Object(
  {
    size: t.Optional(t.String({ description: "The payer's cumulative count of bytes the voucher covers" })),
    sign: t.Optional(t.String({ description: "The payer's EIP-712 signature of Voucher(address seller,uint256 size,string cid,uint64 expires), cid being this path's Cid (CIDv1, base32)" })),
    expires: t.Optional(t.String({ description: "The voucher's expiry in unix seconds, when it has one (absent: 0, none)" })),
    did: t.Optional(t.String({ description: "The DID the payer reads for, when the payer is one of its keys" })),
  },
  { additionalProperties: true },
);
const typeParam = t.Object({ type: storageTypeParam });

/** A download's body: bytes, not JSON (the schema documents; a Response is never validated). */
const fileBytes = t.Unknown({
  description:
    "The file's bytes (a range of them for 206); asked as application/vnd.ipld.raw or application/vnd.ipld.car, a block or a CAR of public content (the trustless gateway). Always Content-Disposition: attachment, X-Content-Type-Options: nosniff and Content-Security-Policy: sandbox; default-src 'none'; a script is sent as text/plain",
});

const wantsJson = (request: Request) => (request.headers.get("accept") ?? "").includes("application/json");

// Uploads: POST /:type (one path segment) other than the fixed single-segment routes.
streamsBody((method, path) => method === "POST" && /^\/[^/]+\/?$/.test(path) && path !== "/login" && path !== "/rpc");

/** A stream of one part, `bytes` as they are. */
const onePart = (bytes: Uint8Array) =>
  new ReadableStream<Uint8Array>({
    pull(controller) {
      if (bytes.byteLength > 0) controller.enqueue(bytes);
      controller.close();
    },
  });

/** A download as HTTP: 416 for a range outside the file, headers alone for HEAD, else the bytes. */
async function answerDownload(request: Request, file: FileHead & Partial<Pick<ReadableFile, "send">>): Promise<Response> {
  const headers: Record<string, string> = {
    // Type, attachment, nosniff and the sandbox: what every answer of user bytes carries.
    ...userContentHeaders({ name: file.name }),
    etag: `"${file.cid}"`,
    "accept-ranges": "bytes",
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
  };
  // D20: a client decrypts by itself what its owner's client encrypted, with the owner's share.
  if (file.encryption) {
    headers["x-stowage-encryption"] = file.encryption;
    headers["x-stowage-owner"] = file.owner;
  }
  const range = parseRange(request.headers.get("range"), file.size);
  if (range === "unsatisfiable") {
    return new Response(null, { status: 416, headers: { ...headers, "content-range": `bytes */${file.size}` } });
  }
  const length = range ? range.end - range.start + 1 : file.size;
  headers["content-length"] = String(length);
  if (range) headers["content-range"] = `bytes ${range.start}-${range.end}/${file.size}`;
  const status = range ? 206 : 200;
  if (request.method === "HEAD" || !file.send) return new Response(null, { status, headers });
  const body = await file.send(range);
  // A body read whole goes as a stream of its one part: new Response(bytes) copies the bytes
  // (≈ 0.1 ms and 7 % of a ranged GET's server samples); the listener sends that part as it is.
  return new Response(body instanceof Uint8Array ? onePart(body) : body, { status, headers });
}

/** The trustless gateway's answer (D17) to `/:type/:cid` asked as a raw block or a CAR; undefined
 * when it is not asked so (the download answers). Handed in, so storage does not import the gateway,
 * which reads its blocks through storage. */
export type TrustlessAnswer = (request: Request, type: string, cid: string, query: Record<string, string | undefined>) => Promise<Response> | undefined;

/** The path gateway's answer (D25) to `/ipfs/<cid>` asked with no voucher; undefined otherwise (the download answers). */
export type PathAnswer = (request: Request, query: Record<string, string | undefined>) => Promise<Response> | undefined;

export const storageRoutes = (storage: Storage, guard: { tokens: AccessTokens; chainId: number }, extra: { trustless?: TrustlessAnswer; path?: PathAnswer } = {}) => {
  const readDid = rememberedDids((did) => parseDid(did, guard.chainId));
  const caller = (request: Request) => requireCaller(request, guard.tokens, readDid);
  const download = async (request: Request, type: string, cid: string, query: Record<string, string | undefined>) =>
    (await extra.trustless?.(request, type, cid, query)) ?? (type === "ipfs" ? await extra.path?.(request, query) : undefined) ?? answerDownload(request, await storage.download(type, cid, query, requestClientKey(request)));
  // A HEAD spends nothing, but tells a file's name and size only to whoever may read it (D22):
  // with a Bearer token it asks for the account's own files, never the path gateway's public ones.
  const head = async (request: Request, type: string, cid: string, query: Record<string, string | undefined>) => {
    const access: HeadAccess = request.headers.has("authorization") ? { caller: () => caller(request) } : { voucher: query };
    return (
      (await extra.trustless?.(request, type, cid, query)) ??
      (type === "ipfs" && !("caller" in access) ? await extra.path?.(request, query) : undefined) ??
      answerDownload(request, await storage.head(type, cid, access, requestClientKey(request)))
    );
  };
  return new Elysia({ name: "storage" })
    .post(
      "/login",
      async ({ body, query, request }) => {
        const input = { ...query, ...(typeof body === "object" && body ? body : {}) };
        const tokens = await storage.login(input, wantsJson(request), requestClientKey(request));
        if (tokens) return Response.json({ result: 1, data: tokens });
        return new Response("Login success!", { headers: { "content-type": "text/plain; charset=utf-8" } });
      },
      {
        body: t.Optional(t.Object(loginFields, { additionalProperties: true })),
        query: t.Object(loginFields, { additionalProperties: true }),
        detail: {
          summary: "DID login (EIP-712 Login signature); JSON body, form or query. With Accept: application/json, answers tokens. Each login needs a fresh random token: one that has logged in before is refused (401)",
          tags: ["storage"],
          ...access.public,
        },
        response: {
          200: t.Object({ result: t.Literal(1), data: didLoginTokens }, { description: 'With Accept: application/json; otherwise text/plain "Login success!"' }),
          ...storageErrors(400, 401, 429),
        },
      },
    )
    .get("/login", ({ query }) => storage.loginInfo(query.did), {
      query: t.Object({ did: t.Optional(t.String({ maxLength: 200 })) }),
      detail: { summary: "Login info of a DID's latest session", tags: ["storage"], ...access.public },
      response: { 200: loginInfo, ...storageErrors(400, 404) },
    })
    .get("/traffichash", async ({ request, query }) => storage.trafficHash(await caller(request), query), {
      query: t.Object({
        size: t.Optional(t.String({ description: "The voucher's cumulative size in bytes" })),
        cid: t.Optional(t.String({ maxLength: 200, description: "The Cid of the file the voucher reads or uploads; without it, only the counter is answered (no hash)" })),
        expires: t.Optional(t.String({ maxLength: 24, description: "The voucher's expiry, unix seconds; 0 or absent for none" })),
        payer: t.Optional(t.String({ maxLength: 64, description: "Whose counter to answer: the account or one of its keys (a delegate, a console session key); default the account" })),
      }),
      detail: {
        summary: "The EIP-712 digest of a traffic voucher Voucher(seller, size, cid, expires) for one file, with the payer's counter (what its vouchers have signed for so far)",
        description:
          "With cid (and optional expires), hash is the digest to sign, and cid and expires echo what it covers (cid in its canonical CIDv1 base32 form). Without cid, the answer carries the payer's counter (used, remaining) but no hash: a voucher always names the file it reads or uploads.",
        tags: ["storage"],
        ...access.bearer,
      },
      response: { 200: trafficHashResult, ...storageErrors(400, 401) },
    })
    .post(
      "/:type",
      async ({ request, params, path, query }) => {
        checkNotAccount(path);
        const kind = storage.kind(params.type);
        const who = await caller(request);
        if (query.format !== undefined && query.format !== "car") throw storageError.badRequest("format may only be car (a CAR to import)");
        return storage.upload(who, kind, { declared: Number(request.headers.get("content-length") ?? 0), form: () => readFilePart(request), car: query.format === "car" });
      },
      {
      parse: "none",
      params: typeParam,
      query: t.Object({ format: t.Optional(t.String({ description: "car: the file is a CAR to import (as a file part of type application/vnd.ipld.car is)" })) }, { additionalProperties: true }),
      detail: {
        summary:
          "Upload one file (multipart: did, token, requestID, payload, signature, size, sign, optional expires and cid, then file). On /ipfs/, a CAR (a file part of type application/vnd.ipld.car, or ?format=car) is imported instead: every block checked against its CID, each root (a UnixFS file or directory) becomes a file with its own CID, all or nothing; the answer lists them. Its payload is the CAR's SHA-256, or the CID of its one root",
        description:
          "The voucher (size, sign, expires when not 0) signs Voucher(seller, size, cid, expires) for the file's Cid: the payload when it is the Cid, else a cid field before the file part. For a CAR, the Cid of its first root.",
        tags: ["storage"],
        ...access.upload,
      },
      response: { 200: t.Union([fileEntry, fileList], { description: "The file's entry; for a CAR import, the list of its files (one per root)" }), ...storageErrors(400, 401, 402, 403, 410, 411, 413, 516, 517, 518) },
      },
    )
    .get(
      "/:type/listobjects",
      async ({ request, params, query, path }) => {
        checkNotAccount(path);
        const kind = storage.kind(params.type);
        return storage.list(await caller(request), kind, query);
      },
      {
      params: typeParam,
      query: t.Object({ limit: t.Optional(t.String()), after: t.Optional(t.String()) }),
      detail: { summary: "The caller's files on this back-end; optional limit/after paging", tags: ["storage"], ...access.bearer },
      response: { 200: fileList, ...storageErrors(400, 401, 518) },
      },
    )
    .get("/:type/delete", ({ request, params, query, path }) => (checkNotAccount(path), storage.remove(params.type, () => caller(request), query)), {
      params: typeParam,
      query: t.Record(t.String(), t.String()),
      detail: { summary: "Delete a dfs file by ID (signed restricted call); ipfs answers 518", tags: ["storage"], ...access.restricted },
      response: { 200: deleteResult, ...storageErrors(400, 401, 403, 404, 516, 518) },
    })
    .get("/:type/:cid", ({ request, params, query, path }) => (checkNotAccount(path), download(request, params.type, params.cid, query)), {
      params: t.Object({ type: t.String(), cid: t.String() }),
      query: voucherQuery,
      detail: {
        summary: "Download a file by Cid with a traffic voucher for that Cid (size, sign, expires); Range, HEAD, ETag",
        description:
          `The voucher signs Voucher(seller, size, cid, expires) for this path's Cid and is accepted once, before expires. A voucher for another file, an expired one, or one of the old Voucher(seller, size) type is refused. A client whose vouchers named a DID (did) for keys that may not sign for it ${REFUSED_PAYER_LIMIT.max} times in a minute is answered 429 for vouchers naming a DID by another key than its own address until the minute ends. HEAD answers the same headers and charges nothing, for an unspent voucher for this Cid (not spent by the HEAD) or the Bearer token of an account that may read the file. On /ipfs/<cid>, Accept application/vnd.ipld.raw or .car (or ?format=raw|car) asks the trustless gateway instead: public content, no voucher. On /ipfs/<cid> without a voucher, the path gateway answers: a public, free file (or a directory's listing) with Range and ETag; 404 for a CID not public here and 403 for one sold or for chosen readers, each saying how to read it with a voucher; a browser is sent to STOWAGE_GATEWAY_ORIGIN when it is set (301). Content the gateway blocks answers 410.`,
        tags: ["storage"],
        ...access.download,
      },
      response: {
        200: fileBytes,
        206: fileBytes,
        301: t.Unknown({ description: "Path gateway: a directory asked without its trailing /, or a browser sent to the site origin (STOWAGE_GATEWAY_ORIGIN)" }),
        304: t.Unknown({ description: "Trustless or path gateway: If-None-Match named its ETag" }),
        ...storageErrors(400, 402, 403, 404, 406, 410, 416, 429, 517, 518),
      },
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
      return head(request, type, cid, Object.fromEntries(url.searchParams));
    });
};
