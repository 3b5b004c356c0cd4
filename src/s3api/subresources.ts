/**
 * S3 names what a request acts on by its query as much as by its method: `PUT /b/k?acl` sets an
 * object's ACL, `DELETE /b/k?tagging` removes its tags, and neither touches the object's bytes. A
 * router that looked at the method alone would empty an object for `put-object-acl` or delete it
 * for `delete-object-tagging`. So every request is classified here first, before any route: its
 * sub-resource (the one query name that selects the operation), and any request header that asks
 * for something this gateway cannot honour (server-side encryption, object lock, tags, ACL grants).
 * What is not served is refused with `501 NotImplemented`, never guessed at; a bucket
 * configuration this gateway never keeps (CORS, lifecycle, policy, …) reads back as none set.
 *
 * Query names that are parameters (listing's `prefix`, multipart's `partNumber`, a presigned
 * URL's `X-Amz-*`) pass. S3 itself ignores unknown parameters that carry a value; an unknown name
 * without one is how S3 spells a sub-resource (`?session`, `?renameObject`), so it is refused.
 *
 * @example
 *   const sub = subresourceOf(url.searchParams, "object") // "acl" | "attributes" | undefined …
 *   refuseUnsupportedHeaders(request.headers, "write")
 */
import { s3Error, type S3Code } from "./errors.ts";

/**
 * Bucket configurations this gateway never keeps, and the code S3 answers a read of one that was
 * never set: a GET of one says so (404: tools that read them, as many do before anything else,
 * take that for "none"); setting or deleting one is NotImplemented.
 */
export const UNCONFIGURED: Readonly<Record<string, S3Code>> = {
  cors: "NoSuchCORSConfiguration",
  encryption: "ServerSideEncryptionConfigurationNotFoundError",
  lifecycle: "NoSuchLifecycleConfiguration",
  "object-lock": "ObjectLockConfigurationNotFoundError",
  ownershipControls: "OwnershipControlsNotFoundError",
  policy: "NoSuchBucketPolicy",
  publicAccessBlock: "NoSuchPublicAccessBlockConfiguration",
  replication: "ReplicationConfigurationNotFoundError",
  tagging: "NoSuchTagSet",
  website: "NoSuchWebsiteConfiguration",
};

/** Sub-resources this gateway serves, by where they apply. */
const SERVED = {
  service: new Set<string>(),
  bucket: new Set(["acl", "delete", "location", "uploads", "versioning", ...Object.keys(UNCONFIGURED)]),
  object: new Set(["acl", "attributes", "tagging", "uploadId", "uploads"]),
} as const;

/** S3's sub-resources and operation selectors this gateway does not serve, on buckets or objects. */
const KNOWN = new Set([
  "accelerate",
  "acl",
  "analytics",
  "attributes",
  "cors",
  "delete",
  "encryption",
  "intelligent-tiering",
  "inventory",
  "legal-hold",
  "lifecycle",
  "location",
  "logging",
  "metadataConfiguration",
  "metadataTable",
  "metrics",
  "notification",
  "object-lock",
  "ownershipControls",
  "policy",
  "policyStatus",
  "publicAccessBlock",
  "renameObject",
  "replication",
  "requestPayment",
  "restore",
  "retention",
  "select",
  "session",
  "tagging",
  "torrent",
  "uploadId",
  "uploads",
  "versioning",
  "versions",
  "website",
]);

/** Parameters (not sub-resources) a request may carry, by where they apply. */
const PARAMETERS = {
  service: new Set(["bucket-region", "continuation-token", "max-buckets", "prefix"]),
  bucket: new Set([
    "continuation-token",
    "delimiter",
    "encoding-type",
    "fetch-owner",
    "key-marker",
    "list-type",
    "marker",
    "max-keys",
    "max-uploads",
    "prefix",
    "start-after",
    "upload-id-marker",
  ]),
  object: new Set(["max-parts", "part-number-marker", "partNumber", "versionId"]),
} as const;

/** Added by SDKs and presigned URLs on any request: the operation's name (AWS SDK v3), and SigV4's own. */
const anywhere = (name: string) => name === "x-id" || /^x-amz-/i.test(name);

export type Level = keyof typeof SERVED;

/**
 * The one sub-resource a request names, if any; a request naming one this gateway does not serve,
 * or two at once, is refused with 501 NotImplemented before anything is read or written.
 */
export function subresourceOf(query: URLSearchParams, level: Level): string | undefined {
  let found: string | undefined;
  for (const [name, value] of query) {
    if (anywhere(name) || PARAMETERS[level].has(name)) continue;
    if (level === "object" && name.startsWith("response-")) continue;
    // The multipart pair: `uploadId` selects an upload, `partNumber` (a parameter) a part of it.
    if (SERVED[level].has(name)) {
      if (found !== undefined && found !== name) throw notImplemented(`${found} and ${name} together`);
      found = name;
      continue;
    }
    if (KNOWN.has(name) || value === "") throw notImplemented(name);
    // Any other named parameter with a value: S3 ignores it, and so does this gateway.
  }
  return found;
}

export const notImplemented = (what: string) => s3Error("NotImplemented", `This gateway does not implement the ${what} sub-resource; nothing was changed`);

/** Canned ACLs that say what every object here already is: its owner's alone. */
const OWNER_ONLY_ACLS = new Set(["private", "bucket-owner-full-control", "bucket-owner-read"]);

/**
 * Request headers that ask for a behaviour this gateway does not have. Writes that ask for
 * server-side encryption (SSE-S3, SSE-KMS, SSE-C), object lock, tags at creation, a website
 * redirect, an append (`x-amz-write-offset-bytes`), ACL grants or a canned ACL that opens the object, or a storage class other than
 * STANDARD, are refused rather than stored without it; a read with SSE-C keys is refused too
 * (nothing here was stored under a customer key, and S3 answers such a read the same way).
 */
export function refuseUnsupportedHeaders(headers: Headers, use: "write" | "read"): void {
  for (const [name, value] of headers) {
    if (/^x-amz-server-side-encryption-customer-/.test(name)) {
      if (use === "read") throw s3Error("InvalidRequest", "The object was not stored with a customer-provided encryption key (SSE-C): send the request without x-amz-server-side-encryption-customer-* headers");
      throw s3Error("NotImplemented", "Server-side encryption with customer-provided keys (SSE-C) is not supported: encrypt on the client instead (stowage put --encrypt); nothing was stored");
    }
    if (use === "read") continue;
    if (name === "x-amz-server-side-encryption" || name.startsWith("x-amz-server-side-encryption-")) {
      throw s3Error("NotImplemented", `Server-side encryption (${name}: ${value}) is not supported: encrypt on the client instead (stowage put --encrypt); nothing was stored`);
    }
    if (name.startsWith("x-amz-object-lock-")) throw s3Error("NotImplemented", "Object lock is not supported; nothing was stored");
    if (name === "x-amz-tagging") throw s3Error("NotImplemented", "Object tags are not supported; nothing was stored");
    if (name === "x-amz-website-redirect-location") throw s3Error("NotImplemented", "Website redirects are not supported; nothing was stored");
    if (name.startsWith("x-amz-grant-")) throw s3Error("NotImplemented", "ACL grants are not supported: every object is its owner's alone; nothing was stored");
    if (name === "x-amz-acl" && !OWNER_ONLY_ACLS.has(value.trim())) {
      throw s3Error("NotImplemented", `The canned ACL ${value} is not supported: every object is its owner's alone (private); nothing was stored`);
    }
    // An append: S3 Express only. Taken as a PutObject it would replace the object with the
    // bytes meant to go after it.
    if (name === "x-amz-write-offset-bytes") throw s3Error("NotImplemented", "Appending to an object (x-amz-write-offset-bytes) is not supported: upload the whole object; nothing was stored");
    if (name === "x-amz-storage-class" && value.trim() !== "STANDARD") throw s3Error("InvalidStorageClass", "The storage class you specified is not valid: this gateway has STANDARD only");
  }
}
