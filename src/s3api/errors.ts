/**
 * S3 errors as data (D18): each code the S3 API answers, with its HTTP status, in one table, so
 * every failure on the S3 port is an S3 XML error with an S3 code (never the storage API's JSON).
 * The domain's failures (quota, size, a missing file: src/failure.ts) are mapped here by their code.
 */
import { Unavailable } from "../unavailable.ts";
import { Failure, type FailureCode } from "../failure.ts";

/** S3 error code → HTTP status (AWS's S3 error-code table, and QuotaExceeded of our own). */
export const S3_CODES = {
  AccessDenied: 403,
  AuthorizationHeaderMalformed: 400,
  AuthorizationQueryParametersError: 400,
  BadDigest: 400,
  /** Content on this gateway's denylist (D25), read or written: our own code, as S3 has none. */
  Blocked: 410,
  BucketAlreadyOwnedByYou: 409,
  EntityTooLarge: 400,
  EntityTooSmall: 400,
  IncompleteBody: 400,
  InternalError: 500,
  InvalidAccessKeyId: 403,
  InvalidArgument: 400,
  InvalidBucketName: 400,
  InvalidDigest: 400,
  InvalidPart: 400,
  InvalidPartOrder: 400,
  InvalidPartNumber: 416,
  InvalidRange: 416,
  InvalidRequest: 400,
  InvalidStorageClass: 400,
  KeyTooLongError: 400,
  MalformedXML: 400,
  MetadataTooLarge: 400,
  MethodNotAllowed: 405,
  MissingContentLength: 411,
  MissingSecurityHeader: 400,
  NoSuchBucket: 404,
  NoSuchKey: 404,
  NoSuchUpload: 404,
  NoSuchVersion: 404,
  // A bucket configuration read back as none set (subresources.ts UNCONFIGURED).
  NoSuchBucketPolicy: 404,
  NoSuchCORSConfiguration: 404,
  NoSuchLifecycleConfiguration: 404,
  NoSuchPublicAccessBlockConfiguration: 404,
  NoSuchTagSet: 404,
  NoSuchWebsiteConfiguration: 404,
  ObjectLockConfigurationNotFoundError: 404,
  OwnershipControlsNotFoundError: 404,
  ReplicationConfigurationNotFoundError: 404,
  ServerSideEncryptionConfigurationNotFoundError: 404,
  NotImplemented: 501,
  PreconditionFailed: 412,
  QuotaExceeded: 403,
  RequestTimeTooSkewed: 403,
  ServiceUnavailable: 503,
  SignatureDoesNotMatch: 403,
  XAmzContentSHA256Mismatch: 400,
} as const;

export type S3Code = keyof typeof S3_CODES;

export class S3Error extends Error {
  override name = "S3Error";
  constructor(
    readonly code: S3Code,
    message: string,
    /** Extra elements of the error document (such as the bucket or key), and headers. */
    readonly extra: { fields?: Record<string, string>; headers?: Record<string, string> } = {},
  ) {
    super(message);
  }

  get status(): number {
    return S3_CODES[this.code];
  }
}

export const s3Error = (code: S3Code, message: string, fields?: Record<string, string>) => new S3Error(code, message, { fields });

/** The domain's failures (src/failure.ts) in S3's words: one code each. */
const FAILURE_S3: Record<FailureCode, S3Code> = {
  "quota-exceeded": "QuotaExceeded",
  "not-found": "NoSuchKey",
  forbidden: "AccessDenied",
  "too-large": "EntityTooLarge",
  unsupported: "MethodNotAllowed",
  "bad-input": "InvalidRequest",
  "bad-range": "InvalidRange",
  interrupted: "IncompleteBody",
  blocked: "Blocked",
  unauthenticated: "AccessDenied",
  "bad-voucher": "InvalidRequest",
};

/** An S3 error as it is, a domain failure by its code; anything else is undefined (an InternalError, logged by the caller). */
export function toS3Error(err: unknown): S3Error | undefined {
  if (err instanceof S3Error) return err;
  if (err instanceof Unavailable) return new S3Error("ServiceUnavailable", err.message, { headers: { "Retry-After": String(err.retryAfter) } });
  if (err instanceof Failure) return s3Error(FAILURE_S3[err.code], err.code === "bad-range" ? "The requested range is not satisfiable" : err.message);
  return undefined;
}
