/**
 * Upload: the source is cut into 1 MiB chunks, each hashed for its raw-leaf Cid (`chunkContent`:
 * D9's Cid without ipfs-unixfs-importer); each reaches `ChunkSink.put` in file order, is pinned
 * under the upload's lease (D15), and is written to the blob store behind the chunker, at most
 * WRITE_QUEUE chunks at once. Memory holds the chunk being cut plus the chunks queued — a few MiB
 * whatever the file size — and the manifest (one hash per MiB). Inner dag-pb nodes are not
 * stored: the Cid is all we need of them.
 *
 * Nothing is referenced until `commit()` writes the manifest, in one transaction, after every
 * chunk is durable; the lease is released after that (the rows keep the chunks then). A failure
 * or `abort()` releases the lease and deletes, through the guard, the chunks nobody else needs.
 *
 * Chunks are written through one blob batch per upload (BlobBatch): on local files each new chunk
 * is written and linked to its name at once, and `put` resolves only after one `sync()` has
 * fsynced them all with their folders — before any `commit()` can name them. A fsync, a rename
 * and a folder fsync per chunk, one after the other, had the upload wait on the disk for each
 * MiB. Crash safety is the same: a chunk is durable before a manifest names it, and a
 * crash before that leaves only chunks nothing references (the sweep's) and temporary files.
 *
 * Chunks are cut into buffers lent from a pool of the upload's own (storage/chunker.ts):
 * the sink gives a chunk back once its write has resolved (a put that failed, or ran past its S3
 * deadline, may still be reading it: never given back), so a few buffers carry the whole upload
 * instead of a fresh 1 MiB one per chunk collected late (peak RSS).
 */
import type { CID } from "multiformats/cid";
import type { Lease } from "../../blob/guard.ts";
import type { PendingPut } from "../backend.ts";
import { batchOf, type BlobBatch } from "../../blob/store.ts";
import { BufferPool, giveBack } from "../../http/lent.ts";
import { lentChunker } from "../chunker.ts";
import { storeChunk } from "./chunks.ts";
import { CHUNK_SIZE, chunkContent, chunkKey, leafHash } from "./cid.ts";
import type { DfsContext } from "./context.ts";
import { AbortedPutError, StoppedError } from "./errors.ts";
import { collect } from "./gc.ts";
import { chunkReferenced, commitIn, type ChunkRef } from "./rows.ts";
import { pendingPut } from "../pending.ts";

/**
 * Chunks an upload may have handed over and not yet made durable, written concurrently behind the
 * chunker (each is 1 MiB of memory). A put is a round trip (an S3 PUT, or a local write with a
 * file and a folder fsync): written one at a time, uploads to Ceph RGW ran at ≈ 35 MiB/s, two
 * to four at once at ≈ 50–70 (2-core VM, noisy); local files showed no clear difference.
 */
const WRITE_QUEUE = 3;
/** Chunk buffers an upload keeps for reuse: the writes queued, the chunk being cut, one spare. */
const POOL_KEEP = WRITE_QUEUE + 2;

export async function put(ctx: DfsContext, source: ReadableStream<Uint8Array>, opts: { signal?: AbortSignal } = {}): Promise<PendingPut> {
  if (ctx.stopping.signal.aborted) throw new StoppedError("dfs store is stopped");
  const signal = opts.signal ? AbortSignal.any([opts.signal, ctx.stopping.signal]) : ctx.stopping.signal;
  const run = upload(ctx, source, signal);
  ctx.active.add(run);
  const forget = () => void ctx.active.delete(run);
  run.then(forget, forget);
  return run;
}

async function upload(ctx: DfsContext, source: ReadableStream<Uint8Array>, signal: AbortSignal): Promise<PendingPut> {
  const sink = new ChunkSink(ctx, ctx.guard.lease());
  const read = { bytes: 0 };
  try {
    const root = await chunkContent(pieces(source, signal, read), lentChunker(new BufferPool(CHUNK_SIZE, POOL_KEEP)), (leaf, bytes) => sink.put(leaf, bytes));
    // The manifest is built from the order in which leaves arrive; a short count would mean the
    // chunker lost bytes. Never commit such a manifest.
    if (read.bytes !== sink.size) throw new Error(`dfs: the chunker handed over ${sink.size} of ${read.bytes} bytes`);
    await sink.finish();
    signal.throwIfAborted();
    const cid = root.toString();
    ctx.log.debug("dfs: put", { cid, size: sink.size, chunks: sink.manifest.length, written: sink.written });
    return pending(ctx, cid, sink);
  } catch (e) {
    await sink.settle();
    await discard(ctx, sink);
    throw e;
  }
}

/** Where an upload's leaves go, in file order: each distinct chunk pinned, then written behind the chunker. */
class ChunkSink {
  readonly manifest: ChunkRef[] = [];
  /** Distinct chunks of this upload, each pinned once. */
  readonly pinned = new Set<string>();
  size = 0;
  /** Chunks whose bytes this upload wrote (the rest were in the store already). */
  written = 0;
  /** Writes handed over and not finished, running at once. */
  private readonly queue = new Set<Promise<void>>();
  /** Where the chunks are written: durable once `finish()` has synced it. */
  private readonly batch: BlobBatch;
  private failure: { error: unknown } | undefined;

  constructor(
    private readonly ctx: DfsContext,
    readonly lease: Lease,
  ) {
    this.batch = batchOf(ctx.store);
  }

  async put(cid: CID, bytes: Uint8Array): Promise<void> {
    this.throwIfFailed();
    const hash = leafHash(cid);
    this.manifest.push({ hash, size: bytes.byteLength });
    this.size += bytes.byteLength;
    if (!this.pinned.has(hash)) {
      this.pinned.add(hash);
      // Before storeChunk() looks whether it exists (D15); whether a row references it is read in
      // the pin's transaction (no round trip of its own on PostgreSQL).
      const referenced = await this.lease.pin([chunkKey(hash)], (q) => chunkReferenced(q, hash));
      this.enqueue(hash, bytes, referenced);
    } else giveBack(bytes); // written (or being written) from an earlier chunk's bytes, and hashed
    while (this.queue.size >= WRITE_QUEUE) await Promise.race(this.queue);
    this.throwIfFailed();
  }

  /** Waits for every write and makes them durable; throws the first failure. */
  async finish(): Promise<void> {
    await this.settle();
    this.throwIfFailed();
    await this.batch.sync();
  }

  /** Waits for every write, failed or not. */
  async settle(): Promise<void> {
    while (this.queue.size > 0) await Promise.all(this.queue);
  }

  private enqueue(hash: string, bytes: Uint8Array, referenced: boolean): void {
    // Never rejects: a failure is kept and thrown from the next put() or finish(); writes not
    // yet started are skipped.
    // then(): the body runs once `write` is assigned (a skipped write ends at once).
    const write: Promise<void> = Promise.resolve().then(async () => {
      let done = false;
      try {
        if (!this.failure && (await storeChunk(this.ctx, hash, bytes, { batch: this.batch, lease: this.lease, referenced }))) this.written++;
        done = true;
      } catch (error) {
        this.failure ??= { error };
      } finally {
        this.queue.delete(write);
      }
      if (done) giveBack(bytes);
    });
    this.queue.add(write);
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure.error;
  }
}

function pending(ctx: DfsContext, cid: string, sink: ChunkSink): PendingPut {
  let manifest: ChunkRef[] = sink.manifest;
  const size = sink.size;
  return pendingPut(cid, size, sink.lease, () => new AbortedPutError(`put of ${cid} was aborted`), {
    commit: () => ctx.rows.commit(cid, size, manifest),
    commitIn: (tx) => commitIn(tx, cid, size, manifest),
    async committed() {
      manifest = []; // the rows have it; a PendingPut kept around by a caller should not hold it
      sink.pinned.clear();
    },
    discard: () => discard(ctx, sink),
  });
}

/** Releases an upload's lease and deletes the chunks no other upload or row needs. */
async function discard(ctx: DfsContext, sink: ChunkSink): Promise<void> {
  const hashes = [...sink.pinned];
  sink.pinned.clear();
  await sink.lease.release();
  await collect(ctx, hashes);
}

/**
 * The source's pieces, ending early (with the signal's reason) when `signal` aborts, and cancelling
 * the source when the chunker stops reading (a failed write), so the sender is not left hanging.
 */
async function* pieces(source: ReadableStream<Uint8Array>, signal: AbortSignal, read: { bytes: number }): AsyncGenerator<Uint8Array> {
  const reader = source.getReader();
  const cancel = () => void reader.cancel(signal.reason).catch(() => {});
  signal.addEventListener("abort", cancel, { once: true });
  let ended = false;
  try {
    for (;;) {
      signal.throwIfAborted();
      const next = await reader.read();
      signal.throwIfAborted();
      if (next.done) {
        ended = true;
        return;
      }
      read.bytes += next.value.byteLength;
      if (next.value.byteLength > 0) yield next.value;
    }
  } finally {
    signal.removeEventListener("abort", cancel);
    if (!ended) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}
