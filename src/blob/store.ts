/**
 * The blob store contract (DESIGN.md D15): where `dfs` chunks and `ipfs` blocks live, local files
 * or an S3-compatible object store, behind one small interface so the storage code has one path.
 *
 * Every implementation promises the same things, and test/blob/store.test.ts checks both against
 * them: a `put` that resolves is durable and whole; one that rejects leaves nothing visible (an
 * earlier object under the key stays as it was); readers never see half an object; `delete` of a
 * missing key succeeds; `list` sees every key under a prefix however many there are.
 */

/** Bytes to store: whole, or streamed so memory never grows with the object. */
export type BlobSource = Uint8Array | ReadableStream<Uint8Array>;

/** A byte range: `length` bytes from `offset` (to the end when `length` is unset). A range that
 * reaches past the end is cut at the end; one that starts at or past it yields no bytes. */
export interface BlobRange {
  offset: number;
  length?: number;
}

export interface BlobStore {
  /** "local" or "s3": for logs and health, never for branching. */
  readonly kind: "local" | "s3";
  /** Stores `source` under `key`, replacing any object there; resolves once durable. */
  put(key: string, source: BlobSource): Promise<{ size: number }>;
  /**
   * Optional: a group of puts made durable together (an upload's chunks). Stores whose every put
   * is durable at once anyway (S3) have none: callers use `put` then (see `batchOf`).
   */
  batch?(): BlobBatch;
  /** The object's bytes (or a range of them) as a stream. Throws BlobError BlobNotFound. */
  get(key: string, range?: BlobRange): Promise<ReadableStream<Uint8Array>>;
  /** The whole object in memory, for small ones (a chunk, a block): one request, no stream.
   * Throws BlobError BlobNotFound. */
  bytes(key: string): Promise<Uint8Array>;
  /** The object's size in bytes, or undefined when there is none. */
  stat(key: string): Promise<number | undefined>;
  /** Removes the object; a missing one is not an error. */
  delete(key: string): Promise<void>;
  /** Every key starting with `prefix`, fetched a page at a time (order unspecified). */
  list(prefix: string, options?: { pageSize?: number }): AsyncIterable<string>;
}

/**
 * Puts whose durability is paid once for the group. `put` resolves once the object is whole and
 * visible under its key, but a new object may not be on the disk yet: a power cut before
 * `sync()` resolves can leave it missing or damaged. An object that replaces another is made
 * durable before it replaces it, as `put` does, so what was there stays whole. Nothing may
 * reference the group's objects (commit a manifest naming them) before `sync()` resolves.
 */
export interface BlobBatch {
  put(key: string, bytes: Uint8Array): Promise<void>;
  /** Makes every object this batch put durable, with the folder entries that name them. */
  sync(): Promise<void>;
}

/** The store's batch, or plain durable puts for a store without one. */
export function batchOf(store: BlobStore): BlobBatch {
  return store.batch?.() ?? { put: async (key, bytes) => void (await store.put(key, bytes)), sync: async () => {} };
}

export type BlobErrorCode =
  /** No object under the key. */
  | "BlobNotFound"
  /** The store cannot be reached or answers with a server error: worth retrying later. */
  | "BlobStoreUnavailable"
  /** The store refused our credentials or permissions: an operator must fix the settings. */
  | "BlobAccessDenied"
  /** The configured bucket does not exist. */
  | "BlobBucketMissing"
  /** A key the stores cannot hold the same way (see `checkKey`). */
  | "BlobInvalidKey"
  /** The store's deployment marker names another deployment (see deployment.ts). */
  | "BlobDeploymentMismatch"
  /** Anything else the store answered. */
  | "BlobStoreError";

export class BlobError extends Error {
  override name = "BlobError";
  constructor(
    readonly code: BlobErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export const isBlobError = (e: unknown, code?: BlobErrorCode): e is BlobError => e instanceof BlobError && (code === undefined || e.code === code);

/**
 * Keys are `/`-separated names of letters, digits, `.`, `_`, `=` and `-` (Cids, base32
 * multihashes, `dfs/…`, `ipfs/…`): the same key then means the same object on a file system and
 * on S3, with no escaping, no `..` and no empty segment. `.tmp-` is reserved for the local
 * store's half-written files.
 */
const KEY = /^[A-Za-z0-9_=-][A-Za-z0-9._=-]*(?:\/[A-Za-z0-9_=-][A-Za-z0-9._=-]*)*$/;
export const TEMP_MARK = ".tmp-";

export function checkKey(key: string): string {
  if (key.length > 512 || !KEY.test(key) || key.includes(TEMP_MARK)) throw new BlobError("BlobInvalidKey", `invalid blob key ${JSON.stringify(key.slice(0, 100))}`);
  return key;
}

export function checkRange(range: BlobRange | undefined): void {
  if (range === undefined) return;
  const ok = Number.isSafeInteger(range.offset) && range.offset >= 0 && (range.length === undefined || (Number.isSafeInteger(range.length) && range.length >= 0));
  if (!ok) throw new RangeError(`invalid blob range ${JSON.stringify(range)}`);
}

/** An empty stream: the bytes of a range that starts at or past the end. */
export const emptyStream = (): ReadableStream<Uint8Array> => new ReadableStream({ start: (c) => c.close() });
