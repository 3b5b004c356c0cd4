/**
 * Errors of the `dfs` store, each with a stable `code` (as Helia's unixfs does) so routes map
 * them to statuses without matching messages. Errors of the upload's source stream and of the
 * caller's abort signal are passed through unchanged (the route made them, the route knows them).
 */
export class DfsError extends Error {
  readonly code: string = "ERR_DFS";
  override name = "DfsError";
}

/** No committed content with this Cid. */
export class NotFoundError extends DfsError {
  override readonly code = "ERR_NOT_FOUND";
  override name = "NotFoundError";
}

/** A chunk file is missing, has the wrong size or the wrong SHA-256: never serve its bytes. */
export class CorruptChunkError extends DfsError {
  override readonly code = "ERR_CORRUPT_CHUNK";
  override name = "CorruptChunkError";
  constructor(
    readonly hash: string,
    reason: string,
  ) {
    super(`chunk ${hash}: ${reason}`);
  }
}

/** A range outside the content, or not `0 <= start <= end < size`. */
export class InvalidRangeError extends DfsError {
  override readonly code = "ERR_INVALID_RANGE";
  override name = "InvalidRangeError";
}

/** The store was stopped: no new uploads. */
export class StoppedError extends DfsError {
  override readonly code = "ERR_STOPPED";
  override name = "StoppedError";
}

/** `commit()` after `abort()` (the bytes may already be gone). */
export class AbortedPutError extends DfsError {
  override readonly code = "ERR_PUT_ABORTED";
  override name = "AbortedPutError";
}
