/**
 * Shared by the ipfs back-end tests: a back-end over a temp data dir, on the blob store the test
 * process runs on (test/support/blobs.ts: local files, or the Ceph RGW with STOWAGE_TEST_BLOBS=s3,
 * each data dir its own prefix), and byte helpers.
 */
import { createBlobGuard, type BlobGuard } from "../../../src/blob/guard.ts";
import type { BlobStore } from "../../../src/blob/index.ts";
import { silentLogger, type Logger } from "../../../src/log.ts";
import { BLOCK_PREFIX } from "../../../src/storage/ipfs/blocks.ts";
import { openIpfs, type IpfsBackend } from "../../../src/storage/ipfs/index.ts";
import { join } from "node:path";
import { blobStoreOf } from "../../support/blobs.ts";
import { testDatabase, type TestDatabase } from "../../support/db.ts";
import { tempDir } from "../../support/tmp.ts";

export const MiB = 1_048_576;
export const LOCAL = ["/ip4/127.0.0.1/tcp/0"];

export interface Opened {
  ipfs: IpfsBackend;
  database: TestDatabase;
  dataDir: string;
  store: BlobStore;
  guard: BlobGuard;
  close(): Promise<void>;
}

export interface OpenOptions {
  allowPeers?: string[];
  log?: Logger;
  /** Another store than the process's one for `dataDir` (a child process gets it from its parent). */
  store?: BlobStore;
  /** The guard's clock: ahead of the real one, a restart long after a crash. */
  now?: () => number;
  /** The PostgreSQL database of `dataDir` (a child process gets it from its parent). */
  databaseUrl?: string;
  /** false: no orphan sweep at open (a test that writes blocks no row references, on purpose). */
  sweepAtOpen?: boolean;
}

/** Opens (or reopens) the back-end of `dataDir`, with its own database (test/support/db.ts). */
export async function openBackend(dataDir = tempDir("ipfs"), opts: OpenOptions = {}): Promise<Opened> {
  const database = testDatabase(dataDir, opts.databaseUrl);
  const log = opts.log ?? silentLogger;
  const store = opts.store ?? blobStoreOf(dataDir);
  const guard = createBlobGuard({ sql: database.sql, store, log, now: opts.now });
  const ipfs = await openIpfs({ dir: join(dataDir, "ipfs"), listen: LOCAL, sql: database.sql, log, guard, allowPeers: opts.allowPeers, sweepAtOpen: opts.sweepAtOpen });
  return {
    ipfs,
    database,
    dataDir,
    store,
    guard,
    async close() {
      await ipfs.stop();
      await guard.close();
      await database.close();
    },
  };
}

/** Random bytes (getRandomValues fills at most 64 KiB per call). */
export function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65_536) crypto.getRandomValues(out.subarray(i, Math.min(n, i + 65_536)));
  return out;
}

/** A stream of `bytes` in pieces of `piece` bytes (uneven on purpose: chunking must not care). */
export function streamOf(bytes: Uint8Array, piece = 100_000): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.byteLength) return c.close();
      c.enqueue(bytes.slice(at, at + piece));
      at += piece;
    },
  });
}

export async function collect(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

export function sha256(bytes: Uint8Array): string {
  return new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
}

/** The block keys in the store, sorted. */
export async function blockKeys(store: BlobStore): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of store.list(BLOCK_PREFIX)) keys.push(key);
  return keys.sort();
}

/** Rows of the block index: key → refs. */
export async function blockRows(o: Opened): Promise<Map<string, number>> {
  const rows = await o.database.sql.all<{ key: string; refs: number }>("select key, refs from ipfs_blocks");
  return new Map(rows.map((r) => [r.key, r.refs]));
}

/** Rejects if `p` takes longer than `ms`: a hang must fail the test, not stall the run. */
export function within<T>(ms: number, p: Promise<T>): Promise<T> {
  return Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms).unref())]);
}

/**
 * Calls `seen(key)` before every block write an upload makes to `store`: plain puts, and the
 * puts of its batches (local files: an upload writes its blocks through one). `batched()` counts
 * the batch puts, `unsynced()` those that no `sync()` has yet made durable.
 */
export function watchBlockWrites(store: BlobStore, seen: (key: string) => void): { batched(): number; unsynced(): number } {
  let pending = 0;
  let batched = 0;
  const put = store.put.bind(store);
  store.put = (key, source) => (key.startsWith(BLOCK_PREFIX) && seen(key), put(key, source));
  const batch = store.batch?.bind(store);
  if (batch) {
    store.batch = () => {
      const b = batch();
      let mine = 0;
      return {
        put: (key, bytes) => (key.startsWith(BLOCK_PREFIX) && (seen(key), batched++, pending++, mine++), b.put(key, bytes)),
        sync: async () => {
          const synced = mine;
          await b.sync();
          pending -= synced;
          mine -= synced;
        },
      };
    };
  }
  return { batched: () => batched, unsynced: () => pending };
}
