/**
 * Shared helpers for the dfs tests: a store on a real database (a SQLite file, or PostgreSQL on the
 * STOWAGE_TEST_DB=postgres pass: test/support/db.ts) and a real blob store — local
 * files, or the shared Ceph RGW of test/support/ceph.ts (one key prefix per data dir, so tests
 * never see each other's objects and a reopened data dir finds its own) — and byte sources.
 * Suites run on both with `describe.each(BLOB_KINDS)`.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { type BlobStore, LocalBlobStore, localBlobRoot, S3BlobStore } from "../../../src/blob/index.ts";
import type { S3BlobStoreOptions } from "../../../src/blob/s3.ts";
import { type BlobGuard, createBlobGuard } from "../../../src/blob/guard.ts";
import { silentLogger, type Logger } from "../../../src/log.ts";
import { CHUNK_PREFIX, chunkKey, openDfs, type DfsBackend } from "../../../src/storage/dfs/index.ts";
import { cephRgw } from "../../support/ceph.ts";
import { testDatabase, testDatabaseUrlOf, TEST_DB, type TestDatabase } from "../../support/db.ts";
import { tempDir } from "../../support/tmp.ts";

export const MiB = 1_048_576;

export type BlobKind = "local" | "s3";
export const BLOB_KINDS: BlobKind[] = ["local", "s3"];

export interface Store {
  kind: BlobKind;
  dfs: DfsBackend;
  database: TestDatabase;
  blobs: BlobStore;
  guard: BlobGuard;
  /** The data dir holding the database (and, on the local store, the blobs). */
  root: string;
  /** Where chunk files lived before the blob store (moved in at open). */
  legacyDir: string;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** The data dir; pass an earlier store's again to reopen the same data (as after a restart). */
  root?: string;
  log?: Logger;
  /** The guard's clock (to open "after" pins and tombstones have lapsed). */
  now?: () => number;
  /** See DfsOptions.resweepAfterMs. */
  resweepAfterMs?: number;
  /** The blob store to use instead of `kind`'s (a child process gets its settings: blobSettings). */
  blobs?: BlobStore;
  /** The PostgreSQL database of `root` (a child process gets it from its parent: databaseUrl). */
  databaseUrl?: string;
  /** Another store's database connection, shared (closed by that store). */
  database?: TestDatabase;
}

const prefixes = new Map<string, string>();

/** The S3 key prefix of a data dir in this process (a new one on first use). */
export async function prefixOf(root: string): Promise<string> {
  let prefix = prefixes.get(root);
  if (prefix === undefined) prefixes.set(root, (prefix = (await cephRgw()).prefix()));
  return prefix;
}

/** The S3 settings of a data dir's store (undefined on local), for a child process to open it. */
export async function blobSettings(kind: BlobKind, root: string): Promise<S3BlobStoreOptions | undefined> {
  if (kind === "local") return undefined;
  const rgw = await cephRgw();
  return { endpoint: rgw.endpoint, bucket: rgw.bucket, region: rgw.region, prefix: await prefixOf(root), accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey };
}

/** The blob store a data dir uses on `kind` (the same S3 prefix every time for one dir). */
export async function blobStoreFor(kind: BlobKind, root: string): Promise<BlobStore> {
  const s3 = await blobSettings(kind, root);
  return s3 ? new S3BlobStore(s3) : new LocalBlobStore(localBlobRoot(root));
}

/** Opens a store on `kind`. */
export async function openStore(kind: BlobKind = "local", o: OpenOptions = {}): Promise<Store> {
  const root = o.root ?? tempDir("dfs");
  const log = o.log ?? silentLogger;
  const database = o.database ?? testDatabase(root, o.databaseUrl);
  const blobs = o.blobs ?? (await blobStoreFor(kind, root));
  const guard = createBlobGuard({ sql: database.sql, store: blobs, log, now: o.now });
  const legacyDir = join(root, "dfs");
  const dfs = await openDfs({ sql: database.sql, log, guard, legacyDir, resweepAfterMs: o.resweepAfterMs });
  return {
    kind,
    dfs,
    database,
    blobs,
    guard,
    root,
    legacyDir,
    async close() {
      await dfs.stop();
      await guard.close();
      if (!o.database) await database.close();
    },
  };
}

/** Deterministic bytes (xorshift32), different per seed; no two 1 MiB chunks of one seed alike. */
export function bytesOf(size: number, seed = 1): Uint8Array {
  const out = new Uint8Array(size);
  const words = new Uint32Array(out.buffer, 0, size >>> 2);
  let x = seed * 2654435761 || 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    words[i] = x >>> 0;
  }
  for (let i = words.length * 4; i < size; i++) out[i] = i & 0xff;
  return out;
}

/** A stream of `bytes` in pieces of `piece` bytes (as a request body arrives). */
export function streamOf(bytes: Uint8Array, piece = 64 * 1024): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.length) return c.close();
      c.enqueue(bytes.slice(at, at + piece));
      at += piece;
    },
  });
}

export async function readAll(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** The keys under `dfs/` in the store, sorted. */
export async function chunkKeys(store: Pick<Store, "blobs">): Promise<string[]> {
  const out: string[] = [];
  for await (const key of store.blobs.list(CHUNK_PREFIX)) out.push(key);
  return out.sort();
}

/** The keys the chunks with these bytes have, sorted. */
export function keysOf(...chunks: Uint8Array[]): string[] {
  return chunks.map((c) => chunkKey(sha256(c))).sort();
}

/** The key of the chunk with these bytes. */
export function keyOf(chunk: Uint8Array): string {
  return chunkKey(sha256(chunk));
}

/** Every file under a folder (relative paths), recursively. */
export function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

export function sha256(bytes: Uint8Array): string {
  return new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
}

/** The PostgreSQL database of a data dir (undefined on SQLite), for a child process to open it. */
export async function databaseUrl(root: string): Promise<string | undefined> {
  return TEST_DB === "postgres" ? testDatabaseUrlOf(root) : undefined;
}

/** Row counts of the dfs tables. */
export async function rowCounts(store: Store): Promise<{ objects: number; chunks: number; manifest: number }> {
  const n = async (table: string) => (await store.database.sql.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))?.n ?? 0;
  return { objects: await n("dfs_objects"), chunks: await n("dfs_chunks"), manifest: await n("dfs_object_chunks") };
}

export async function chunkRefs(store: Store, hash: string): Promise<number | undefined> {
  return (await store.database.sql.get<{ refs: number }>("SELECT refs FROM dfs_chunks WHERE hash = $1", [hash]))?.refs;
}

/** The one value of a one-row, one-column query. */
export async function scalar(store: Store, text: string): Promise<unknown> {
  const row = await store.database.sql.get<Record<string, unknown>>(text);
  return row && Object.values(row)[0];
}
