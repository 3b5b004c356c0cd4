/**
 * The flexible checksums S3 clients send (x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1,
 * -sha256), as a header or as an aws-chunked trailer: computed as the bytes flow, spelled as S3
 * spells them (base64 of the big-endian value or digest), so what a client says it sent can be
 * checked, and then kept with the object. A multipart upload's checksum is either COMPOSITE (the
 * algorithm over the parts' own checksums, `-N`) or, for the CRCs, FULL_OBJECT (the CRC of the
 * whole object, combined from the parts' CRCs and lengths without reading a byte again).
 */
import { createHash } from "node:crypto";
import { crc32 } from "node:zlib";
import { s3Error } from "./errors.ts";

/** The algorithms, as their header spells them (`x-amz-checksum-<name>`). */
export const ALGORITHMS = ["crc32", "crc32c", "crc64nvme", "sha1", "sha256"] as const;
export type Algorithm = (typeof ALGORITHMS)[number];

export const CHECKSUM_HEADERS = ALGORITHMS.map((a) => `x-amz-checksum-${a}` as const);

/** `crc32` → `CRC32`: how XML elements (`ChecksumCRC32`) and x-amz-checksum-algorithm name it. */
export const upperName = (a: Algorithm) => a.toUpperCase();

/** An algorithm from x-amz-checksum-algorithm / x-amz-sdk-checksum-algorithm (any case); undefined for none. */
export function algorithmOf(raw: string | null | undefined): Algorithm | undefined {
  if (raw === null || raw === undefined || raw.trim() === "") return undefined;
  const a = raw.trim().toLowerCase();
  if (!(ALGORITHMS as readonly string[]).includes(a)) throw s3Error("NotImplemented", `Checksum algorithm ${raw.trim()} is not supported here: use CRC32, CRC32C, CRC64NVME, SHA1 or SHA256`);
  return a as Algorithm;
}

const isCrc = (a: Algorithm) => a === "crc32" || a === "crc32c" || a === "crc64nvme";

/** CRC-32C (Castagnoli), which node:zlib does not have: a table, one byte at a time. */
const CRC32C_TABLE = Uint32Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32c(data: Uint8Array, previous = 0): number {
  let c = ~previous >>> 0;
  const t = CRC32C_TABLE;
  for (let i = 0, n = data.length; i < n; i++) c = (t[(c ^ (data[i] as number)) & 0xff] as number) ^ (c >>> 8);
  return ~c >>> 0;
}

/** CRC-64/NVME (reflected 0x9A6C9329AC4BC9B5), in two 32-bit halves: a BigInt per byte would crawl. */
const CRC64_HI = new Uint32Array(256);
const CRC64_LO = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
  let hi = 0;
  let lo = n;
  for (let k = 0; k < 8; k++) {
    const odd = lo & 1;
    lo = ((lo >>> 1) | ((hi & 1) << 31)) >>> 0;
    hi >>>= 1;
    if (odd) {
      hi = (hi ^ 0x9a6c9329) >>> 0;
      lo = (lo ^ 0xac4bc9b5) >>> 0;
    }
  }
  CRC64_HI[n] = hi;
  CRC64_LO[n] = lo;
}
function crc64nvme(data: Uint8Array, previous: [number, number] = [0, 0]): [number, number] {
  let hi = ~previous[0] >>> 0;
  let lo = ~previous[1] >>> 0;
  const th = CRC64_HI;
  const tl = CRC64_LO;
  for (let k = 0, n = data.length; k < n; k++) {
    const i = (lo ^ (data[k] as number)) & 0xff;
    lo = ((lo >>> 8) | (hi << 24)) ^ (tl[i] as number);
    hi = (hi >>> 8) ^ (th[i] as number);
  }
  hi >>>= 0;
  lo >>>= 0;
  return [~hi >>> 0, ~lo >>> 0];
}

export interface Running {
  update(data: Uint8Array): void;
  /** base64, as S3 spells it. */
  digest(): string;
}

/** A running checksum of the bytes in `algorithm`. */
export function running(algorithm: Algorithm): Running {
  const crc = (fn: (d: Uint8Array, prev: number) => number): Running => {
    let value = 0;
    return {
      update: (d) => void (value = fn(d, value)),
      digest: () => {
        const out = Buffer.alloc(4);
        out.writeUInt32BE(value >>> 0);
        return out.toString("base64");
      },
    };
  };
  const hash = (alg: string): Running => {
    const h = createHash(alg);
    return { update: (d) => void h.update(d), digest: () => h.digest("base64") };
  };
  switch (algorithm) {
    case "crc32":
      return crc(crc32);
    case "crc32c":
      return crc(crc32c);
    case "crc64nvme": {
      let value: [number, number] = [0, 0];
      return {
        update: (d) => void (value = crc64nvme(d, value)),
        digest: () => {
          const out = Buffer.alloc(8);
          out.writeUInt32BE(value[0], 0);
          out.writeUInt32BE(value[1], 4);
          return out.toString("base64");
        },
      };
    }
    case "sha1":
      return hash("sha1");
    case "sha256":
      return hash("sha256");
  }
}

/** Passes bytes through to a running digest, and errors at the end when `check` throws for it. */
export function checkedAtEnd(source: ReadableStream<Uint8Array>, sum: Running, check: (digest: string) => void): ReadableStream<Uint8Array> {
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

/** A running checksum for a header or trailer name (`x-amz-checksum-crc32`); undefined for another name. */
export function runningChecksum(name: string | undefined): Running | undefined {
  const a = name?.startsWith("x-amz-checksum-") ? name.slice("x-amz-checksum-".length) : undefined;
  return a !== undefined && (ALGORITHMS as readonly string[]).includes(a) ? running(a as Algorithm) : undefined;
}

/** How many bytes a value of `algorithm` has: a sent value of another length is not one. */
const DIGEST_BYTES: Record<Algorithm, number> = { crc32: 4, crc32c: 4, crc64nvme: 8, sha1: 20, sha256: 32 };

/** Whether `value` is a well-formed base64 checksum of `algorithm`. */
export function wellFormed(algorithm: Algorithm, value: string): boolean {
  return /^[A-Za-z0-9+/]+={0,2}$/.test(value) && Buffer.from(value, "base64").byteLength === DIGEST_BYTES[algorithm] && Buffer.from(value, "base64").toString("base64") === value;
}

/** A COMPOSITE multipart checksum: the algorithm over the parts' checksums, and `-N`. */
export function composite(algorithm: Algorithm, parts: readonly string[]): string {
  const sum = running(algorithm);
  for (const p of parts) sum.update(Buffer.from(p, "base64"));
  return `${sum.digest()}-${parts.length}`;
}

/**
 * A FULL_OBJECT multipart CRC, from the parts' CRCs and sizes: crc(A‖B) is crc(A) carried through
 * |B| zero bytes, xor crc(B) — zlib's crc32_combine, done here for any reflected CRC by squaring
 * the shift-by-one-bit operator over GF(2) (a few hundred small steps per part).
 */
export function fullObject(algorithm: Algorithm, parts: readonly { checksum: string; size: number }[]): string {
  if (!isCrc(algorithm)) throw s3Error("InvalidRequest", `The FULL_OBJECT checksum type takes CRC32, CRC32C or CRC64NVME, not ${upperName(algorithm)}`);
  const width = algorithm === "crc64nvme" ? 64 : 32;
  const poly = { crc32: 0xedb88320n, crc32c: 0x82f63b78n, crc64nvme: 0x9a6c9329ac4bc9b5n }[algorithm as "crc32" | "crc32c" | "crc64nvme"];
  const mask = (1n << BigInt(width)) - 1n;
  /** mat × vec over GF(2): the xor of the columns whose bit is set in vec. */
  const times = (mat: bigint[], vec: bigint) => {
    let sum = 0n;
    for (let i = 0; vec; i++, vec >>= 1n) if (vec & 1n) sum ^= mat[i] as bigint;
    return sum;
  };
  const square = (mat: bigint[]) => mat.map((col) => times(mat, col));
  /** crc1 carried through `len` zero bytes, xor crc2. */
  const combine = (crc1: bigint, crc2: bigint, len: number) => {
    if (len === 0) return crc1;
    // The operator for one zero bit, then squared to two and four bits; each further squaring
    // doubles it, applied for each set bit of the length in bytes.
    let odd: bigint[] = [poly, ...Array.from({ length: width - 1 }, (_, i) => 1n << BigInt(i))];
    let even = square(odd);
    odd = square(even);
    let n = len;
    do {
      even = square(odd);
      if (n & 1) crc1 = times(even, crc1);
      n = Math.floor(n / 2);
      if (n === 0) break;
      odd = square(even);
      if (n & 1) crc1 = times(odd, crc1);
      n = Math.floor(n / 2);
    } while (n !== 0);
    return (crc1 ^ crc2) & mask;
  };
  const read = (b64: string) => BigInt(`0x${Buffer.from(b64, "base64").toString("hex")}`);
  let crc = 0n;
  for (const p of parts) crc = combine(crc, read(p.checksum), p.size);
  return Buffer.from(crc.toString(16).padStart(width / 4, "0"), "hex").toString("base64");
}

/** A stored checksum (`<algorithm>:<base64>[-N]`) read back. */
export function storedChecksum(stored: string | null | undefined): { algorithm: Algorithm; value: string; type: "FULL_OBJECT" | "COMPOSITE" } | undefined {
  if (!stored) return undefined;
  const at = stored.indexOf(":");
  const algorithm = stored.slice(0, at) as Algorithm;
  if (!(ALGORITHMS as readonly string[]).includes(algorithm)) return undefined;
  const value = stored.slice(at + 1);
  return { algorithm, value, type: /-\d+$/.test(value) ? "COMPOSITE" : "FULL_OBJECT" };
}

/**
 * The test of a body's MD5 (hex, as the pipeline digests it) against the request's Content-MD5
 * (base64): BadDigest when they differ, nothing when none was sent. A header that is not an MD5 is
 * InvalidDigest here, before any byte is read.
 */
export function contentMd5(header: string | null): (md5: string) => void {
  if (header === null) return () => {};
  const bytes = Buffer.from(header, "base64");
  if (bytes.byteLength !== 16) throw s3Error("InvalidDigest", "The Content-MD5 you specified is not valid.");
  const wanted = bytes.toString("hex");
  return (md5) => {
    if (md5 !== wanted) throw s3Error("BadDigest", "The Content-MD5 you specified did not match what was received.");
  };
}
