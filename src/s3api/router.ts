/**
 * The S3 API's one request handler (D18): path-style addressing (`/<bucket>/<key>`), every
 * request authenticated (auth.ts) before anything else, then dispatched by method, path and
 * S3's sub-resource query (`?uploads`, `?uploadId`, `?delete`, …) to objects.ts or multipart.ts.
 * Every failure leaves here as an S3 XML error with an S3 code; an unexpected one is logged
 * whole and answered InternalError, saying nothing of its cause.
 */
import type { Logger } from "../log.ts";
import type { Sql } from "../db/sql.ts";
import { isStorageKind } from "../http/model.ts";
import type { BackendKind } from "../storage/backend.ts";
import type { DirectStorage } from "../storage/direct.ts";
import { authenticate, authorize, payloadOf, smallBody, type Authenticated, type FindAccessKey } from "./auth.ts";
import { S3Error, s3Error, toS3Error } from "./errors.ts";
import { createMultipart } from "./multipart.ts";
import { createObjects } from "./objects.ts";
import { errorResponse, xmlResponse } from "./xml.ts";

export interface S3ApiDeps {
  sql: Sql;
  direct: DirectStorage;
  findAccessKey: FindAccessKey;
  chainId: number;
  log: Logger;
  now?: () => number;
}

const BUCKETS: BackendKind[] = ["dfs", "ipfs"];

function decode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw s3Error("InvalidArgument", "The request path is not valid percent-encoding");
  }
}

/** `/bucket/key…` → bucket and key (either may be empty). */
function target(path: string): { bucket: string; key: string } {
  const rest = path.replace(/^\//, "");
  const slash = rest.indexOf("/");
  if (slash < 0) return { bucket: decode(rest), key: "" };
  return { bucket: decode(rest.slice(0, slash)), key: decode(rest.slice(slash + 1)) };
}

/** x-amz-copy-source: `[/]bucket/key[?versionId=…]`, URL-encoded. */
function copySource(header: string): { bucket: string; key: string } {
  const [path] = header.split("?") as [string];
  const t = target(path.startsWith("/") ? path : `/${path}`);
  if (!t.bucket || !t.key) throw s3Error("InvalidArgument", "x-amz-copy-source must be bucket/key");
  return t;
}

export function createS3Api(deps: S3ApiDeps) {
  const { direct, log } = deps;
  const now = deps.now ?? Date.now;
  const objects = createObjects(direct);
  const multipart = createMultipart({ sql: deps.sql, direct, log, now });

  /** A bucket this server runs, within the key's scope (writes need a read-write key). */
  function bucketOf(auth: Authenticated, bucket: string, write: boolean): BackendKind {
    if (!isStorageKind(bucket)) throw s3Error("NoSuchBucket", "The specified bucket does not exist: the buckets are dfs and ipfs", { BucketName: bucket });
    authorize(auth.key, bucket, write);
    try {
      return direct.kind(bucket);
    } catch {
      throw s3Error("NoSuchBucket", `This gateway does not run ${bucket}`, { BucketName: bucket });
    }
  }

  async function route(request: Request, url: URL, auth: Authenticated): Promise<Response> {
    const method = request.method;
    const q = url.searchParams;
    const { bucket, key } = target(url.pathname);
    const did = auth.did;

    if (!bucket) {
      if (method !== "GET") throw s3Error("MethodNotAllowed", "The specified method is not allowed against this resource.");
      const visible = BUCKETS.filter((b) => (auth.key.bucket === "*" || auth.key.bucket === b) && (() => {
        try {
          direct.kind(b);
          return true;
        } catch {
          return false;
        }
      })());
      return objects.buckets(did, visible);
    }

    if (!key) {
      if (method === "PUT") {
        // CreateBucket: the buckets are fixed, the back-ends.
        if (isStorageKind(bucket)) throw s3Error("BucketAlreadyOwnedByYou", `The bucket ${bucket} already exists: the buckets are dfs and ipfs, and no others can be made`, { BucketName: bucket });
        throw s3Error("AccessDenied", "Buckets cannot be created: the buckets are dfs and ipfs");
      }
      if (method === "DELETE") throw s3Error("MethodNotAllowed", "Buckets cannot be deleted: the buckets are dfs and ipfs");
      if (method === "POST" && q.has("delete")) {
        const kind = bucketOf(auth, bucket, true);
        return objects.removeMany(did, kind, await smallBody(request, auth));
      }
      const kind = bucketOf(auth, bucket, false);
      if (method === "HEAD") return new Response(null, { status: 200, headers: { "x-amz-bucket-region": auth.creds.region } });
      if (method !== "GET") throw s3Error("MethodNotAllowed", "The specified method is not allowed against this resource.");
      if (q.has("location")) return xmlResponse("LocationConstraint", []);
      if (q.has("versioning")) return xmlResponse("VersioningConfiguration", []);
      if (q.has("uploads")) return multipart.listUploads(did, kind, bucket, q.get("prefix") ?? "");
      return objects.list(did, kind, bucket, q);
    }

    switch (method) {
      case "GET":
      case "HEAD": {
        const kind = bucketOf(auth, bucket, false);
        if (q.has("uploadId") && method === "GET") return multipart.listParts(did, kind, bucket, key, q.get("uploadId") as string);
        return objects.get(did, kind, key, request);
      }
      case "PUT": {
        const kind = bucketOf(auth, bucket, true);
        if (q.has("uploadId")) return multipart.uploadPart(did, kind, key, q.get("uploadId") as string, q.get("partNumber"), payloadOf(request, auth).stream);
        const source = request.headers.get("x-amz-copy-source");
        if (source !== null) {
          const from = copySource(source);
          const fromKind = bucketOf(auth, from.bucket, false);
          return objects.copy(did, kind, key, { kind: fromKind, key: from.key });
        }
        return objects.put(did, kind, key, payloadOf(request, auth), request.headers.get("content-md5"));
      }
      case "POST": {
        const kind = bucketOf(auth, bucket, true);
        if (q.has("uploads")) return multipart.create(did, kind, bucket, key, request.headers.get("content-type"));
        if (q.has("uploadId")) return multipart.complete(did, kind, bucket, key, q.get("uploadId") as string, await smallBody(request, auth));
        throw s3Error("MethodNotAllowed", "The specified method is not allowed against this resource.");
      }
      case "DELETE": {
        const kind = bucketOf(auth, bucket, true);
        if (q.has("uploadId")) return multipart.abort(did, kind, key, q.get("uploadId") as string);
        return objects.remove(did, kind, key);
      }
      default:
        throw s3Error("MethodNotAllowed", "The specified method is not allowed against this resource.");
    }
  }

  /** Answers one request; never throws. */
  async function handle(request: Request): Promise<Response> {
    const requestId = Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex").toUpperCase();
    let url: URL;
    let response: Response;
    try {
      url = new URL(request.url);
    } catch {
      return errorResponse(s3Error("InvalidArgument", "The request URL is not valid"), "/", requestId);
    }
    try {
      const auth = await authenticate({ method: request.method, path: url.pathname, query: url.searchParams, headers: request.headers }, { findAccessKey: deps.findAccessKey, chainId: deps.chainId, now });
      response = await route(request, url, auth);
    } catch (err) {
      let e = toS3Error(err);
      // A body cut short by its client is the client's doing, not ours to log as a failure.
      if (!e && request.signal.aborted) e = s3Error("IncompleteBody", "The request body ended before its declared length: the client went away");
      if (!e) {
        log.error("S3 request failed", { method: request.method, path: url.pathname, err: err instanceof Error ? (err.stack ?? err.message) : String(err) });
        e = new S3Error("InternalError", "We encountered an internal error. Please try again.");
      }
      response = errorResponse(e, url.pathname, requestId, request.method === "HEAD");
    }
    response.headers.set("x-amz-request-id", requestId);
    response.headers.set("server", "Stowage");
    return response;
  }

  return { handle, expire: multipart.expire };
}

export type S3Api = ReturnType<typeof createS3Api>;
