/**
 * SigV4 as the S3 API checks it, against AWS's published examples (S3 API reference, "Signature
 * calculations for the Authorization header" and "Authenticating requests: using query
 * parameters"): the examples' requests, as received, verify with the examples' secret and fail
 * with any other, and a request altered after signing fails.
 */
import { describe, expect, test } from "bun:test";
import { S3Error } from "../../src/s3api/errors.ts";
import { checkTime, readCredentials, verifySignature, type SignedRequest } from "../../src/s3api/sigv4.ts";

import { AWS_EXAMPLE } from "./aws-example.ts";
const EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

function received(method: string, target: string, headers: Record<string, string>): SignedRequest {
  const url = new URL(target, "http://examplebucket.s3.amazonaws.com");
  return { method, path: url.pathname, query: url.searchParams, headers: new Headers(headers) };
}

/** AWS's "Example: GET Object" (the first 10 bytes of test.txt). */
const getObject = (signature = "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41", extra: Record<string, string> = {}) =>
  received("GET", "/test.txt", {
    host: "examplebucket.s3.amazonaws.com",
    range: "bytes=0-9",
    "x-amz-content-sha256": EMPTY,
    "x-amz-date": "20130524T000000Z",
    authorization: `AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=${signature}`,
    ...extra,
  });

async function codeOf(p: Promise<unknown> | (() => unknown)): Promise<string | undefined> {
  try {
    await (typeof p === "function" ? p() : p);
    return undefined;
  } catch (err) {
    if (err instanceof S3Error) return err.code;
    throw err;
  }
}

describe("Authorization header", () => {
  test("AWS's GET Object example verifies with its secret", async () => {
    const req = getObject();
    const creds = readCredentials(req);
    expect(creds).toMatchObject({ accessKeyId: AWS_EXAMPLE.accessKeyId, region: "us-east-1", scope: "20130524/us-east-1/s3/aws4_request", presigned: false });
    expect(await codeOf(verifySignature(req, creds!, AWS_EXAMPLE.secret))).toBeUndefined();
  });

  test("another secret → SignatureDoesNotMatch", async () => {
    const req = getObject();
    expect(await codeOf(verifySignature(req, readCredentials(req)!, `${AWS_EXAMPLE.secret}x`))).toBe("SignatureDoesNotMatch");
  });

  test("a signed header changed after signing → SignatureDoesNotMatch; an unsigned one does not matter", async () => {
    const changed = getObject(undefined, { range: "bytes=0-99" });
    expect(await codeOf(verifySignature(changed, readCredentials(changed)!, AWS_EXAMPLE.secret))).toBe("SignatureDoesNotMatch");
    const unsigned = getObject(undefined, { "user-agent": "anything", "x-amz-meta-extra": "not signed" });
    expect(await codeOf(verifySignature(unsigned, readCredentials(unsigned)!, AWS_EXAMPLE.secret))).toBeUndefined();
  });

  test("a changed path or query → SignatureDoesNotMatch", async () => {
    const base = getObject();
    const other = { ...base, path: "/test.txt2" };
    expect(await codeOf(verifySignature(other, readCredentials(base)!, AWS_EXAMPLE.secret))).toBe("SignatureDoesNotMatch");
    const query = { ...base, query: new URLSearchParams("versionId=1") };
    expect(await codeOf(verifySignature(query, readCredentials(base)!, AWS_EXAMPLE.secret))).toBe("SignatureDoesNotMatch");
  });

  test("clock skew: 15 minutes either way", async () => {
    const creds = readCredentials(getObject())!;
    const at = Date.UTC(2013, 4, 24);
    expect(() => checkTime(creds, at + 15 * 60_000)).not.toThrow();
    expect(() => checkTime(creds, at - 15 * 60_000)).not.toThrow();
    expect(await codeOf(() => checkTime(creds, at + 15 * 60_000 + 1000))).toBe("RequestTimeTooSkewed");
    expect(await codeOf(() => checkTime(creds, at - 16 * 60_000))).toBe("RequestTimeTooSkewed");
  });

  test("malformed or other schemes are refused with S3 codes", async () => {
    expect(await codeOf(() => readCredentials(getObject(undefined, { authorization: "AWS AKIAIOSFODNN7EXAMPLE:abc" })))).toBe("InvalidArgument");
    expect(await codeOf(() => readCredentials(getObject(undefined, { authorization: "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130525/us-east-1/s3/aws4_request,SignedHeaders=host,Signature=00" })))).toBe("AuthorizationHeaderMalformed");
    expect(await codeOf(() => readCredentials(getObject(undefined, { "x-amz-content-sha256": "STREAMING-ECDSA-P256-SHA256-PAYLOAD" })))).toBe("InvalidArgument");
    expect(readCredentials(received("GET", "/x", { host: "h" }))).toBeUndefined();
  });
});

describe("presigned query", () => {
  /** AWS's presigned URL example: GET test.txt, valid 86400 s. */
  const presigned = (signature = "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404") =>
    received(
      "GET",
      `/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=${signature}`,
      { host: "examplebucket.s3.amazonaws.com" },
    );

  test("AWS's example verifies with its secret, and not with another", async () => {
    const req = presigned();
    const creds = readCredentials(req)!;
    expect(creds).toMatchObject({ presigned: true, expires: 86400, payloadHash: "UNSIGNED-PAYLOAD" });
    expect(await codeOf(verifySignature(req, creds, AWS_EXAMPLE.secret))).toBeUndefined();
    expect(await codeOf(verifySignature(req, creds, "another secret"))).toBe("SignatureDoesNotMatch");
    const tampered = presigned("aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d405");
    expect(await codeOf(verifySignature(tampered, readCredentials(tampered)!, AWS_EXAMPLE.secret))).toBe("SignatureDoesNotMatch");
  });

  test("a Signature Version 2 URL (aws-cli 1.x's or boto3's presign without s3v4) is refused as one, not taken as anonymous", async () => {
    const v2 = received("GET", "/dfs/a.txt?AWSAccessKeyId=STWWSQ34YIREEMDPUWXG&Signature=PMOhfW5yRFO3TPhFCNOrPUofZaM%3D&Expires=1795439238", { host: "localhost:9000" });
    expect(await codeOf(() => readCredentials(v2))).toBe("InvalidArgument");
    // The message says how to fix it in both clients that presign so by default.
    const message = (() => {
      try {
        readCredentials(v2);
      } catch (err) {
        return (err as Error).message;
      }
    })();
    expect(message).toContain("signature_version = s3v4");
    expect(message).toContain("boto3");
    expect(message).toContain("Config(signature_version='s3v4')");
  });

  test("an expiry past 7 days, or not a whole number of seconds, is a malformed presigned URL (400), as on S3", async () => {
    for (const expires of ["604801", "0", "1.5", ""]) {
      const req = received("GET", `/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=${expires}&X-Amz-SignedHeaders=host&X-Amz-Signature=00`, { host: "examplebucket.s3.amazonaws.com" });
      expect(await codeOf(() => readCredentials(req)), expires).toBe("AuthorizationQueryParametersError");
    }
  });

  test("valid from its date (15 min of skew) until its expiry", async () => {
    const creds = readCredentials(presigned())!;
    const at = Date.UTC(2013, 4, 24);
    expect(() => checkTime(creds, at + 86_400_000)).not.toThrow();
    expect(await codeOf(() => checkTime(creds, at + 86_400_000 + 1000))).toBe("AccessDenied");
    expect(await codeOf(() => checkTime(creds, at - 16 * 60_000))).toBe("AccessDenied");
  });
});
