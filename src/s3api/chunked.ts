/**
 * The `aws-chunked` body of a streamed SigV4 upload (x-amz-content-sha256 `STREAMING-…`), decoded
 * as it arrives: `<hex size>;chunk-signature=<sig>\r\n<bytes>\r\n` … a zero-size last chunk, then,
 * in the `…-TRAILER` modes, trailing headers (`x-amz-checksum-…`) and the trailer's signature.
 * Each chunk's signature chains from the previous one (the first from the request's own
 * signature) and is checked here before its bytes are passed on: a chunk that was altered, cut,
 * reordered or added ends the stream with SignatureDoesNotMatch, so the storage service keeps
 * nothing (a back-end's put rejects when its source errors). Libraries only ever sign these
 * chunks, which is why this check is ours; test/s3api/chunked.test.ts holds it to AWS's example.
 */
import { createHash } from "node:crypto";
import { s3Error } from "./errors.ts";
import { runningChecksum } from "./checksums.ts";
import { chunkStringToSign, hmacHex, sameSignature, trailerStringToSign, type Credentials } from "./sigv4.ts";

export interface ChunkedOptions {
  /** Signed modes: the signing key, the request's signature (the chain's seed) and its scope. */
  signing?: { key: Uint8Array; seed: string; creds: Pick<Credentials, "longDate" | "scope"> };
  /** The `…-TRAILER` modes: trailing headers follow the last chunk. */
  trailer: boolean;
  /** x-amz-decoded-content-length, when sent: the decoded bytes must come to exactly this. */
  decodedLength?: number;
  /** Largest chunk held in memory while its signature is checked. */
  maxChunk?: number;
  /** The trailing checksum header the request announced (x-amz-trailer), checked against the
   * decoded bytes when it is one of crc32, crc32c, sha1 or sha256; others pass unchecked. */
  checksum?: string;
  /** Hears the trailing checksum once it is checked: what the object keeps. */
  received?: (value: string) => void;
}

const DEFAULT_MAX_CHUNK = 16 * 1024 * 1024;
/** Longest chunk header or trailer line. */
const MAX_LINE = 4096;

const sha256Hex = (bytes: Uint8Array | string) => createHash("sha256").update(bytes).digest("hex");
const incomplete = (why: string) => s3Error("IncompleteBody", `The aws-chunked body is malformed: ${why}`);
const badSignature = (what: string) => s3Error("SignatureDoesNotMatch", `The ${what} signature we calculated does not match the signature you provided.`);

/** Pulls exact byte counts and CRLF-ended lines off a stream without copying it whole. */
class Bytes {
  private buf: Uint8Array = new Uint8Array(0);
  private done = false;
  constructor(private readonly reader: { read(): Promise<{ done: boolean; value?: Uint8Array }> }) {}

  private async more(): Promise<boolean> {
    if (this.done) return false;
    const { value, done } = await this.reader.read();
    if (done || !value) {
      this.done = done;
      return !done;
    }
    this.buf = this.buf.byteLength ? Buffer.concat([this.buf, value]) : value;
    return true;
  }

  /** A line without its CRLF; undefined at the very end of the stream. */
  async line(): Promise<string | undefined> {
    for (let from = 0; ; ) {
      const at = Buffer.from(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength).indexOf("\r\n", from);
      if (at >= 0) {
        const text = new TextDecoder().decode(this.buf.subarray(0, at));
        this.buf = this.buf.subarray(at + 2);
        return text;
      }
      if (this.buf.byteLength > MAX_LINE) throw incomplete("a chunk header is too long");
      from = Math.max(0, this.buf.byteLength - 1);
      if (!(await this.more())) {
        if (this.buf.byteLength === 0) return undefined;
        throw incomplete("the body ends inside a line");
      }
    }
  }

  /** Exactly `n` bytes, gathered from as many reads as it takes. */
  async take(n: number): Promise<Uint8Array> {
    const pieces: Uint8Array[] = [];
    let have = 0;
    while (have < n) {
      if (this.buf.byteLength === 0 && !(await this.more())) throw incomplete(`a chunk ends after ${have} of its ${n} bytes`);
      const piece = this.buf.subarray(0, n - have);
      this.buf = this.buf.subarray(piece.byteLength);
      pieces.push(piece);
      have += piece.byteLength;
    }
    return pieces.length === 1 ? (pieces[0] as Uint8Array) : Buffer.concat(pieces);
  }
}

async function* chunks(source: ReadableStream<Uint8Array>, opts: ChunkedOptions): AsyncGenerator<Uint8Array> {
  const reader = source.getReader();
  const bytes = new Bytes(reader);
  const max = opts.maxChunk ?? DEFAULT_MAX_CHUNK;
  let previous = opts.signing?.seed ?? "";
  let decoded = 0;
  const checksum = opts.trailer ? runningChecksum(opts.checksum) : undefined;
  try {
    for (;;) {
      const header = await bytes.line();
      if (header === undefined) throw incomplete("the body ends before its last (zero-size) chunk");
      const m = /^([0-9a-fA-F]{1,16})(?:;chunk-signature=([0-9a-fA-F]{64}))?$/.exec(header);
      if (!m) throw incomplete(`bad chunk header ${JSON.stringify(header.slice(0, 100))}`);
      const size = Number.parseInt(m[1] as string, 16);
      if (size > max) throw incomplete(`a chunk of ${size} bytes is larger than ${max}`);
      const data = size > 0 ? await bytes.take(size) : new Uint8Array(0);
      if (opts.signing) {
        if (!m[2]) throw incomplete("a chunk has no chunk-signature");
        const expected = hmacHex(opts.signing.key, chunkStringToSign(opts.signing.creds, previous, sha256Hex(data)));
        if (!sameSignature(expected, m[2].toLowerCase())) throw badSignature("chunk");
        previous = expected;
      }
      if (size === 0) break;
      const crlf = await bytes.take(2);
      if (crlf[0] !== 13 || crlf[1] !== 10) throw incomplete("a chunk is not followed by CRLF");
      decoded += size;
      if (opts.decodedLength !== undefined && decoded > opts.decodedLength) throw incomplete("more bytes than x-amz-decoded-content-length");
      checksum?.update(data);
      yield data;
    }
    if (opts.trailer) {
      const sent = await trailers(bytes, opts, previous);
      if (checksum && opts.checksum) {
        const value = sent.get(opts.checksum);
        if (value === undefined) throw incomplete(`the trailer ${opts.checksum} announced in x-amz-trailer was not sent`);
        if (value !== checksum.digest()) throw s3Error("BadDigest", `The ${opts.checksum.slice("x-amz-checksum-".length).toUpperCase()} you specified did not match the calculated checksum.`);
        opts.received?.(value);
      }
    }
    else if ((await bytes.line()) !== "") throw incomplete("the last chunk is not followed by an empty line");
    if (opts.decodedLength !== undefined && decoded !== opts.decodedLength) throw incomplete(`${decoded} bytes decoded, x-amz-decoded-content-length says ${opts.decodedLength}`);
  } finally {
    reader.releaseLock();
  }
}

/** The trailing headers (answered by name), and (signed) the trailer's signature over them. */
async function trailers(bytes: Bytes, opts: ChunkedOptions, previous: string): Promise<Map<string, string>> {
  const sent = new Map<string, string>();
  let canonical = "";
  let signature: string | undefined;
  for (;;) {
    const line = await bytes.line();
    if (line === undefined || line === "") break;
    const colon = line.indexOf(":");
    if (colon <= 0) throw incomplete("a trailing header has no name");
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === "x-amz-trailer-signature") signature = value.toLowerCase();
    else {
      canonical += `${name}:${value}\n`;
      sent.set(name, value);
    }
  }
  if (!opts.signing) return sent;
  if (!signature) throw incomplete("the trailer has no x-amz-trailer-signature");
  const expected = hmacHex(opts.signing.key, trailerStringToSign(opts.signing.creds, previous, sha256Hex(canonical)));
  if (!sameSignature(expected, signature)) throw badSignature("trailer");
  return sent;
}

/** The decoded payload of an aws-chunked body; errors (S3Error) on any framing or signature fault. */
export function decodeChunked(source: ReadableStream<Uint8Array>, opts: ChunkedOptions): ReadableStream<Uint8Array> {
  const it = chunks(source, opts);
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { value, done } = await it.next();
          if (done) controller.close();
          else controller.enqueue(value);
        } catch (err) {
          controller.error(err);
        }
      },
      async cancel(reason) {
        await it.return(undefined);
        await source.cancel(reason).catch(() => {});
      },
    },
    { highWaterMark: 0 },
  );
}
