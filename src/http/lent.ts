/**
 * Buffers lent to a stream's consumer, for the peak RSS of big transfers. A download
 * read each 1 MiB chunk into a fresh buffer; the dead ones piled up until JavaScriptCore collected
 * them (≈ +150–200 MiB over idle during a 1 GiB download), the live ones being a few MiB. A
 * `BufferPool` lends its buffers instead, and hands the same memory out again once it is given back.
 *
 * The rule that keeps this safe: only the consumer at the END of a chunk's road gives it back
 * (`giveBack`), and only once nothing can read it any more — the listener, when its socket write's
 * callback has run (Bun's `write` keeps a reference to the bytes until then: measured, scribbling
 * over them after `write` returned sends the scribble). Streams in between pass chunks on and keep
 * none. A consumer that keeps chunks (collects a body, a test) simply never gives them back: the
 * pool then allocates a new buffer, as if there were no pool. A chunk given back while something
 * still reads it would serve wrong bytes, the worst defect this code can have.
 *
 * @example
 *   const pool = new BufferPool(1024 * 1024, 8)
 *   const whole = pool.take()
 *   controller.enqueue(pool.lend(await file.read(0, n, whole.subarray(0, n)), whole))
 *   // the listener, once written: giveBack(chunk) — a chunk no pool lent is ignored
 */

/** Where a chunk goes when given back: a pool that reuses it, or `FREE`, which frees it. */
interface Lender {
  put(whole: Uint8Array): void;
}

/** Every chunk lent and not given back: its lender and the whole buffer it is a view of. */
const lent = new WeakMap<Uint8Array, { pool: Lender; whole: Uint8Array }>();

export class BufferPool implements Lender {
  private readonly free: Uint8Array[] = [];

  /** Buffers of `size` bytes; at most `keep` of them wait, given back, for a `take`. */
  constructor(
    readonly size: number,
    private readonly keep: number,
  ) {}

  /** A buffer of `size` bytes holding anything: the caller fills what it lends. */
  take(): Uint8Array {
    return this.free.pop() ?? Buffer.allocUnsafe(this.size);
  }

  /** Lends `chunk`, a view of `whole` (a buffer `take` gave); returns `chunk`. */
  lend(chunk: Uint8Array, whole: Uint8Array): Uint8Array {
    if (chunk.buffer !== whole.buffer || whole.byteLength !== this.size) throw new Error("BufferPool: lending a chunk of another buffer");
    lent.set(chunk, { pool: this, whole });
    return chunk;
  }

  /** `whole` is free again (from `giveBack`, or a `take` whose bytes were never lent). */
  put(whole: Uint8Array): void {
    if (this.free.length < this.keep && !this.free.includes(whole)) this.free.push(whole);
  }
}

/** Frees what is given back at once (`transfer(0)`), for buffers no pool made. */
const FREE: Lender = { put: (whole) => void (whole.buffer as ArrayBuffer).transfer(0) };

/**
 * Lends `chunk`, a view of `whole`, a buffer of its own that no pool made and nothing else shares
 * (an S3 object read whole, those piled up like the fresh buffers above, ≈ +136 MiB over
 * idle during a 1 GiB download from Ceph): given back, its memory is freed at once. A `whole`
 * that is a view of a larger buffer is not lent (another view may share it). Returns `chunk`.
 */
export function lendToFree(chunk: Uint8Array, whole: Uint8Array): Uint8Array {
  if (chunk.buffer === whole.buffer && whole.byteOffset === 0 && whole.byteLength === whole.buffer.byteLength) lent.set(chunk, { pool: FREE, whole });
  return chunk;
}

/**
 * Request-body pieces the listener received, each a buffer of its own that nothing else shares:
 * Bun's `node:http` hands every read over as a fresh buffer (512 KiB under load), which, copied
 * into a chunk and dead, waits for a collection like any other (≈ 100 MiB of them at a 1 GiB
 * upload's peak). The chunker frees such a piece at once (`dispose`) when it has copied it and
 * the stream has moved past it: every stage between them passes pieces on in order and keeps none
 * (the multipart parser, the meters, the aws-chunked decoder copy what they keep), so a later
 * piece arriving means nothing upstream reads this one any more.
 */
const disposable = new WeakSet<ArrayBufferLike>();

/** Pieces below this are not worth it (and may share a slab of Buffer's pool: never marked). */
const DISPOSABLE_MIN = 64 * 1024;

/** Marks a request-body piece that owns its whole buffer as free to `dispose` once consumed. */
export function markDisposable(piece: Uint8Array): void {
  if (piece.byteLength >= DISPOSABLE_MIN && piece.byteOffset === 0 && piece.byteLength === piece.buffer.byteLength) disposable.add(piece.buffer);
}

/** Frees a marked buffer's memory now (it is detached: any view of it reads as empty); a buffer
 * not marked is left alone. Only the consumer at the end of a piece's road may call it. */
export function dispose(buffer: ArrayBufferLike): void {
  if (!disposable.delete(buffer)) return;
  // transfer(0) moves nothing and detaches `buffer`, releasing its memory without a collection.
  (buffer as ArrayBuffer).transfer(0);
}

/** Gives a lent chunk back to its pool: nothing may read it afterwards. A chunk no pool lent (or
 * one already given back) is left alone. */
export function giveBack(chunk: Uint8Array): void {
  const loan = lent.get(chunk);
  if (!loan) return;
  lent.delete(chunk);
  loan.pool.put(loan.whole);
}
