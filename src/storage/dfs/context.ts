/** What the operations of the dfs store share. */
import type { BlobStore } from "../../blob/index.ts";
import type { BlobGuard } from "../../blob/guard.ts";
import type { Logger } from "../../log.ts";
import type { Rows } from "./rows.ts";

export interface DfsContext {
  rows: Rows;
  /** The blob store the chunks live in, and the guard every deletion goes through (D15). */
  store: BlobStore;
  guard: BlobGuard;
  log: Logger;
  /** Uploads in progress, so `stop()` can wait for them to wind down. */
  active: Set<Promise<unknown>>;
  /** Aborted by `stop()`: ends uploads still reading their source. */
  stopping: AbortController;
}
