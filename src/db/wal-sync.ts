/**
 * Group commit for SQLite's write-ahead log. bun:sqlite is synchronous, so with
 * `synchronous = FULL` every durable COMMIT held the event loop for its fsync of the log (≈ 0.5 ms
 * on a quiet disk, 29 % of the loop's samples in the small-upload bench) and commits fsynced one
 * by one. Instead the writing connection runs `synchronous = NORMAL` — a COMMIT writes its frames
 * into the log but does not fsync it; SQLite still fsyncs the log before a checkpoint and the
 * database after one — and a durable commit awaits an fsync of the log file here, in the thread
 * pool, while the next transactions run. One fsync carries every commit written before it began:
 * the log is appended in order and recovery replays its valid prefix, so a commit on disk brings
 * every earlier one with it. The same rule as before, "a durable transaction has resolved ⇒ it is
 * on disk", at one fsync per burst instead of per commit.
 *
 * What changes: a commit is visible to other requests before its fsync, so a read may show a row
 * that a power cut (not a killed process: the OS holds the write) then loses; that row's own
 * request had not been answered yet, and any write made after reading it comes later in the log,
 * so no acknowledged write can outlive what it read.
 *
 * A failed fsync is final, as PostgreSQL made it after "fsyncgate": Linux may drop the pages it
 * could not write and let the next fsync succeed, so no later commit can be promised durable.
 * Every flush after it fails with the same error until the gateway restarts (SQLite then replays
 * the log as it is on disk).
 *
 * @example
 *   const wal = new WalSync(`${file}-wal`)
 *   db.exec("COMMIT"); await wal.flush()   // durable once this resolves
 */
import { closeSync, fsync, openSync } from "node:fs";

type Fsync = (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void;

export class WalSync {
  private fd: number | undefined;
  /** The fsync in flight, if any. */
  private running: Promise<void> | undefined;
  /** The one queued behind it, shared by every flush that arrived while it ran. */
  private queued: Promise<void> | undefined;
  private closed = false;
  /** The first fsync's failure: every flush after it fails with it (and /healthz reports it). */
  failed: Error | undefined;
  /** fsyncs started; for tests and the bench. */
  started = 0;

  /** `syncFile` is for tests (an fsync they hold or fail); node's runs in the thread pool. */
  constructor(
    private readonly path: string,
    private readonly syncFile: Fsync = fsync,
  ) {}

  /** Resolves once every commit written before this call is on disk; rejects with the fsync's error. */
  flush(): Promise<void> {
    if (this.closed) return Promise.reject(new Error("the database is closed"));
    if (this.failed) return Promise.reject(this.failed);
    if (!this.running) return this.start();
    // The fsync in flight may have begun before the caller's commit was written: one more after it.
    this.queued ??= this.running.then(this.startQueued, this.startQueued);
    return this.queued;
  }

  /** Closes the log's descriptor once no fsync uses it. */
  close(): void {
    this.closed = true;
    if (!this.running) this.release();
  }

  private readonly startQueued = () => {
    this.queued = undefined;
    return this.start();
  };

  private start(): Promise<void> {
    this.started++;
    const p = new Promise<void>((ok, fail) => {
      try {
        // Opened once: fsync flushes the file (its inode), whichever descriptor wrote. The log
        // stays while the database is open (SQLite removes it when its last connection closes).
        this.fd ??= openSync(this.path, "r");
      } catch (err) {
        fail(err);
        return;
      }
      this.syncFile(this.fd, (err) => {
        if (!err) return ok();
        this.failed ??= new Error(`the database's log could not be written to disk (${err.message}): no write is acknowledged until the gateway restarts`, { cause: err });
        fail(this.failed);
      });
    });
    this.running = p;
    const settled = () => {
      if (this.running === p) this.running = undefined;
      if (this.closed && !this.running && !this.queued) this.release();
    };
    p.then(settled, settled);
    return p;
  }

  private release(): void {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
  }
}
