/**
 * Download: the chunks overlapping the (inclusive) range, in order, the first and last sliced.
 * No byte goes out that no check compared with its chunk's hash (D9):
 * - on the local blob store, a chunk whose file is the one its verification record names
 *   (checks.ts) is trusted: only the bytes sent are read, nothing is hashed (the scrub re-hashes
 *   it periodically); any other file is read whole and hashed first, and its verdict recorded;
 * - on S3 (no file identity), each chunk is fetched whole and hashed before any of its bytes go
 *   out, so a 100-byte range costs one whole 1 MiB GET.
 * A damaged chunk errors the stream. Up to READ_AHEAD chunks are read at once ahead of the one
 * being sent (each fetch from S3 is a round trip), so memory stays at a few chunks whatever the
 * file size. The manifest (with the records) is read WINDOW positions per query.
 *
 * On the local store, chunks are read into buffers lent from a pool of the download's own
 * (http/lent.ts; a range of up to a chunk, from the pool all downloads share: short-range.ts): the
 * listener gives each back once written, and the next chunks are read into them — a fresh 1 MiB
 * buffer per MiB, collected late, was most of a big download's peak RSS. A consumer
 * that keeps chunks never gives them back and gets fresh ones. On S3 each chunk is a fresh object
 * read whole: lent to be freed (`lendToFree`) once the listener sent it.
 */
import { BufferPool, lendToFree } from "../../http/lent.ts";
import type { ByteRange } from "../backend.ts";
import type { CheckedChunk, ChunkChecks } from "./checks.ts";
import { loadChunk } from "./chunks.ts";
import { CHUNK_SIZE } from "./cid.ts";
import type { DfsContext } from "./context.ts";
import { CorruptChunkError, InvalidRangeError, NotFoundError } from "./errors.ts";
import { readShortRange } from "../short-range.ts";

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
/** Manifest positions per query (local store). */
const WINDOW = 32;
/** Ranges up to this long (local store) are read into one buffer and sent as one part. */
const ONE_PART = CHUNK_SIZE;
/** Buffers a download keeps for reuse: the reads ahead, the chunk its stream queues, and the ones
 * the listener's socket may still be sending. */
const POOL_KEEP = READ_AHEAD + 4;

export function read(ctx: DfsContext, cid: string, range?: ByteRange): ReadableStream<Uint8Array> {
  let plan: Plan;
  /** Fetches started, in chunk order. */
  const ahead: Promise<Uint8Array>[] = [];
  const checks = ctx.checks;
  const pool = checks ? new BufferPool(CHUNK_SIZE, POOL_KEEP) : undefined;
  /** Manifest positions read ahead with their records (local store). */
  let window: Promise<Map<number, CheckedChunk>> | undefined;
  let windowEnd = -1;
  const positionOf = async (c: ChunkChecks, idx: number) => {
    if (idx > windowEnd) {
      const from = idx;
      windowEnd = Math.min(idx + WINDOW - 1, plan.last);
      window = c.manifest(cid, from, windowEnd).then((rows) => new Map(rows.map((r) => [r.idx, r])));
    }
    return (await (window as Promise<Map<number, CheckedChunk>>)).get(idx);
  };
  return new ReadableStream<Uint8Array>(
    {
      // async: an unknown Cid or a bad range errors the stream (as a damaged chunk does) instead
      // of throwing from read() — callers handle one way of failing; routes stat() first anyway.
      async start() {
        plan = await planRead(ctx, cid, range);
      },
      async pull(controller) {
        if (checks && plan.next <= plan.last && plan.end - plan.start + 1 <= ONE_PART) {
          // A range of up to a chunk (at most two chunks' parts): one buffer, one part; every
          // byte is read into it before it goes out.
          const body = await readShortRange(plan.end - plan.start + 1, (into) => {
            const reads: Promise<unknown>[] = [];
            for (let at = 0; plan.next <= plan.last; ) {
              const idx = plan.next++;
              const [from, to] = sliceOf(plan, idx, CHUNK_SIZE);
              reads.push(readChecked(ctx, checks, cid, plan, idx, positionOf(checks, idx), into.subarray(at, at + to - from)));
              at += to - from;
            }
            return Promise.all(reads);
          });
          if (body.byteLength > 0) controller.enqueue(body);
          return controller.close();
        }
        while (ahead.length < READ_AHEAD && plan.next <= plan.last) {
          const idx = plan.next++;
          const part = checks ? readChecked(ctx, checks, cid, plan, idx, positionOf(checks, idx), pool) : readPart(ctx, cid, plan, idx);
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

/** The part of chunk `idx` inside the range, as [from, to) within the chunk. */
function sliceOf(plan: Plan, idx: number, size: number): [number, number] {
  const offset = idx * CHUNK_SIZE;
  return [Math.max(plan.start - offset, 0), Math.min(plan.end - offset + 1, size)];
}

/**
 * Local store: chunk `idx` through its verification record (checks.ts), into `into`, or into a
 * buffer lent from `pool` (a manifest size past the pool's buffers, which no upload writes, gets
 * a buffer of its own).
 */
async function readChecked(ctx: DfsContext, checks: ChunkChecks, cid: string, plan: Plan, idx: number, position: Promise<CheckedChunk | undefined>, into?: Uint8Array | BufferPool): Promise<Uint8Array> {
  const chunk = await position;
  if (!chunk) throw new NotFoundError(`dfs content ${cid} was released while being read`);
  const [from, to] = sliceOf(plan, idx, chunk.size);
  if (into instanceof BufferPool) {
    if (to - from > into.size) return damageReported(ctx, cid, idx, chunk.hash, () => checks.read(chunk, from, to));
    const pool = into;
    const whole = pool.take();
    const bytes = await damageReported(ctx, cid, idx, chunk.hash, () => checks.read(chunk, from, to, whole.subarray(0, to - from)));
    return pool.lend(bytes, whole);
  }
  if (into && into.byteLength !== to - from) throw new CorruptChunkError(chunk.hash, `manifest size ${chunk.size} does not hold the range`);
  return damageReported(ctx, cid, idx, chunk.hash, () => checks.read(chunk, from, to, into));
}

/** S3: reads and checks chunk `idx` whole, returns the part of it inside the range. */
async function readPart(ctx: DfsContext, cid: string, plan: Plan, idx: number): Promise<Uint8Array> {
  const chunk = await ctx.rows.chunkAt(cid, idx);
  if (!chunk) throw new NotFoundError(`dfs content ${cid} was released while being read`);
  const bytes = await damageReported(ctx, cid, idx, chunk.hash, () => loadChunk(ctx, chunk.hash, chunk.size));
  const [from, to] = sliceOf(plan, idx, bytes.byteLength);
  // Freed once the listener has sent it; a consumer that keeps it leaves it to the collector.
  return lendToFree(bytes.subarray(from, to), bytes);
}

/** Logs a damaged chunk; a release between the row lookup and the read takes the chunk: that is no damage. */
async function damageReported(ctx: DfsContext, cid: string, idx: number, hash: string, load: () => Promise<Uint8Array>): Promise<Uint8Array> {
  try {
    return await load();
  } catch (e) {
    if (!(e instanceof CorruptChunkError)) throw e;
    if (!(await ctx.rows.object(cid))) throw new NotFoundError(`dfs content ${cid} was released while being read`);
    ctx.log.error("dfs: damaged chunk", { cid, idx, hash, reason: e.message });
    throw e;
  }
}
