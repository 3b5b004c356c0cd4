/**
 * Counts the buffers every BufferPool (src/http/lent.ts) hands out while a piece of work runs: a
 * test of lent buffers must first show that lending really happened (fewer buffers than chunks),
 * or its byte-for-byte checks would pass on fresh buffers and prove nothing about reuse.
 */
import { BufferPool } from "../../src/http/lent.ts";

/** The distinct buffers pools handed out during `run`, counted once each. */
export async function buffersTaken(run: () => Promise<void>): Promise<number> {
  const taken = new Set<Uint8Array>();
  const take = BufferPool.prototype.take;
  BufferPool.prototype.take = function (this: BufferPool) {
    const b = take.call(this);
    taken.add(b);
    return b;
  };
  try {
    await run();
  } finally {
    BufferPool.prototype.take = take;
  }
  return taken.size;
}
