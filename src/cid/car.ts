/**
 * A CAR (Content Addressable aRchive, CARv1 or the CARv1 inside a CARv2) read as it streams: the
 * header's roots first, then each block with its Cid, one at a time. Nothing is held but the
 * section being read, and every length is bounded before it is read: the header at 64 KiB, a
 * block at 2 MiB (what bitswap carries, so every block imported here can be served again), a
 * Cid at what its multihash allows. @ipld/car's reader joins every piece it has into a fresh
 * buffer on each read and reads whatever length a section declares; a 4 GiB length would be
 * read into memory before anything could refuse it.
 *
 * Only the framing is checked here: whether each block hashes to its Cid, and what its codec
 * may be, is the importer's (storage/ipfs/import.ts). The SDK reads a CAR's roots with it too.
 *
 * @example
 *   const car = readCar(body)
 *   const roots = await car.roots()
 *   for await (const { cid, bytes } of car.blocks()) …
 */
import { decode as decodeCbor } from "@ipld/dag-cbor";
import { CID } from "multiformats/cid";
import * as Digest from "multiformats/hashes/digest";

/** The largest block a CAR may carry: bitswap's limit, so every imported block can be served. */
export const MAX_BLOCK_BYTES = 2 * 1024 * 1024;
/** A header holds the version and the roots: this is thousands of roots. */
const MAX_HEADER_BYTES = 64 * 1024;
/** A digest longer than this is no hash this gateway checks (sha2-512's is 64 bytes; an identity
 * Cid carries its block inline, and Helia keeps those to 128 bytes). */
const MAX_DIGEST_BYTES = 128;
/** CARv2: an 11-byte pragma (a CARv1 header of version 2), then a 40-byte header. */
const V2_PRAGMA = Uint8Array.from([0x0a, 0xa1, 0x67, 0x76, 0x65, 0x72, 0x73, 0x69, 0x6f, 0x6e, 0x02]);
const V2_HEADER_BYTES = 40;

/** A stream that is no CAR, or one that breaks the format's bounds; the message says where. */
export class CarFormatError extends Error {
  override readonly name = "CarFormatError";
}

export interface CarBlock {
  cid: CID;
  bytes: Uint8Array;
}

const bad = (what: string) => new CarFormatError(`not a valid CAR: ${what}`);

/**
 * Bytes from a stream, taken as needed: the pieces not yet read stay as they came, and a read
 * that spans pieces copies only what it takes.
 */
class Bytes {
  private pieces: Uint8Array[] = [];
  private held = 0;
  /** Bytes read so far (the CAR's offset of the next byte). */
  offset = 0;
  private ended = false;

  constructor(private readonly source: AsyncIterator<Uint8Array>) {}

  /** Whether at least `n` bytes are there to read (false only at the stream's end). */
  private async fill(n: number): Promise<boolean> {
    while (this.held < n && !this.ended) {
      const next = await this.source.next();
      if (next.done) this.ended = true;
      else if (next.value.byteLength > 0) {
        this.pieces.push(next.value);
        this.held += next.value.byteLength;
      }
    }
    return this.held >= n;
  }

  /** Whether the stream has no byte left. */
  async atEnd(): Promise<boolean> {
    return !(await this.fill(1));
  }

  /** The next `n` bytes; refused as cut short when the stream ends before them. */
  async take(n: number): Promise<Uint8Array> {
    if (!(await this.fill(n))) throw bad(`it ends in the middle of a section (${this.offset + this.held} bytes)`);
    this.offset += n;
    this.held -= n;
    const first = this.pieces[0] as Uint8Array;
    if (first.byteLength >= n) {
      const out = first.subarray(0, n);
      if (first.byteLength === n) this.pieces.shift();
      else this.pieces[0] = first.subarray(n);
      return out;
    }
    const out = new Uint8Array(n);
    let at = 0;
    while (at < n) {
      const piece = this.pieces[0] as Uint8Array;
      const part = Math.min(piece.byteLength, n - at);
      out.set(piece.subarray(0, part), at);
      at += part;
      if (part === piece.byteLength) this.pieces.shift();
      else this.pieces[0] = piece.subarray(part);
    }
    return out;
  }

  /** Skips `n` bytes (a CARv2's padding before its data). */
  async skip(n: number): Promise<void> {
    while (n > 0) {
      const part = Math.min(n, MAX_BLOCK_BYTES);
      await this.take(part);
      n -= part;
    }
  }

  /** An unsigned LEB128 varint of at most 8 bytes (2^56: more than any length here). */
  async varint(): Promise<number> {
    let value = 0;
    for (let i = 0; i < 8; i++) {
      const byte = (await this.take(1))[0] as number;
      value += (byte & 0x7f) * 2 ** (7 * i);
      if ((byte & 0x80) === 0) {
        if (i > 0 && byte === 0) throw bad("a varint is not minimally encoded");
        return value;
      }
    }
    throw bad("a varint is longer than 8 bytes");
  }
}

/** The header's roots, checked as Cids. */
function rootsOf(header: unknown): CID[] {
  if (typeof header !== "object" || header === null) throw bad("its header is not a map");
  const { version, roots } = header as { version?: unknown; roots?: unknown };
  if (version !== 1) throw bad(`its header says version ${String(version)}; CARv1 and CARv2 are read`);
  if (!Array.isArray(roots)) throw bad("its header has no roots");
  return roots.map((r) => {
    const cid = CID.asCID(r);
    if (!cid) throw bad("a root in its header is not a Cid");
    return cid;
  });
}

/** A section's Cid: CIDv0 (a bare sha2-256 multihash) or CIDv1, its digest at most MAX_DIGEST_BYTES. */
async function readCid(bytes: Bytes): Promise<CID> {
  const start = bytes.offset;
  const first = await bytes.take(1);
  // CIDv0 is a bare multihash: sha2-256 (0x12), 32 bytes (0x20).
  if (first[0] === 0x12) {
    const rest = await bytes.take(33);
    if (rest[0] !== 0x20) throw bad(`a CIDv0 at byte ${start} is not a 32-byte sha2-256`);
    return CID.createV0(Digest.decode(Uint8Array.of(0x12, ...rest)) as Digest.Digest<0x12, number>);
  }
  if (first[0] !== 1) throw bad(`a Cid at byte ${start} has version ${first[0]}; only CIDv0 and CIDv1 exist`);
  const codec = await bytes.varint();
  const code = await bytes.varint();
  const length = await bytes.varint();
  if (length > MAX_DIGEST_BYTES) throw bad(`a Cid at byte ${start} has a ${length}-byte digest (at most ${MAX_DIGEST_BYTES})`);
  const digest = await bytes.take(length);
  return CID.createV1(codec, Digest.create(code, digest));
}

export interface CarReader {
  /** The header's roots (CARv2's inner header's); refuses a stream that is no CAR. */
  roots(): Promise<CID[]>;
  /** Each block as it comes, after `roots()`; refuses a section that breaks the format's bounds. */
  blocks(): AsyncGenerator<CarBlock>;
  /** Bytes read from the stream so far. */
  readonly offset: number;
}

export function readCar(source: AsyncIterable<Uint8Array>): CarReader {
  const bytes = new Bytes(source[Symbol.asyncIterator]());
  /** Where the blocks end: the stream's end (CARv1), or the CARv2's data size. */
  let dataEnd = Number.POSITIVE_INFINITY;

  async function header(): Promise<unknown> {
    const length = await bytes.varint();
    if (length === 0 || length > MAX_HEADER_BYTES) throw bad(`its header is ${length} bytes (1 to ${MAX_HEADER_BYTES})`);
    const raw = await bytes.take(length);
    try {
      return decodeCbor(raw);
    } catch (err) {
      throw bad(`its header is not DAG-CBOR (${(err as Error).message})`);
    }
  }

  return {
    get offset() {
      return bytes.offset;
    },

    async roots() {
      if (await bytes.atEnd()) throw bad("the body is empty");
      const first = await header();
      if (typeof first === "object" && first !== null && (first as { version?: unknown }).version === 2) {
        // CARv2: the pragma was its "header"; then characteristics (16), data offset, data size, index offset (8 each, little-endian).
        if (bytes.offset !== V2_PRAGMA.byteLength) throw bad("its CARv2 pragma is not the standard one");
        const fixed = await bytes.take(V2_HEADER_BYTES);
        const view = new DataView(fixed.buffer, fixed.byteOffset, fixed.byteLength);
        const dataOffset = Number(view.getBigUint64(16, true));
        const dataSize = Number(view.getBigUint64(24, true));
        if (dataOffset < bytes.offset) throw bad("its CARv2 data offset points into its header");
        await bytes.skip(dataOffset - bytes.offset);
        dataEnd = dataOffset + dataSize;
        return rootsOf(await header());
      }
      return rootsOf(first);
    },

    async *blocks() {
      for (;;) {
        if (bytes.offset >= dataEnd) return; // a CARv2's index follows: not read
        if (await bytes.atEnd()) {
          if (Number.isFinite(dataEnd)) throw bad("its CARv2 data ends before its declared size");
          return;
        }
        const start = bytes.offset;
        const length = await bytes.varint();
        if (length === 0) throw bad(`a section at byte ${start} is empty`);
        const sectionStart = bytes.offset;
        const cid = await readCid(bytes);
        const size = length - (bytes.offset - sectionStart);
        if (size < 0) throw bad(`the section at byte ${start} is shorter than its Cid`);
        if (size > MAX_BLOCK_BYTES) throw new CarFormatError(`block ${cid} is ${size} bytes: blocks are at most ${MAX_BLOCK_BYTES} bytes (2 MiB), as bitswap carries them`);
        if (bytes.offset + size > dataEnd) throw bad("a section runs past its CARv2 data size");
        yield { cid, bytes: await bytes.take(size) };
      }
    },
  };
}
