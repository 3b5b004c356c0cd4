/**
 * The aws-chunked decoder against AWS's published streaming example (S3 API reference,
 * "Signature calculations for the Authorization header: transferring payload in multiple chunks",
 * PUT chunkObject.txt: 66560 bytes of 'a' in chunks of 65536, 1024 and 0): the request's seed
 * signature is recomputed by the library, each chunk's signature by our code, and the body
 * decodes to the 66560 bytes. Any change to a chunk, its order, its signature, or a cut body ends
 * the stream with an S3 error. The trailer modes are checked on a body signed here.
 */
import { describe, expect, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import { decodeChunked } from "../../src/s3api/chunked.ts";
import { S3Error } from "../../src/s3api/errors.ts";
import { readCredentials, signingKey, verifySignature, type SignedRequest } from "../../src/s3api/sigv4.ts";
import { AWS_EXAMPLE } from "./aws-example.ts";

const SEED = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
const SIGS = ["ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648", "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497", "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"];

const request: SignedRequest = {
  method: "PUT",
  path: "/examplebucket/chunkObject.txt",
  query: new URLSearchParams(),
  headers: new Headers({
    host: "s3.amazonaws.com",
    "x-amz-date": "20130524T000000Z",
    "x-amz-storage-class": "REDUCED_REDUNDANCY",
    authorization: `AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature=${SEED}`,
    "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
    "content-encoding": "aws-chunked",
    "x-amz-decoded-content-length": "66560",
    "content-length": "66824",
  }),
};

const enc = new TextEncoder();
const chunk = (size: number, sig: string, fill = "a") => [enc.encode(`${size.toString(16)};chunk-signature=${sig}\r\n`), enc.encode(fill.repeat(size)), enc.encode(size ? "\r\n" : "")];
const exampleParts = () => [...chunk(65536, SIGS[0] as string), ...chunk(1024, SIGS[1] as string), ...chunk(0, SIGS[2] as string), enc.encode("\r\n")];

/** A stream of `parts`, cut into pieces of `piece` bytes (the decoder must not care where reads split). */
function streamOf(parts: Uint8Array[], piece = 1000): ReadableStream<Uint8Array> {
  const all = Buffer.concat(parts);
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= all.byteLength) return c.close();
      c.enqueue(all.subarray(at, (at += piece)));
    },
  });
}

async function decode(parts: Uint8Array[], opts: { trailer?: boolean; key?: Uint8Array; seed?: string; decodedLength?: number; piece?: number } = {}) {
  const creds = readCredentials(request)!;
  const key = opts.key ?? (await verifySignature(request, creds, AWS_EXAMPLE.secret));
  const stream = decodeChunked(streamOf(parts, opts.piece), { signing: { key, seed: opts.seed ?? SEED, creds }, trailer: opts.trailer ?? false, decodedLength: opts.decodedLength ?? 66560 });
  return Bun.readableStreamToBytes(stream);
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    if (err instanceof S3Error) return err.code;
    throw err;
  }
}

describe("AWS's streaming example", () => {
  test("the seed signature is the library's for the request as received", async () => {
    expect(Buffer.concat(exampleParts()).byteLength).toBe(66824); // the example's Content-Length
    expect(await codeOf(verifySignature(request, readCredentials(request)!, AWS_EXAMPLE.secret))).toBeUndefined();
  });

  test.each([1, 7, 1000, 70000])("decodes to the 66560 bytes whatever the reads' size (%i)", async (piece) => {
    const out = await decode(exampleParts(), { piece });
    expect(out.byteLength).toBe(66560);
    expect(Buffer.from(out).equals(Buffer.alloc(66560, "a"))).toBe(true);
  });

  test("a changed byte, a swapped or a wrong signature → SignatureDoesNotMatch", async () => {
    const changed = [...chunk(65536, SIGS[0] as string, "b"), ...chunk(1024, SIGS[1] as string), ...chunk(0, SIGS[2] as string), enc.encode("\r\n")];
    expect(await codeOf(decode(changed))).toBe("SignatureDoesNotMatch");
    const swapped = [...chunk(65536, SIGS[1] as string), ...chunk(1024, SIGS[0] as string), ...chunk(0, SIGS[2] as string), enc.encode("\r\n")];
    expect(await codeOf(decode(swapped))).toBe("SignatureDoesNotMatch");
    expect(await codeOf(decode(exampleParts(), { seed: SIGS[0] }))).toBe("SignatureDoesNotMatch");
    const otherKey = await signingKey(readCredentials(request)!, "another secret");
    expect(await codeOf(decode(exampleParts(), { key: otherKey }))).toBe("SignatureDoesNotMatch");
  });

  test("a chunk dropped, a cut body or a wrong decoded length → an S3 error, never the bytes", async () => {
    const dropped = [...chunk(65536, SIGS[0] as string), ...chunk(0, SIGS[2] as string), enc.encode("\r\n")];
    expect(await codeOf(decode(dropped))).toBe("SignatureDoesNotMatch");
    const whole = Buffer.concat(exampleParts());
    expect(await codeOf(decode([whole.subarray(0, 40000)]))).toBe("IncompleteBody");
    expect(await codeOf(decode([whole.subarray(0, whole.byteLength - 2)]))).toBe("IncompleteBody");
    expect(await codeOf(decode(exampleParts(), { decodedLength: 66559 }))).toBe("IncompleteBody");
    expect(await codeOf(decode([enc.encode("zz;chunk-signature=00\r\n")]))).toBe("IncompleteBody");
  });
});

describe("trailer modes", () => {
  const hex = (b: Uint8Array | string) => createHash("sha256").update(b).digest("hex");

  /** A STREAMING-…-TRAILER body of `data` in one chunk, signed step by step as AWS describes it. */
  async function trailerBody(data: string, trailer: string, tamperTrailer = false) {
    const creds = readCredentials(request)!;
    const key = await signingKey(creds, AWS_EXAMPLE.secret);
    const hmac = (s: string) => createHmac("sha256", key).update(s).digest("hex");
    const empty = hex("");
    const s1 = hmac(["AWS4-HMAC-SHA256-PAYLOAD", creds.longDate, creds.scope, SEED, empty, hex(data)].join("\n"));
    const s2 = hmac(["AWS4-HMAC-SHA256-PAYLOAD", creds.longDate, creds.scope, s1, empty, empty].join("\n"));
    const st = hmac(["AWS4-HMAC-SHA256-TRAILER", creds.longDate, creds.scope, s2, hex(`${trailer}\n`)].join("\n"));
    const sent = tamperTrailer ? trailer.replace(/.$/, "X") : trailer;
    return { key, parts: [enc.encode(`${data.length.toString(16)};chunk-signature=${s1}\r\n${data}\r\n0;chunk-signature=${s2}\r\n${sent}\r\nx-amz-trailer-signature:${st}\r\n\r\n`)] };
  }

  test("signed trailer: decodes, and a changed trailing header → SignatureDoesNotMatch", async () => {
    const ok = await trailerBody("hello trailer", "x-amz-checksum-crc32:AAAAAA==");
    expect(new TextDecoder().decode(await decode(ok.parts, { key: ok.key, trailer: true, decodedLength: 13 }))).toBe("hello trailer");
    const bad = await trailerBody("hello trailer", "x-amz-checksum-crc32:AAAAAA==", true);
    expect(await codeOf(decode(bad.parts, { key: bad.key, trailer: true, decodedLength: 13 }))).toBe("SignatureDoesNotMatch");
  });

  test("the announced trailing checksum is checked: crc32, crc32c (its check value), sha256; a wrong one → BadDigest", async () => {
    const body = (data: string[], trailer: string) => enc.encode(`${data.map((d) => `${d.length.toString(16)}\r\n${d}\r\n`).join("")}0\r\n${trailer}\r\n\r\n`);
    const run = (data: string[], trailer: string, checksum: string) =>
      Promise.resolve(Bun.readableStreamToBytes(decodeChunked(streamOf([body(data, trailer)], 5), { trailer: true, checksum, decodedLength: data.join("").length })));
    expect(new TextDecoder().decode(await run(["hello", " world"], "x-amz-checksum-crc32:DUoRhQ==", "x-amz-checksum-crc32"))).toBe("hello world");
    // CRC-32C's published check value: "123456789" → 0xE3069283.
    expect(new TextDecoder().decode(await run(["1234", "56789"], "x-amz-checksum-crc32c:4waSgw==", "x-amz-checksum-crc32c"))).toBe("123456789");
    const sha = createHash("sha256").update("hello world").digest("base64");
    expect((await run(["hello world"], `x-amz-checksum-sha256:${sha}`, "x-amz-checksum-sha256")).byteLength).toBe(11);
    expect(await codeOf(run(["hello", " w0rld"], "x-amz-checksum-crc32:DUoRhQ==", "x-amz-checksum-crc32"))).toBe("BadDigest");
    expect(await codeOf(run(["hello world"], "x-amz-meta-other:1", "x-amz-checksum-crc32"))).toBe("IncompleteBody");
  });

  test("STREAMING-UNSIGNED-PAYLOAD-TRAILER: plain chunks, then the trailer", async () => {
    const body = enc.encode("5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n");
    const out = decodeChunked(streamOf([body], 3), { trailer: true, decodedLength: 11 });
    expect(new TextDecoder().decode(await Bun.readableStreamToBytes(out))).toBe("hello world");
  });
});
