/** What the operations of the dfs store share. */
import type { Logger } from "../../log.ts";
import type { ChunkFiles } from "./chunks.ts";
import type { Pins } from "./pins.ts";
import type { Rows } from "./rows.ts";

export interface DfsContext {
  rows: Rows;
  files: ChunkFiles;
  pins: Pins;
  log: Logger;
  /** Uploads in progress, so `stop()` can wait for them to wind down. */
  active: Set<Promise<unknown>>;
  /** Aborted by `stop()`: ends uploads still reading their source. */
  stopping: AbortController;
}
