/**
 * D9's fixed-size chunker, cutting into lent buffers (http/lent.ts). ipfs-unixfs-importer's
 * `fixedSize` joins the request's pieces into a fresh 1 MiB buffer per chunk; dead once the chunk
 * is stored, they piled up until JavaScriptCore collected them — with the request's own pieces,
 * most of a big upload's peak RSS. This one copies the pieces into buffers of a pool
 * the blockstore gives back to once a chunk is stored and nothing reads it any more; a blockstore
 * that never gives back gets a fresh buffer per chunk, as before.
 *
 * The chunks are those of `fixedSize` (every one `size` bytes but the last; an empty source gives
 * one empty chunk), so the Cid is the same. The first chunk is cut into a buffer of its own, never
 * lent: the importer keeps it after the blockstore has it (a one-chunk file's root is that leaf).
 * That buffer grows with the bytes (doubling from the first piece, at least FIRST_MIN): a whole
 * zeroed chunk for every upload cost a 4 KiB upload ≈ 10 % of its event loop's samples and 1 MiB
 * of fresh memory each, 600 MiB/s of it at 600 uploads/s; a large file pays ≈ 1 MiB of
 * extra copying once.
 */
import type { Chunker } from "ipfs-unixfs-importer/chunker";
import { dispose, type BufferPool } from "../http/lent.ts";

/** The first chunk's buffer starts at least this large, so a file of a few pieces grows it rarely. */
const FIRST_MIN = 16 * 1024;

export function lentChunker(pool: BufferPool): Chunker {
  const size = pool.size;
  return async function* chunks(source) {
    let whole: Uint8Array | undefined;
    let filled = 0;
    let emitted = false;
    /** A buffer for the chunk being cut that holds `need` more bytes: the pool's once a chunk went out. */
    const room = (need: number): Uint8Array => {
      if (emitted) return whole ?? pool.take();
      if (whole && filled + need <= whole.byteLength) return whole;
      const grown = new Uint8Array(Math.min(size, Math.max(FIRST_MIN, 2 * (whole?.byteLength ?? 0), filled + need)));
      if (whole) grown.set(whole.subarray(0, filled));
      return grown;
    };
    const lend = (chunk: Uint8Array, buffer: Uint8Array) => (emitted ? pool.lend(chunk, buffer) : chunk);
    /** The buffer of the pieces being copied: a request-body piece the listener marked is freed
     * once the next buffer's piece arrives (http/lent.ts `dispose`), all its slices copied. */
    let current: ArrayBufferLike | undefined;
    for await (const piece of source) {
      if (piece.buffer !== current) {
        if (current) dispose(current);
        current = piece.buffer;
      }
      for (let at = 0; at < piece.byteLength; ) {
        const n = Math.min(size - filled, piece.byteLength - at);
        whole = room(n);
        whole.set(n === piece.byteLength ? piece : piece.subarray(at, at + n), filled);
        filled += n;
        at += n;
        if (filled === size) {
          const chunk = lend(whole, whole);
          whole = undefined;
          filled = 0;
          emitted = true;
          yield chunk;
        }
      }
    }
    if (current) dispose(current);
    // A buffer is taken only for bytes to put in it: `whole` is here exactly when bytes are left.
    if (whole) yield lend(whole.subarray(0, filled), whole);
    else if (!emitted) yield new Uint8Array(0);
  };
}
