/**
 * The buffer of a short range's body (up to a chunk: dfs reads it from at most two chunk files,
 * ipfs from the one or two leaves it crosses), from one pool every download shares. A fresh
 * buffer per ranged GET cost its page faults on every GET (≈ 0.3 ms per MiB on this VM: a 1 MiB
 * ranged GET's read step 0.63 → 0.32 ms with the buffer reused). The listener gives the
 * body back once it is written (http/lent.ts); a consumer that keeps it never does, and the pool
 * then makes a new one. Only the pages a body touches become resident: a dfs range of 1 MiB
 * leaves the second MiB of its buffer untouched.
 *
 * @example
 *   const body = await readShortRange(n, (into) => readPartsInto(into))      // lent: the whole
 *   const part = await readShortRange(n, fill, (all) => all.subarray(a, b))  // lent: a view of it
 */
import { BufferPool } from "../http/lent.ts";
import { CHUNK_SIZE } from "./cid-options.ts";

/** Two chunks' worth (a range of up to a chunk crosses at most two); at most 4 wait for reuse. */
const POOL = new BufferPool(2 * CHUNK_SIZE, 4);

/**
 * `length` bytes that `fill` reads into the buffer it is given, then `view` of them (all by
 * default), lent from the pool when `length` fits its buffers. A failed `fill` leaves the buffer
 * to the collector: another of its reads may still be writing into it.
 */
export async function readShortRange(length: number, fill: (into: Uint8Array) => Promise<unknown>, view = (all: Uint8Array) => all): Promise<Uint8Array> {
  const whole = length <= POOL.size ? POOL.take() : undefined;
  const all = whole ? whole.subarray(0, length) : Buffer.allocUnsafe(length);
  await fill(all);
  const part = view(all);
  if (!whole) return part;
  if (part.byteLength > 0) return POOL.lend(part, whole);
  POOL.put(whole); // nothing to send: nothing will give it back
  return part;
}
