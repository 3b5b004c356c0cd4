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
import { CHECKSUM_HEADERS, runningChecksum } from "./checksums.ts";
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

/** Passes bytes through to a running digest, and errors at the end when `check` throws for it. */
function checkedAtEnd(source: ReadableStream<Uint8Array>, sum: { update(data: Uint8Array): void; digest(): string }, check: (digest: string) => void): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { value, done } = await reader.read();
          if (!done) {
            sum.update(value);
            return controller.enqueue(value);
          }
          check(sum.digest());
          controller.close();
        } catch (err) {
          controller.error(err);
        }
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

/** Errors at the end when the bytes' SHA-256 is not the signed one. */
function checkedSha256(source: ReadableStream<Uint8Array>, expected: string): ReadableStream<Uint8Array> {
  const hash = createHash("sha256");
  return checkedAtEnd(source, { update: (d) => hash.update(d), digest: () => hash.digest("hex") }, (got) => {
    if (got !== expected) throw s3Error("XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.");
  });
}

const empty = () => new ReadableStream<Uint8Array>({ start: (c) => c.close() });

/** Errors at the end when the checksum header sent with the bytes (if any) differs. */
function checkedHeader(source: ReadableStream<Uint8Array>, headers: Headers): ReadableStream<Uint8Array> {
  const name = CHECKSUM_HEADERS.find((h) => headers.has(h));
  const sum = runningChecksum(name);
  if (!name || !sum) return source;
  const expected = headers.get(name);
  return checkedAtEnd(source, sum, (got) => {
    if (got !== expected) throw s3Error("BadDigest", `The ${name.slice("x-amz-checksum-".length).toUpperCase()} you specified did not match the calculated checksum.`);
  });
}

/** The request's payload as its signature vouches for it, and its declared length (if any). */
export function payloadOf(request: Request, auth: Authenticated): { stream: ReadableStream<Uint8Array>; declared?: number } {
  const raw = request.body ?? empty();
  const mode = payloadMode(auth.creds.payloadHash);
  const length = request.headers.get("content-length");
  const declared = length !== null && /^\d+$/.test(length) ? Number(length) : undefined;
  switch (mode.kind) {
    case "unsigned":
      return { stream: checkedHeader(raw, request.headers), declared };
    case "sha256":
      return { stream: checkedHeader(checkedSha256(raw, mode.hex), request.headers), declared };
    case "chunked": {
      const decoded = request.headers.get("x-amz-decoded-content-length");
      if (decoded === null || !/^\d+$/.test(decoded)) throw s3Error("MissingContentLength", "A streamed (aws-chunked) upload needs x-amz-decoded-content-length");
      const signing = mode.signed ? { key: auth.signingKey, seed: auth.creds.signature, creds: auth.creds } : undefined;
      const checksum = request.headers.get("x-amz-trailer")?.trim().toLowerCase();
      return { stream: decodeChunked(raw, { signing, trailer: mode.trailer, decodedLength: Number(decoded), checksum }), declared: Number(decoded) };
    }
  }
}

/** A small request document (DeleteObjects, CompleteMultipartUpload), read whole up to `max` bytes. */
export async function smallBody(request: Request, auth: Authenticated, max = 2 * 1024 * 1024): Promise<string> {
  const { stream } = payloadOf(request, auth);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += chunk.byteLength;
    if (size > max) throw s3Error("InvalidRequest", `The request document is larger than ${max} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}
