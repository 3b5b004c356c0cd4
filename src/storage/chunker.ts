/**
 * D9's fixed-size chunker, cutting into lent buffers (http/lent.ts). ipfs-unixfs-importer's
 * `fixedSize` joins the request's pieces into a fresh 1 MiB buffer per chunk; dead once the chunk
 * is stored, they piled up until JavaScriptCore collected them — with the request's own pieces,
 * most of a big upload's peak RSS (issue 10). This one copies the pieces into buffers of a pool
 * the blockstore gives back to once a chunk is stored and nothing reads it any more; a blockstore
 * that never gives back gets a fresh buffer per chunk, as before.
 *
 * The chunks are those of `fixedSize` (every one `size` bytes but the last; an empty source gives
 * one empty chunk), so the Cid is the same. The first chunk is cut into a buffer of its own, never
 * lent: the importer keeps it after the blockstore has it (a one-chunk file's root is that leaf).
 */
import type { Chunker } from "ipfs-unixfs-importer/chunker";
import { dispose, type BufferPool } from "../http/lent.ts";

export function lentChunker(pool: BufferPool): Chunker {
  const size = pool.size;
  return async function* chunks(source) {
    let whole: Uint8Array | undefined;
    let filled = 0;
    let emitted = false;
    const take = () => (emitted ? pool.take() : new Uint8Array(size));
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
        whole ??= take();
        const n = Math.min(size - filled, piece.byteLength - at);
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
