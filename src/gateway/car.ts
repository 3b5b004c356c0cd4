/**
 * CAR v1 framing (ipld.io/specs/transport/car/carv1), written by hand because it is this small:
 * a varint-prefixed DAG-CBOR header `{ roots: [cid], version: 1 }`, then each block as
 * varint(length of Cid + bytes) ‖ Cid ‖ bytes. Writing frames ourselves lets the gateway stream a
 * CAR block by block as it walks the DAG, holding no more than the block in hand.
 */
import type { CID } from "multiformats/cid";

/** Unsigned LEB128, as CAR (and multiformats' varint) writes lengths. */
export function varint(n: number): Uint8Array {
  const out: number[] = [];
  let v = n;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return Uint8Array.from(out);
}

const ascii = (s: string) => new TextEncoder().encode(s);

/** A CBOR head (major type, argument) for the small arguments a header needs. */
function cborHead(major: number, n: number): number[] {
  if (n < 24) return [(major << 5) | n];
  if (n < 0x100) return [(major << 5) | 24, n];
  if (n < 0x10000) return [(major << 5) | 25, n >> 8, n & 0xff];
  throw new RangeError("CAR header item too large");
}

/**
 * The CAR v1 header with one root, in DAG-CBOR's canonical form: map keys by length ("roots"
 * before "version"), a Cid as tag 42 over its bytes behind a 0x00 prefix.
 */
export function carHeader(root: CID): Uint8Array {
  const cid = root.bytes;
  const body = Uint8Array.from([
    ...cborHead(5, 2),
    ...cborHead(3, 5),
    ...ascii("roots"),
    ...cborHead(4, 1),
    0xd8,
    42,
    ...cborHead(2, cid.byteLength + 1),
    0x00,
    ...cid,
    ...cborHead(3, 7),
    ...ascii("version"),
    ...cborHead(0, 1),
  ]);
  return concat([varint(body.byteLength), body]);
}

/** What goes before a block's bytes in its frame (the bytes follow as they are: no copy). */
export function carBlockPrefix(cid: CID, length: number): Uint8Array {
  return concat([varint(cid.bytes.byteLength + length), cid.bytes]);
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}
