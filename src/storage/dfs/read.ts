/**
 * Download: the chunks overlapping the (inclusive) range, in order, the first and last sliced.
 * Each chunk is fetched whole from the blob store and its SHA-256 checked before any of its bytes
 * go out, so a damaged chunk errors the stream instead of serving wrong bytes. That holds for the
 * first and last chunk of a range too: a 100-byte range costs one whole 1 MiB GET, the price of
 * never serving unchecked bytes (a ranged GET could not be checked). Up to READ_AHEAD chunks are
 * fetched at once ahead of the one being sent (each fetch is a round trip to the store), so
 * memory stays at a few chunks whatever the file size.
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
  /** Next chunk index to fetch, and the last one. */
  next: number;
  last: number;
}

/** Chunk fetches in flight at once for one download. */
const READ_AHEAD = 4;

export function read(ctx: DfsContext, cid: string, range?: ByteRange): ReadableStream<Uint8Array> {
  let plan: Plan;
  /** Fetches started, in chunk order. */
  const ahead: Promise<Uint8Array>[] = [];
  return new ReadableStream<Uint8Array>(
    {
      // async: an unknown Cid or a bad range errors the stream (as a damaged chunk does) instead
      // of throwing from read() — callers handle one way of failing; routes stat() first anyway.
      async start() {
        plan = await planRead(ctx, cid, range);
      },
      async pull(controller) {
        while (ahead.length < READ_AHEAD && plan.next <= plan.last) {
          const part = readPart(ctx, cid, plan, plan.next++);
          part.catch(() => {}); // awaited in turn below; a cancelled download never awaits it
          ahead.push(part);
        }
        const next = ahead.shift();
        if (next === undefined) return controller.close();
        const part = await next;
        if (part.byteLength > 0) controller.enqueue(part);
        if (ahead.length === 0 && plan.next > plan.last) controller.close();
      },
    },
    new CountQueuingStrategy({ highWaterMark: 1 }),
  );
}

async function planRead(ctx: DfsContext, cid: string, range: ByteRange | undefined): Promise<Plan> {
  const object = await ctx.rows.object(cid);
  if (!object) throw new NotFoundError(`no dfs content ${cid}`);
  if (!range) return { start: 0, end: object.size - 1, next: 0, last: object.chunks - 1 };
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || start > end || end >= object.size) {
    throw new InvalidRangeError(`range ${start}-${end} outside 0-${object.size - 1}`);
  }
  return { start, end, next: Math.floor(start / CHUNK_SIZE), last: Math.floor(end / CHUNK_SIZE) };
}

/** Reads and checks chunk `idx`, returns the part of it inside the range. */
async function readPart(ctx: DfsContext, cid: string, plan: Plan, idx: number): Promise<Uint8Array> {
  const chunk = await ctx.rows.chunkAt(cid, idx);
  if (!chunk) throw new NotFoundError(`dfs content ${cid} was released while being read`);
  let bytes: Uint8Array;
  try {
    bytes = await loadChunk(ctx, chunk.hash, chunk.size);
  } catch (e) {
    if (!(e instanceof CorruptChunkError)) throw e;
    // A release between the row lookup and the read takes the chunk: that is no damage.
    if (!(await ctx.rows.object(cid))) throw new NotFoundError(`dfs content ${cid} was released while being read`);
    ctx.log.error("dfs: damaged chunk", { cid, idx, hash: chunk.hash, reason: e.message });
    throw e;
  }
  const offset = idx * CHUNK_SIZE;
  return bytes.subarray(Math.max(plan.start - offset, 0), Math.min(plan.end - offset + 1, bytes.byteLength));
}
