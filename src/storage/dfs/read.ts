/**
 * Download: the chunks overlapping the (inclusive) range, in order, the first and last sliced.
 * Each chunk is fetched whole from the blob store and its SHA-256 checked before any of its bytes
 * go out, so a damaged chunk errors the stream instead of serving wrong bytes. That holds for the
 * first and last chunk of a range too: a 100-byte range costs one whole 1 MiB GET, the price of
 * never serving unchecked bytes (a ranged GET could not be checked). The stream keeps one chunk
 * read ahead (overlapping the store and the network), so memory stays at about two chunks
 * whatever the file size.
 */
import type { ByteRange } from "../backend.ts";
import { loadChunk } from "./chunks.ts";
import { CHUNK_SIZE } from "./cid.ts";
import type { DfsContext } from "./context.ts";
import { CorruptChunkError, InvalidRangeError, NotFoundError } from "./errors.ts";

interface Plan {
  /** Inclusive byte range of the content. */
  start: number;
  end: number;
  /** Next chunk index to send, and the last one. */
  next: number;
  last: number;
}

export function read(ctx: DfsContext, cid: string, range?: ByteRange): ReadableStream<Uint8Array> {
  let plan: Plan;
  return new ReadableStream<Uint8Array>(
    {
      // async: an unknown Cid or a bad range errors the stream (as a damaged chunk does) instead
      // of throwing from read() — callers handle one way of failing; routes stat() first anyway.
      async start() {
        plan = planRead(ctx, cid, range);
      },
      async pull(controller) {
        if (plan.next > plan.last) return controller.close();
        const part = await readPart(ctx, cid, plan);
        if (part.byteLength > 0) controller.enqueue(part);
        if (plan.next > plan.last) controller.close();
      },
    },
    new CountQueuingStrategy({ highWaterMark: 1 }),
  );
}

function planRead(ctx: DfsContext, cid: string, range: ByteRange | undefined): Plan {
  const object = ctx.rows.object(cid);
  if (!object) throw new NotFoundError(`no dfs content ${cid}`);
  if (!range) return { start: 0, end: object.size - 1, next: 0, last: object.chunks - 1 };
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || start > end || end >= object.size) {
    throw new InvalidRangeError(`range ${start}-${end} outside 0-${object.size - 1}`);
  }
  return { start, end, next: Math.floor(start / CHUNK_SIZE), last: Math.floor(end / CHUNK_SIZE) };
}

/** Reads and checks chunk `plan.next`, returns the part of it inside the range, advances. */
async function readPart(ctx: DfsContext, cid: string, plan: Plan): Promise<Uint8Array> {
  const idx = plan.next;
  const chunk = ctx.rows.chunkAt(cid, idx);
  if (!chunk) throw new NotFoundError(`dfs content ${cid} was released while being read`);
  let bytes: Uint8Array;
  try {
    bytes = await loadChunk(ctx, chunk.hash, chunk.size);
  } catch (e) {
    if (!(e instanceof CorruptChunkError)) throw e;
    // A release between the row lookup and the read takes the chunk: that is no damage.
    if (!ctx.rows.object(cid)) throw new NotFoundError(`dfs content ${cid} was released while being read`);
    ctx.log.error("dfs: damaged chunk", { cid, idx, hash: chunk.hash, reason: e.message });
    throw e;
  }
  plan.next++;
  const offset = idx * CHUNK_SIZE;
  return bytes.subarray(Math.max(plan.start - offset, 0), Math.min(plan.end - offset + 1, bytes.byteLength));
}
