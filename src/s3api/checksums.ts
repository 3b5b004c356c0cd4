/**
 * The flexible checksums S3 clients send (x-amz-checksum-crc32, -crc32c, -sha1, -sha256), as a
 * header or as an aws-chunked trailer: computed as the bytes flow, spelled as S3 spells them
 * (base64 of the big-endian value or digest), so what a client says it sent can be checked.
 */
import { createHash } from "node:crypto";
import { crc32 } from "node:zlib";

export const CHECKSUM_HEADERS = ["x-amz-checksum-crc32", "x-amz-checksum-crc32c", "x-amz-checksum-sha1", "x-amz-checksum-sha256"] as const;

/** CRC-32C (Castagnoli), which node:zlib does not have: a table, one byte at a time. */
const CRC32C_TABLE = Uint32Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32c(data: Uint8Array, previous = 0): number {
  let c = ~previous >>> 0;
  for (const byte of data) c = (CRC32C_TABLE[(c ^ byte) & 0xff] as number) ^ (c >>> 8);
  return ~c >>> 0;
}

/** A running checksum of the decoded bytes, as its trailer spells it (base64). */
export function runningChecksum(name: string | undefined): { update(data: Uint8Array): void; digest(): string } | undefined {
  const crc = (fn: (d: Uint8Array, prev: number) => number) => {
    let value = 0;
    return {
      update: (d: Uint8Array) => void (value = fn(d, value)),
      digest: () => {
        const out = Buffer.alloc(4);
        out.writeUInt32BE(value >>> 0);
        return out.toString("base64");
      },
    };
  };
  const hash = (alg: string) => {
    const h = createHash(alg);
    return { update: (d: Uint8Array) => void h.update(d), digest: () => h.digest("base64") };
  };
  switch (name) {
    case "x-amz-checksum-crc32":
      return crc(crc32);
    case "x-amz-checksum-crc32c":
      return crc(crc32c);
    case "x-amz-checksum-sha1":
      return hash("sha1");
    case "x-amz-checksum-sha256":
      return hash("sha256");
    default:
      return undefined;
  }
}
