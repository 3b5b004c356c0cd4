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
import { S3Error, s3Error, toS3Error, type S3Code } from "./errors.ts";
import { createMultipart, type MultipartLimits } from "./multipart.ts";
import { createObjects, importsCar } from "./objects.ts";
import { notImplemented, refuseUnsupportedHeaders, subresourceOf, UNCONFIGURED } from "./subresources.ts";
import { errorResponse, xmlResponse } from "./xml.ts";

export interface S3ApiDeps {
  sql: Sql;
  direct: DirectStorage;
  findAccessKey: FindAccessKey;
  chainId: number;
  log: Logger;
  now?: () => number;
  /** Open multipart uploads and parts per account; S3's own defaults unless lowered (tests). */
  multipartLimits?: Partial<MultipartLimits>;
}

const BUCKETS: BackendKind[] = ["dfs", "ipfs"];

/** S3's bucket naming rules: 3–63 lowercase letters, digits, dots and hyphens, a letter or digit at
 * each end, no `..`, not an IP address. A name outside them is InvalidBucketName, not a missing bucket. */
function checkBucketName(name: string): void {
  const ok = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(name) && !name.includes("..") && !/^\d+\.\d+\.\d+\.\d+$/.test(name);
  if (!ok) throw s3Error("InvalidBucketName", "The specified bucket is not valid: bucket names are 3 to 63 lowercase letters, digits, dots and hyphens", { BucketName: name });
}

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

/** x-amz-copy-source: `[/]bucket/key[?versionId=…]`, URL-encoded. The version is as GET's
 * `versionId`: `null` is the object (versioning is never on), any other NoSuchVersion. */
function copySource(header: string): { bucket: string; key: string } {
  const at = header.indexOf("?");
  const path = at < 0 ? header : header.slice(0, at);
  const t = target(path.startsWith("/") ? path : `/${path}`);
  if (!t.bucket || !t.key) throw s3Error("InvalidArgument", "x-amz-copy-source must be bucket/key");
  const versionId = at < 0 ? null : new URLSearchParams(header.slice(at + 1)).get("versionId");
  if (versionId !== null && versionId !== "null") throw s3Error("NoSuchVersion", "The specified version does not exist: versioning is never enabled here (the only version is null)", { Key: t.key, VersionId: versionId });
  return t;
}

/**
 * Requests a browser makes that this gateway does not serve, known by their shape before any
 * signature is looked for: unanswered, they would be refused as anonymous, which names the wrong
 * cause. A POST policy (browser form) upload is a POST of a multipart/form-data body to a bucket;
 * a CORS preflight is an OPTIONS with Origin and Access-Control-Request-Method.
 */
function browserOnly(request: Request, path: string): S3Error | undefined {
  const headers = request.headers;
  if (request.method === "POST" && /^\/[^/]+\/?$/.test(path) && /^multipart\/form-data\b/i.test(headers.get("content-type") ?? "")) {
    return s3Error("NotImplemented", "POST policy (browser form) uploads are not supported: use a presigned PUT");
  }
  if (request.method === "OPTIONS" && headers.has("origin") && headers.has("access-control-request-method")) return s3Error("NotImplemented", "CORS is not supported");
  return undefined;
}

/**
 * Whether the path of a request target as sent has a `.` or `..` segment (`%2E` spelt or not,
 * `\` taken as `/` as the URL parser takes it). The parser resolves those before the request is
 * seen, so the path the signature covers is no longer the one checked: such a request would fail
 * as a bad signature, when its cause is the key, which may not have such segments (checkKey).
 */
function hasDotSegment(target: string): boolean {
  if (!target.startsWith("/")) return false;
  const path = target.split("?", 1)[0] as string;
  return path.split(/[\/\\]/).some((segment) => {
    const s = segment.replace(/%2e/gi, ".");
    return s === "." || s === "..";
  });
}

export function createS3Api(deps: S3ApiDeps) {
  const { direct, log } = deps;
  const now = deps.now ?? Date.now;
  const objects = createObjects(direct);
  const multipart = createMultipart({ sql: deps.sql, direct, log, now, limits: deps.multipartLimits });

  /** A bucket this server runs, within the key's scope (writes need a read-write key). */
  function bucketOf(auth: Authenticated, bucket: string, write: boolean): BackendKind {
    checkBucketName(bucket);
    if (!isStorageKind(bucket)) throw s3Error("NoSuchBucket", "The specified bucket does not exist: the buckets are dfs and ipfs", { BucketName: bucket });
    authorize(auth.key, bucket, write);
    try {
      return direct.kind(bucket);
    } catch {
      throw s3Error("NoSuchBucket", `This gateway does not run ${bucket}`, { BucketName: bucket });
    }
  }

  const notAllowed = () => s3Error("MethodNotAllowed", "The specified method is not allowed against this resource.");

  /**
   * By sub-resource first (subresources.ts), then by method: a request that names a sub-resource
   * never reaches the object's own bytes.
   */
  async function route(request: Request, url: URL, auth: Authenticated): Promise<Response> {
    const method = request.method;
    const q = url.searchParams;
    const { bucket, key } = target(url.pathname);
    const did = auth.did;
    refuseUnsupportedHeaders(request.headers, method === "GET" || method === "HEAD" ? "read" : "write");

    if (!bucket) {
      subresourceOf(q, "service");
      if (method !== "GET") throw notAllowed();
      const visible = BUCKETS.filter((b) => (auth.key.bucket === "*" || auth.key.bucket === b) && (() => {
        try {
          direct.kind(b);
          return true;
        } catch {
          return false;
        }
      })());
      return objects.buckets(did, visible, q);
    }

    if (!key) return bucketRoute(request, q, bucket, auth);

    const sub = subresourceOf(q, "object");
    const versionId = q.get("versionId");
    if (versionId !== null && versionId !== "null") throw s3Error("NoSuchVersion", "The specified version does not exist: versioning is never enabled here (the only version is null)", { Key: key, VersionId: versionId });
    switch (sub) {
      case "acl": {
        const kind = bucketOf(auth, bucket, method !== "GET");
        if (method === "GET") return objects.acl(did, kind, key);
        if (method === "PUT") return objects.putAcl(did, kind, key, await smallBody(request, auth));
        throw notAllowed();
      }
      case "tagging":
        // No tags are ever stored (writes that set them are refused), so an object's tag set is
        // empty: aws-cli reads it to copy an object in parts, and sets nothing for an empty set.
        if (method !== "GET") throw s3Error("NotImplemented", "Object tags are not supported: this gateway does not implement setting or removing them; nothing was changed");
        return objects.tagging(did, bucketOf(auth, bucket, false), key);
      case "attributes":
        if (method !== "GET") throw notAllowed();
        return objects.attributes(did, bucketOf(auth, bucket, false), key, request.headers.get("x-amz-object-attributes"), { maxParts: request.headers.get("x-amz-max-parts"), marker: request.headers.get("x-amz-part-number-marker") });
      case "uploads":
        if (method !== "POST") throw notAllowed();
        // A multipart upload stores its bytes as they are: a CAR to import must come whole.
        if (importsCar(request.headers)) throw s3Error("NotImplemented", "A CAR is imported from one PutObject, not a multipart upload: send it in one request (aws s3 cp: raise multipart_threshold above its size)");
        return multipart.create(did, bucketOf(auth, bucket, true), bucket, key, request.headers);
      case "uploadId": {
        const uploadId = q.get("uploadId") as string;
        switch (method) {
          case "GET":
            return multipart.listParts(did, bucketOf(auth, bucket, false), bucket, key, uploadId, q);
          case "PUT": {
            const source = request.headers.get("x-amz-copy-source");
            if (source !== null) {
              const kind = bucketOf(auth, bucket, true);
              const from = copySource(source);
              const row = await objects.copySource(did, { kind: bucketOf(auth, from.bucket, false), key: from.key }, request.headers);
              return multipart.uploadPartCopy(did, kind, key, uploadId, q.get("partNumber"), row, request.headers.get("x-amz-copy-source-range"));
            }
            return multipart.uploadPart(did, bucketOf(auth, bucket, true), key, uploadId, q.get("partNumber"), (want) => payloadOf(request, auth, want), request.headers.get("content-md5"));
          }
          case "POST":
            return multipart.complete(did, bucketOf(auth, bucket, true), bucket, key, uploadId, await smallBody(request, auth, { objectChecksum: true }), request.headers);
          case "DELETE":
            return multipart.abort(did, bucketOf(auth, bucket, true), key, uploadId);
          default:
            throw notAllowed();
        }
      }
    }

    switch (method) {
      case "GET":
      case "HEAD":
        return objects.get(did, bucketOf(auth, bucket, false), key, request, q.get("partNumber"));
      case "PUT": {
        if (q.has("partNumber")) throw s3Error("InvalidRequest", "partNumber needs an uploadId: a part belongs to a multipart upload");
        const kind = bucketOf(auth, bucket, true);
        const source = request.headers.get("x-amz-copy-source");
        if (source !== null) {
          const from = copySource(source);
          const fromKind = bucketOf(auth, from.bucket, false);
          return objects.copy(did, kind, key, { kind: fromKind, key: from.key }, request.headers);
        }
        if (importsCar(request.headers)) return objects.importCar(did, kind, key, payloadOf(request, auth), request.headers.get("content-md5"));
        return objects.put(did, kind, key, payloadOf(request, auth), request.headers);
      }
      case "DELETE":
        return objects.remove(did, bucketOf(auth, bucket, true), key, request.headers);
      default:
        throw notAllowed();
    }
  }

  /** Requests on a bucket itself: its listing, uploads, DeleteObjects, and what S3 asks of a bucket. */
  async function bucketRoute(request: Request, q: URLSearchParams, bucket: string, auth: Authenticated): Promise<Response> {
    const method = request.method;
    const did = auth.did;
    const sub = subresourceOf(q, "bucket");
    if (method === "PUT" && sub === undefined) {
      // CreateBucket: the buckets are fixed, the back-ends.
      checkBucketName(bucket);
      if (isStorageKind(bucket)) throw s3Error("BucketAlreadyOwnedByYou", `The bucket ${bucket} already exists: the buckets are dfs and ipfs, and no others can be made`, { BucketName: bucket });
      throw s3Error("AccessDenied", "Buckets cannot be created: the buckets are dfs and ipfs");
    }
    if (method === "DELETE" && sub === undefined) {
      bucketOf(auth, bucket, false);
      throw notAllowed();
    }
    if (sub !== undefined && Object.hasOwn(UNCONFIGURED, sub)) {
      bucketOf(auth, bucket, method !== "GET");
      if (method === "GET") throw s3Error(UNCONFIGURED[sub] as S3Code, `The bucket ${bucket} has no ${sub} configuration (this gateway keeps none)`, { BucketName: bucket });
      throw notImplemented(sub);
    }
    switch (sub) {
      case "delete":
        if (method !== "POST") throw notAllowed();
        return objects.removeMany(did, bucketOf(auth, bucket, true), await smallBody(request, auth));
      case "acl": {
        bucketOf(auth, bucket, method !== "GET");
        if (method === "GET") return objects.bucketAcl(did);
        if (method === "PUT") return objects.putBucketAcl(await smallBody(request, auth));
        throw notAllowed();
      }
      case "location":
        bucketOf(auth, bucket, false);
        if (method !== "GET") throw notAllowed();
        return xmlResponse("LocationConstraint", []);
      case "versioning":
        bucketOf(auth, bucket, false);
        if (method === "GET") return xmlResponse("VersioningConfiguration", []);
        throw s3Error("NotImplemented", "Versioning cannot be enabled on this gateway's buckets");
      case "uploads":
        if (method !== "GET") throw notAllowed();
        return multipart.listUploads(did, bucketOf(auth, bucket, false), bucket, q);
    }
    const kind = bucketOf(auth, bucket, false);
    if (method === "HEAD") return new Response(null, { status: 200, headers: { "x-amz-bucket-region": auth.creds.region } });
    if (method !== "GET") throw notAllowed();
    return objects.list(did, kind, bucket, q);
  }

  /** Answers one request (`target`: its request target as sent, when the listener knows it); never throws. */
  async function handle(request: Request, target?: string): Promise<Response> {
    const requestId = Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex").toUpperCase();
    let url: URL;
    let response: Response;
    try {
      url = new URL(request.url);
    } catch {
      return errorResponse(s3Error("InvalidArgument", "The request URL is not valid"), "/", requestId);
    }
    try {
      if (target !== undefined && hasDotSegment(target)) throw s3Error("InvalidArgument", "Object keys are file names: no '.' or '..' segments (the request path has one)");
      const refused = browserOnly(request, url.pathname);
      if (refused) throw refused;
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
