/**
 * Who an S3 request is, and what its body really is. The access key named in the signature is
 * looked up (src/keys: known, not revoked or expired, its signer still signing for the DID), the
 * signature checked against its secret (sigv4.ts), and the key's scope — read-only or
 * read-write, one bucket or both — decides what the request may do. The body is handed on only
 * as the signature vouches for it: a signed SHA-256 is checked as the bytes flow (the stream
 * errors at the end on a mismatch, so nothing is kept), an aws-chunked body is decoded with its
 * chunk signatures checked (chunked.ts).
 */
import { createHash } from "node:crypto";
import type { AccessKey } from "../keys/index.ts";
import { parseDid, type Did } from "../identity/did.ts";
import { algorithmOf, CHECKSUM_HEADERS, checkedAtEnd, contentMd5, running, upperName, wellFormed, type Algorithm } from "./checksums.ts";
import { decodeChunked } from "./chunked.ts";
import { s3Error } from "./errors.ts";
import { checkTime, payloadMode, readCredentials, verifySignature, type Credentials, type SignedRequest } from "./sigv4.ts";

export type FindAccessKey = (accessKeyId: string) => Promise<AccessKey | undefined>;

export interface Authenticated {
  key: AccessKey;
  did: Did;
  creds: Credentials;
  signingKey: Uint8Array;
}

export async function authenticate(req: SignedRequest, deps: { findAccessKey: FindAccessKey; chainId: number; now: () => number }): Promise<Authenticated> {
  const creds = readCredentials(req);
  if (!creds) throw s3Error("AccessDenied", "Anonymous access is not allowed: sign requests with an access key (POST /v2/keys)");
  const key = await deps.findAccessKey(creds.accessKeyId);
  if (!key) throw s3Error("InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.", { AWSAccessKeyId: creds.accessKeyId });
  const signingKey = await verifySignature(req, creds, key.secretAccessKey);
  checkTime(creds, deps.now());
  return { key, did: parseDid(key.did, deps.chainId), creds, signingKey };
}

/** The key's scope: its bucket (or both), and writes only for a read-write key. */
export function authorize(key: AccessKey, bucket: string, write: boolean): void {
  if (key.bucket !== "*" && key.bucket !== bucket) throw s3Error("AccessDenied", `This access key is limited to the bucket ${key.bucket}`);
  if (write && key.access !== "rw") throw s3Error("AccessDenied", "This access key is read-only");
}

/** Errors at the end when the bytes' SHA-256 is not the signed one. */
function checkedSha256(source: ReadableStream<Uint8Array>, expected: string): ReadableStream<Uint8Array> {
  const hash = createHash("sha256");
  return checkedAtEnd(source, { update: (d) => hash.update(d), digest: () => hash.digest("hex") }, (got) => {
    if (got !== expected) throw s3Error("XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.");
  });
}

const empty = () => new ReadableStream<Uint8Array>({ start: (c) => c.close() });

/** x-amz-checksum-… headers that are not a checksum themselves. */
const OTHER_CHECKSUM_HEADERS = new Set(["x-amz-checksum-algorithm", "x-amz-checksum-type", "x-amz-checksum-mode"]);

/** What a body's flexible checksum came to: the algorithm and its value (base64), once the body has ended. */
export type BodyChecksum = { algorithm: Algorithm; value: string };

/** A request body as its signature vouches for it, its declared length, and its checksum. */
export interface Payload {
  stream: ReadableStream<Uint8Array>;
  declared?: number;
  /** The checksum the client sent (checked) or, when `want` named one and none was sent, the one
   * computed: known once the stream has ended; undefined when there is none. */
  checksum(): BodyChecksum | undefined;
}

/**
 * The request's payload as its signature vouches for it, its declared length (if any), and its
 * flexible checksum: one sent as a header or an aws-chunked trailer is checked against the bytes
 * (BadDigest at the end, so nothing is kept); `want` (a multipart upload's algorithm) is computed
 * when the client sent none, and a checksum of another algorithm is refused.
 */
export function payloadOf(request: Request, auth: Authenticated, want?: Algorithm, opts: { objectChecksum?: boolean } = {}): Payload {
  const raw = request.body ?? empty();
  const mode = payloadMode(auth.creds.payloadHash);
  const length = request.headers.get("content-length");
  let declared = length !== null && /^\d+$/.test(length) ? Number(length) : undefined;
  const headers = request.headers;
  // CompleteMultipartUpload's checksum header is the object's, not its request document's.
  const named = opts.objectChecksum ? [] : CHECKSUM_HEADERS.filter((h) => headers.has(h));
  // A checksum this gateway cannot compute is refused, never stored unchecked.
  for (const [name] of headers) {
    if (name.startsWith("x-amz-checksum-") && !OTHER_CHECKSUM_HEADERS.has(name) && !(CHECKSUM_HEADERS as readonly string[]).includes(name)) algorithmOf(name.slice("x-amz-checksum-".length));
  }
  if (named.length > 1) throw s3Error("InvalidRequest", "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.");
  const trailer = mode.kind === "chunked" ? headers.get("x-amz-trailer")?.trim().toLowerCase() : undefined;
  const trailerAlgorithm = trailer?.startsWith("x-amz-checksum-") ? algorithmOf(trailer.slice("x-amz-checksum-".length)) : undefined;
  const headerAlgorithm = named[0] ? (named[0].slice("x-amz-checksum-".length) as Algorithm) : undefined;
  const sent = headerAlgorithm ?? trailerAlgorithm;
  if (want && sent && sent !== want) throw s3Error("InvalidRequest", `Checksum Type mismatch occurred, expected checksum Type: ${want}, actual checksum Type: ${sent}`);

  let result: BodyChecksum | undefined;
  let stream: ReadableStream<Uint8Array>;
  switch (mode.kind) {
    case "unsigned":
      stream = raw;
      break;
    case "sha256":
      stream = checkedSha256(raw, mode.hex);
      break;
    case "chunked": {
      const decoded = headers.get("x-amz-decoded-content-length");
      if (decoded === null || !/^\d+$/.test(decoded)) throw s3Error("MissingContentLength", "A streamed (aws-chunked) upload needs x-amz-decoded-content-length");
      const signing = mode.signed ? { key: auth.signingKey, seed: auth.creds.signature, creds: auth.creds } : undefined;
      const received = (value: string) => {
        if (trailerAlgorithm) result = { algorithm: trailerAlgorithm, value };
      };
      stream = decodeChunked(raw, { signing, trailer: mode.trailer, decodedLength: Number(decoded), checksum: trailer, received });
      declared = Number(decoded);
      break;
    }
  }
  if (headerAlgorithm) {
    const expected = headers.get(named[0] as string) as string;
    if (!wellFormed(headerAlgorithm, expected)) throw s3Error("InvalidRequest", `Value for ${named[0]} header is invalid.`);
    stream = checkedAtEnd(stream, running(headerAlgorithm), (got) => {
      if (got !== expected) throw s3Error("BadDigest", `The ${upperName(headerAlgorithm)} you specified did not match the calculated checksum.`);
      result = { algorithm: headerAlgorithm, value: expected };
    });
  } else if (want && !trailerAlgorithm) {
    stream = checkedAtEnd(stream, running(want), (got) => {
      result = { algorithm: want, value: got };
    });
  }
  return { stream, declared, checksum: () => result };
}

/** A small request document (DeleteObjects, CompleteMultipartUpload), read whole up to `max` bytes;
 * a Content-MD5 sent with it must be its MD5 (BadDigest: nothing is acted on). */
export async function smallBody(request: Request, auth: Authenticated, opts: { objectChecksum?: boolean } = {}, max = 2 * 1024 * 1024): Promise<string> {
  const verify = contentMd5(request.headers.get("content-md5"));
  const { stream } = payloadOf(request, auth, undefined, opts);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += chunk.byteLength;
    if (size > max) throw s3Error("InvalidRequest", `The request document is larger than ${max} bytes`);
    chunks.push(chunk);
  }
  const body = Buffer.concat(chunks);
  verify(createHash("md5").update(body).digest("hex"));
  return body.toString("utf8");
}
