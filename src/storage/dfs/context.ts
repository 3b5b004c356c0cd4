/** What the operations of the dfs store share. */
import type { BlobStore } from "../../blob/index.ts";
import type { BlobGuard } from "../../blob/guard.ts";
import type { Logger } from "../../log.ts";
import type { ChunkChecks } from "./checks.ts";
import type { Rows } from "./rows.ts";

export interface DfsContext {
  rows: Rows;
  /** The blob store the chunks live in, and the guard every deletion goes through (D15). */
  store: BlobStore;
  guard: BlobGuard;
  /** D9's verification records, on the local blob store only (S3 chunks are hashed on every read). */
  checks?: ChunkChecks;
  log: Logger;
  /** Uploads in progress, so `stop()` can wait for them to wind down. */
  active: Set<Promise<unknown>>;
  /** Aborted by `stop()`: ends uploads still reading their source. */
  stopping: AbortController;
}
