/**
 * The thread that checkpoints SQLite's write-ahead log for checkpointer.ts, on a connection of its
 * own, so that copying the log into the database and its two fsyncs never stop the event loop.
 * Its first message names the database file; each later one asks for one PASSIVE checkpoint and
 * gets back what SQLite reports (or the error), and "close" closes the connection. Only bun:sqlite
 * here: a worker loads what it imports again, in its own heap.
 *
 * Listed as an entrypoint of the compiled binary (scripts/build.ts), as Bun needs for a worker.
 */
import { Database } from "bun:sqlite";

/** What a checkpoint reports: frames in the log, and how many of them are now in the database. */
interface CheckpointReport {
  busy: number;
  log: number;
  checkpointed: number;
}

export type CheckpointRequest = { open: string } | "checkpoint" | "close";
export type CheckpointReply = { ready: true } | { report: CheckpointReport } | { error: string } | { closed: true };

declare const self: Worker;

let db: Database | undefined;

function answer(request: CheckpointRequest): CheckpointReply {
  try {
    if (typeof request === "object") {
      db = new Database(request.open, { strict: true });
      // Another connection may be writing; a checkpoint's locks wait for it rather than fail.
      db.exec("PRAGMA busy_timeout = 5000");
      // The checkpoint fsyncs the log before it copies and the database after (SQLite's FULL).
      db.exec("PRAGMA synchronous = FULL");
      return { ready: true };
    }
    if (!db) return { error: "the database is not open" };
    if (request === "close") {
      db.close();
      db = undefined;
      return { closed: true };
    }
    return { report: db.query("PRAGMA wal_checkpoint(PASSIVE)").get() as CheckpointReport };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

self.onmessage = (event: MessageEvent<CheckpointRequest>) => {
  self.postMessage(answer(event.data));
};
