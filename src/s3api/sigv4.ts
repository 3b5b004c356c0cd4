/**
 * AWS Signature Version 4 as the S3 API checks it (D18): the Authorization header and presigned
 * query forms are read here, and the signature is recomputed for the request as received with
 * AWS's own implementation (`@smithy/signature-v4`: its canonical request, string to sign and
 * signing key), then compared in constant time. Nothing here canonicalises by hand: this module
 * only picks the request's parts (the signed headers, the query, the path as sent) and hands
 * them over. The `aws-chunked` chunk and trailer signatures, which libraries only ever produce,
 * are checked by chunked.ts with the strings to sign built below.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { Sha256 } from "@aws-crypto/sha256-js";
import { ALGORITHM_IDENTIFIER, SignatureV4, getCanonicalHeaders, getSigningKey } from "@smithy/signature-v4";
import { s3Error } from "./errors.ts";

/** How far a request's time may be from ours (S3's own limit). */
export const MAX_SKEW_MS = 15 * 60_000;
/** The longest validity of a presigned URL: 7 days. */
const MAX_PRESIGNED_SECONDS = 604_800;

export const UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD";
export const STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
export const STREAMING_SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
export const STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";
export const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/** What a request's body is, as its x-amz-content-sha256 says. */
export type PayloadMode =
  | { kind: "unsigned" }
  | { kind: "sha256"; hex: string }
  | { kind: "chunked"; signed: boolean; trailer: boolean };

/** The parts of a request a signature covers. */
export interface SignedRequest {
  method: string;
  /** The path exactly as sent (percent-encoded): S3 signs it without normalising or re-encoding. */
  path: string;
  /** The query, decoded. */
  query: URLSearchParams;
  headers: Headers;
}

/** A request's credentials, as read from its Authorization header or presigned query. */
export interface Credentials {
  accessKeyId: string;
  /** `YYYYMMDDTHHMMSSZ`. */
  longDate: string;
  region: string;
  /** `YYYYMMDD/region/s3/aws4_request`. */
  scope: string;
  signedHeaders: string[];
  signature: string;
  presigned: boolean;
  /** Presigned only: seconds from `longDate` the URL stays valid. */
  expires?: number;
  /** The payload hash the canonical request ends with. */
  payloadHash: string;
}

type HttpRequestLike = Parameters<typeof getCanonicalHeaders>[0] & { method: string; path: string; query: Record<string, string | string[] | null>; protocol: string; hostname: string };

/** AWS's canonicaliser, with the two steps it keeps to itself opened up. */
class Canonicaliser extends SignatureV4 {
  constructor() {
    // S3 signs the path as sent (no double encoding, no dot-segment removal): uriEscapePath false.
    super({ service: "s3", region: "us-east-1", credentials: { accessKeyId: "", secretAccessKey: "" }, sha256: Sha256, uriEscapePath: false, applyChecksum: false });
  }
  stringToSign(request: HttpRequestLike, headers: Record<string, string>, payloadHash: string, longDate: string, scope: string): Promise<string> {
    return this.createStringToSign(longDate, scope, this.createCanonicalRequest(request, headers, payloadHash), ALGORITHM_IDENTIFIER);
  }
}
const canonicaliser = new Canonicaliser();

const malformed = (why: string) => s3Error("AuthorizationHeaderMalformed", `The authorization header is malformed; ${why}`);

/** `YYYYMMDDTHHMMSSZ` as epoch ms, or NaN. */
export function amzDateMs(longDate: string): number {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(longDate);
  if (!m) return Number.NaN;
  return Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]));
}

/** `<key>/<date>/<region>/s3/aws4_request`, checked against the request's date. */
function parseCredential(credential: string, longDate: string): { accessKeyId: string; region: string; scope: string } {
  const parts = credential.split("/");
  if (parts.length !== 5) throw malformed("the Credential is not <key>/<date>/<region>/s3/aws4_request");
  const [accessKeyId, date, region, service, terminal] = parts as [string, string, string, string, string];
  if (service !== "s3" || terminal !== "aws4_request" || !region) throw malformed("the Credential's scope must be <date>/<region>/s3/aws4_request");
  if (date !== longDate.slice(0, 8)) throw malformed(`the Credential's date ${date} is not the request's ${longDate.slice(0, 8)}`);
  return { accessKeyId, region, scope: `${date}/${region}/s3/aws4_request` };
}

/** The payload mode a x-amz-content-sha256 value names. */
export function payloadMode(value: string): PayloadMode {
  if (/^[0-9a-f]{64}$/.test(value)) return { kind: "sha256", hex: value };
  switch (value) {
    case UNSIGNED_PAYLOAD:
      return { kind: "unsigned" };
    case STREAMING_SIGNED:
      return { kind: "chunked", signed: true, trailer: false };
    case STREAMING_SIGNED_TRAILER:
      return { kind: "chunked", signed: true, trailer: true };
    case STREAMING_UNSIGNED_TRAILER:
      return { kind: "chunked", signed: false, trailer: true };
    default:
      throw s3Error("InvalidArgument", `x-amz-content-sha256 must be a SHA-256 in hex, ${UNSIGNED_PAYLOAD} or a STREAMING-… mode this server knows (got ${JSON.stringify(value.slice(0, 80))})`);
  }
}

/**
 * The credentials a request carries (Authorization header, or presigned query), or undefined for
 * an anonymous request. Throws for a malformed or unsupported one.
 */
export function readCredentials(req: SignedRequest): Credentials | undefined {
  const header = req.headers.get("authorization");
  if (header !== null) {
    const m = /^AWS4-HMAC-SHA256 (.*)$/s.exec(header.trim());
    if (!m) throw s3Error("InvalidArgument", "Only AWS Signature Version 4 (AWS4-HMAC-SHA256) is supported");
    const fields = new Map<string, string>();
    for (const part of (m[1] as string).split(",")) {
      const eq = part.indexOf("=");
      if (eq > 0) fields.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
    }
    const credential = fields.get("Credential");
    const signed = fields.get("SignedHeaders");
    const signature = fields.get("Signature");
    if (!credential || !signed || !signature) throw malformed("it needs Credential, SignedHeaders and Signature");
    const longDate = req.headers.get("x-amz-date") ?? "";
    if (Number.isNaN(amzDateMs(longDate))) throw s3Error("AccessDenied", "AWS authentication requires a valid x-amz-date header");
    const payloadHash = req.headers.get("x-amz-content-sha256");
    if (payloadHash === null) throw s3Error("InvalidRequest", "Missing required header for this request: x-amz-content-sha256");
    payloadMode(payloadHash);
    return { ...parseCredential(credential, longDate), longDate, signedHeaders: signed.split(";"), signature: signature.toLowerCase(), presigned: false, payloadHash };
  }
  const q = req.query;
  // Taken for anonymous, it would be refused as unsigned: say what the client must change instead.
  if (q.has("AWSAccessKeyId") && q.has("Signature")) throw s3Error("InvalidArgument", "Only AWS Signature Version 4 (AWS4-HMAC-SHA256) is supported, and this URL is signed with Version 2: aws-cli 1.x presigns so unless its config sets s3 signature_version = s3v4, and boto3 unless its client is made with Config(signature_version='s3v4')");
  if (!q.has("X-Amz-Signature") && !q.has("X-Amz-Credential")) return undefined;
  if (q.get("X-Amz-Algorithm") !== "AWS4-HMAC-SHA256") throw s3Error("AuthorizationQueryParametersError", "X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"");
  const longDate = q.get("X-Amz-Date") ?? "";
  if (Number.isNaN(amzDateMs(longDate))) throw s3Error("AccessDenied", "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"");
  const expires = Number(q.get("X-Amz-Expires") ?? "");
  if (!Number.isInteger(expires) || expires < 1 || expires > MAX_PRESIGNED_SECONDS) throw s3Error("AuthorizationQueryParametersError", "X-Amz-Expires must be a whole number of seconds from 1 to 604800 (a presigned URL lasts at most 7 days)");
  const signature = q.get("X-Amz-Signature") ?? "";
  const signed = q.get("X-Amz-SignedHeaders") ?? "";
  if (!signature || !signed) throw s3Error("AccessDenied", "Query-string authentication requires X-Amz-Signature and X-Amz-SignedHeaders");
  return { ...parseCredential(q.get("X-Amz-Credential") ?? "", longDate), longDate, signedHeaders: signed.split(";"), signature: signature.toLowerCase(), presigned: true, expires, payloadHash: UNSIGNED_PAYLOAD };
}

/** The time rules: 15 minutes of skew for a signed request; a presigned URL within its validity. */
export function checkTime(creds: Credentials, nowMs: number): void {
  const at = amzDateMs(creds.longDate);
  if (creds.presigned) {
    if (at - nowMs > MAX_SKEW_MS) throw s3Error("AccessDenied", "Request is not valid yet");
    if (nowMs > at + (creds.expires ?? 0) * 1000) throw s3Error("AccessDenied", "Request has expired");
    return;
  }
  if (Math.abs(nowMs - at) > MAX_SKEW_MS) {
    throw s3Error("RequestTimeTooSkewed", "The difference between the request time and the server's time is too large.", { RequestTime: creds.longDate, ServerTime: new Date(nowMs).toISOString() });
  }
}

/** The signing key of a secret for a credential's scope (AWS's derivation). */
export async function signingKey(creds: Credentials, secretAccessKey: string): Promise<Uint8Array> {
  return getSigningKey(Sha256, { accessKeyId: creds.accessKeyId, secretAccessKey }, creds.longDate.slice(0, 8), creds.region, "s3");
}

export const hmacHex = (key: Uint8Array, text: string) => createHmac("sha256", key).update(text).digest("hex");

/** Constant-time equality of two hex signatures. */
export function sameSignature(a: string, b: string): boolean {
  const x = Buffer.from(a, "utf8");
  const y = Buffer.from(b, "utf8");
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The request's own parts as the canonicaliser takes them: only the headers it signed. */
function canonicalInput(req: SignedRequest, creds: Credentials): { request: HttpRequestLike; headers: Record<string, string> } {
  const signedHeaders: Record<string, string> = {};
  for (const name of creds.signedHeaders) {
    const value = req.headers.get(name);
    if (value === null) throw s3Error("SignatureDoesNotMatch", `The request signature we calculated does not match the signature you provided: the signed header ${name} is missing`);
    signedHeaders[name] = value;
  }
  if (!("host" in signedHeaders)) throw malformed("the host header must be signed");
  const query: Record<string, string | string[]> = {};
  for (const [k, v] of req.query) {
    const had = query[k];
    query[k] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
  }
  const request: HttpRequestLike = { method: req.method, protocol: "http:", hostname: "", path: req.path, query, headers: signedHeaders };
  return { request, headers: getCanonicalHeaders(request, undefined, new Set(creds.signedHeaders)) };
}

/**
 * Recomputes the request's signature with `secret` and compares: 403 SignatureDoesNotMatch when it
 * differs. Answers the signing key (a streamed body's chunk signatures are checked with it).
 */
export async function verifySignature(req: SignedRequest, creds: Credentials, secretAccessKey: string): Promise<Uint8Array> {
  const { request, headers } = canonicalInput(req, creds);
  const toSign = await canonicaliser.stringToSign(request, headers, creds.payloadHash, creds.longDate, creds.scope);
  const key = await signingKey(creds, secretAccessKey);
  if (!sameSignature(hmacHex(key, toSign), creds.signature)) {
    throw s3Error("SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method.", { AWSAccessKeyId: creds.accessKeyId });
  }
  return key;
}

/** The string a chunk's signature signs (AWS's aws-chunked scheme). */
export function chunkStringToSign(creds: Pick<Credentials, "longDate" | "scope">, previous: string, chunkSha256: string): string {
  return ["AWS4-HMAC-SHA256-PAYLOAD", creds.longDate, creds.scope, previous, EMPTY_SHA256, chunkSha256].join("\n");
}

/** The string the trailer's signature signs: the trailing headers, each `name:value\n`, hashed. */
export function trailerStringToSign(creds: Pick<Credentials, "longDate" | "scope">, previous: string, trailerSha256: string): string {
  return ["AWS4-HMAC-SHA256-TRAILER", creds.longDate, creds.scope, previous, trailerSha256].join("\n");
}
