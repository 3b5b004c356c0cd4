/**
 * Imports a byte stream as UnixFS with the options of D9, streaming: the chunker holds one 1 MiB
 * chunk and the importer a few blocks in flight, whatever the file size. `importFile` of
 * ipfs-unixfs-importer is what @helia/unixfs's `addByteStream` calls with these options; called
 * directly, the server does not load @helia/unixfs (its exporter, globbing, directory code) for
 * nothing (test/storage/ipfs/content.test.ts compares the Cids with @helia/unixfs's).
 *
 * Blocks go to the blob store through the upload's sink, following D15: each block key is pinned
 * by the upload's lease BEFORE the sink looks whether the block exists (so no deleter can take a
 * block this upload counts on), then written when missing — at once, without asking the store,
 * when no row names it (new content: one PUT instead of a HEAD and a PUT). The sink records the
 * DAG's block keys (with sizes) for the commit transaction, which makes rows reference them;
 * pinning the root is the caller's `commit`.
 *
 * Blocks are written through the upload's blob batch, as dfs chunks are (dfs/put.ts): durable at
 * the caller's `batch.sync()`, which comes before the commit can name them. A block found in the
 * store is skipped only when committed rows name it (then it was synced before they committed);
 * any other is written, and a batch put over an existing name is fsync'd and renamed, so a block
 * another upload's batch has not yet synced never ends up named by this one's rows unsynced.
 *
 * The chunker cuts leaves into buffers lent from a pool of the upload's own (storage/chunker.ts):
 * the sink gives a leaf back once its write has resolved (a put that failed, or ran past its S3
 * deadline, may still be reading it: never given back), instead of a fresh 1 MiB buffer per leaf
 * collected late (peak RSS). A sink of another kind never gives back: fresh leaves then.
 */
import { importFile, type WritableStorage } from "ipfs-unixfs-importer";
import type { CID } from "multiformats/cid";
import type { BlobGuard, Lease } from "../../blob/guard.ts";
import type { BlobBatch } from "../../blob/store.ts";
import type { Queryable } from "../../db/sql.ts";
import { BufferPool, giveBack } from "../../http/lent.ts";
import { lentChunker } from "../chunker.ts";
import { CHUNK_SIZE, d9ImporterOptions } from "../cid-options.ts";
import { blockKey } from "./blocks.ts";
import { IpfsError } from "./errors.ts";

export interface Imported {
  cid: CID;
  size: number;
}

/** What the importer needs of a blockstore: `put`. */
export type ImporterBlockstore = WritableStorage;

/** The blocks an upload wrote or found: key → size (each key once, however often linked). */
export type BlockSizes = Map<string, number>;

/** A write-only blockstore for one upload's importer. `referencedAmong(q, keys)`: those of `keys`
 * a pinned root's rows name, read in their pin's transaction; a block no row names is most likely
 * new, and is written without a HEAD first (see BlobGuard.ensure's `unseen`). */
export function uploadSink(guard: BlobGuard, lease: Lease, blocks: BlockSizes, referencedAmong: ReferencedAmong, batch: BlobBatch): ImporterBlockstore {
  const pin = pinTogether(lease, referencedAmong);
  return {
    async put(cid: CID, bytes: Uint8Array) {
      const key = blockKey(cid);
      const referenced = await pin(key); // before looking: see the header
      blocks.set(key, bytes.byteLength);
      await guard.ensure(key, () => bytes, bytes.byteLength, { unseen: !referenced, batch, lease });
      giveBack(bytes); // written, or found: the importer hashed it before, and reads it no more
      return cid;
    },
  };
}

/** Those of `keys` that committed rows name (ipfs/pins.ts `referencedAmong`). */
export type ReferencedAmong = (q: Queryable, keys: readonly string[]) => Promise<ReadonlySet<string>>;

/**
 * `pin(key)` for the importer's blocks: the keys asked for in one turn of the event loop are
 * pinned in one transaction, and each call resolves once its key's pin has committed, with whether
 * a row names the block (read in that transaction, `Lease.pin`'s alongside: no round trip of its
 * own on PostgreSQL). The importer writes its blocks ten at a time (its
 * blockWriteConcurrency), and a pin is a transaction — on SQLite its BEGIN and COMMIT on the event
 * loop (no fsync of its own: guard.ts pinKeys; ≈ 3–4 ms each on a busy disk when it
 * had one), on PostgreSQL round trips and a durable commit — so one transaction per batch instead
 * of per block gives that time back to the upload (a 128 MiB upload: 14 pin transactions instead
 * of 129).
 */
export function pinTogether(lease: Lease, referencedAmong: ReferencedAmong): (key: string) => Promise<boolean> {
  let waiting: string[] = [];
  let next: Promise<ReadonlySet<string>> | undefined;
  return async (key) => {
    waiting.push(key);
    // setImmediate, not a microtask: a batch's blocks reach put() a few awaits apart (hashing).
    next ??= new Promise<void>((go) => setImmediate(go)).then(() => {
      const keys = waiting;
      waiting = [];
      next = undefined;
      return lease.pin(keys, (q) => referencedAmong(q, keys));
    });
    return (await next).has(key);
  };
}

/** Leaf buffers an upload keeps for reuse: the importer's blocks in flight (its default
 * blockWriteConcurrency, 10), the leaf being cut, one spare. */
const POOL_KEEP = 12;

export async function importStream(sink: ImporterBlockstore, source: ReadableStream<Uint8Array>, signal?: AbortSignal): Promise<Imported> {
  const counted = { bytes: 0 };
  try {
    signal?.throwIfAborted();
    // The importer takes no signal: `readAll` stops on it, which ends the import with an error.
    const options = { ...d9ImporterOptions(), chunker: lentChunker(new BufferPool(CHUNK_SIZE, POOL_KEEP)) };
    const { cid } = await importFile({ content: readAll(source, counted, signal) }, sink, options);
    signal?.throwIfAborted();
    return { cid, size: counted.bytes };
  } catch (err) {
    throw new IpfsError("IPFS_IMPORT_FAILED", `import failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  }
}

/** The stream as an async iterable that counts bytes and stops on `signal`. */
async function* readAll(source: ReadableStream<Uint8Array>, counted: { bytes: number }, signal?: AbortSignal): AsyncGenerator<Uint8Array> {
  const reader = source.getReader();
  // A pending read() does not see the signal; cancelling the reader ends it (as "done", which the
  // check after each read tells apart from a real end).
  const onAbort = () => void reader.cancel(signal?.reason).catch(() => {});
  signal?.addEventListener("abort", onAbort, { once: true });
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      signal?.throwIfAborted();
      if (done) {
        finished = true;
        return;
      }
      counted.bytes += value.byteLength;
      yield value;
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    // Stopped early (an importer error): tell the producer nobody reads any more.
    if (!finished) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}
