/**
 * What a storage back-end (`dfs` or `ipfs`) does for the storage routes. Routes own files, buckets,
 * names, quota and permissions (in SQLite); a back-end owns content by Cid and how many references
 * to it exist.
 *
 * Cids are the same on both back-ends for the same bytes (D9): UnixFS CIDv1, raw leaves, fixed
 * 1 MiB chunks, balanced layout with 1024 links per node — `hello world\n` gives
 * bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4.
 *
 * Upload protocol: `put` streams the bytes in and makes them durable but unreferenced; the route
 * checks the payload hash and quota, then calls `commit()` (the content now has one more
 * reference) or `abort()` (nothing kept). A crash before `commit` leaves nothing that a start-up
 * sweep does not remove.
 */
// Declared once, beside the Range parser that produces it (storage may import http; not back).
import type { ByteRange } from "../http/range.ts";
import type { Queryable } from "../db/sql.ts";

export type { ByteRange };

export type BackendKind = "dfs" | "ipfs";

/** `releaseIn`'s work for after the commit; it logs its own failures (a later sweep finishes them). */
export type AfterRelease = (() => Promise<void>) | undefined;

export interface PendingPut {
  cid: string;
  size: number;
  /** Adds one reference to the content, in a transaction of its own. Idempotent per PendingPut.
   * The content's bytes are durable before it. */
  commit(): Promise<void>;
  /**
   * What `commit` writes, written in the caller's transaction instead (an upload's file row's: the
   * content's rows, its pins' release and the file row are one commit): it is referenced
   * when that transaction commits, or not at all. After it committed, `commit()` only lets go of
   * what kept the content meanwhile; after it rolled back, `abort()` (storage/pending.ts's
   * `recordFiles` does both).
   */
  commitIn(tx: Queryable): Promise<void>;
  /** Drops what `put` wrote, unless other references hold it. Idempotent. */
  abort(): Promise<void>;
}

/**
 * A CAR import's content between the back-end's `importCar` and its file rows: one root per file,
 * committed or aborted together, as a PendingPut is (the same calls, for several roots at once).
 */
export interface PendingImport {
  /** Each root as its file will be: its Cid, its size, whether it is a directory. */
  roots: readonly { cid: string; size: number; directory: boolean }[];
  commit(): Promise<void>;
  commitIn(tx: Queryable): Promise<void>;
  abort(): Promise<void>;
}

/** What a back-end can do beyond storing and reading: asked here, so no caller names a back-end to decide. */
export interface BackendCapabilities {
  /** Files on it may be deleted (dfs); content on ipfs is permanent (spec rule 4). */
  readonly delete: boolean;
}

export interface Backend {
  readonly kind: BackendKind;
  readonly capabilities: BackendCapabilities;
  /** Reads the whole stream; rejects (keeping nothing) if the stream errors or `signal` aborts. */
  put(source: ReadableStream<Uint8Array>, opts?: { signal?: AbortSignal }): Promise<PendingPut>;
  /**
   * Content made of committed content `cids`, one after the other, without reading their bytes
   * (an S3 multipart completion, D18), uncommitted as `put` leaves it; undefined when this
   * back-end cannot (then stream the bytes through `put`).
   */
  compose?(cids: readonly string[]): Promise<PendingPut | undefined>;
  /**
   * A CAR's roots as content of their own (D25), every block checked against its Cid and each
   * root's DAG whole, uncommitted as `put` leaves content; rejects (keeping nothing) otherwise.
   * Only a back-end that stores blocks by Cid has it (ipfs).
   */
  importCar?(source: ReadableStream<Uint8Array>, opts?: { signal?: AbortSignal }): Promise<PendingImport>;
  /** Size in bytes of content this back-end holds (committed) and can read as one file, or undefined. */
  stat(cid: string): Promise<{ size: number } | undefined>;
  /** Streams the content, or a range of it; a damaged chunk errors the stream instead of
   * serving wrong bytes. */
  read(cid: string, range?: ByteRange): ReadableStream<Uint8Array>;
  /** Drops one reference; content with none left is removed (dfs) or unpinned (ipfs). */
  release(cid: string): Promise<void>;
  /**
   * What `release` writes, written in the caller's READ COMMITTED transaction instead (the file row
   * that replaces an entry: the old content's count drops in the commit that drops its row, so no
   * crash leaves it referenced by nothing, nor counted once too often). Statements only, relative
   * updates: a retried transaction runs it again. Answers what is left for after that commit:
   * deleting the blobs no row references any more (a DELETE to the blob store, which no database
   * transaction can hold), or undefined when nothing is (the content still referenced elsewhere).
   */
  releaseIn(tx: Queryable, cid: string): Promise<AfterRelease>;
  /** Component health for /healthz. */
  health(): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}
