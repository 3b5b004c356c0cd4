/**
 * Checkpoints of SQLite's write-ahead log, off the event loop. SQLite's own
 * (`wal_autocheckpoint`, 1,000 pages) run inside the COMMIT that crosses the mark, on the
 * connection that wrote it; bun:sqlite is synchronous, so the whole event loop stopped while the
 * log was copied into the database and both were fsynced: 3–5 ms once every ≈ 200 small
 * commits, a third of all the time the commits of small uploads took (moved off the loop, commits
 * took 30 → 20 µs on average; uploads/s did not move). Here
 * the writing connection has no autocheckpoint; every `every` commits, a worker thread
 * (checkpoint-worker.ts) on a connection of its own runs a PASSIVE checkpoint while this thread
 * goes on.
 *
 * A passive checkpoint never waits for the writer, so under steady writes it ends a few frames
 * behind the log, and SQLite starts the log over (writes it from its beginning again) only when a
 * write begins with every frame copied: the log would grow without bound. So a second pass follows
 * with the writing queue held (`hold`), which copies the few frames written meanwhile; the next
 * transaction then starts the log over. Transactions wait for that pass (mostly its fsyncs), the
 * event loop does not.
 *
 * Durability is SQLite's own: a checkpoint fsyncs the log before it copies and the database after.
 * If the thread cannot start or fails, SQLite's autocheckpoint is turned back on (`fallback`): the
 * log stays bounded and only the event loop pays again.
 *
 * @example
 *   const checkpoints = new Checkpointer({ file, hold: () => queue.acquire(), fallback, every: 200 })
 *   db.exec("COMMIT"); checkpoints.committed()
 */
import { workerScript } from "../worker-script.ts";
import type { CheckpointReply, CheckpointRequest } from "./checkpoint-worker.ts";

export interface CheckpointerOptions {
  /** The database file. */
  file: string;
  /** Takes the writing queue; resolves with its release once no transaction is open. */
  hold: () => Promise<() => void>;
  /** Turns SQLite's own checkpoints back on, for when the thread fails. */
  fallback: () => void;
  /** Commits between checkpoints: ≈ 1,000 pages of log at a small transaction's ≈ 5. */
  every?: number;
  /** Told once, when the thread fails and the fallback takes over. */
  onError?: (err: Error) => void;
  /** The worker's script: checkpoint-worker.ts unless a test names another. */
  script?: string;
}

export class Checkpointer {
  private worker: Worker | undefined;
  private waiting: ((reply: CheckpointReply) => void) | undefined;
  private since = 0;
  private running: Promise<void> | undefined;
  private readonly every: number;
  /** Set when the thread failed: SQLite checkpoints by itself again. */
  failed: Error | undefined;
  private closed = false;
  /** Checkpoints completed (both passes): for tests. */
  runs = 0;

  constructor(private readonly opts: CheckpointerOptions) {
    this.every = opts.every ?? 200;
  }

  /** Called after every commit of the writing connection. */
  committed(): void {
    if (++this.since < this.every || this.running || this.failed || this.closed) return;
    this.since = 0;
    this.running = this.run().finally(() => {
      this.running = undefined;
    });
  }

  /** Resolves once no checkpoint is under way: for tests. */
  async settled(): Promise<void> {
    await this.running;
  }

  /** Waits for a checkpoint under way, then closes the thread's connection and the thread. */
  async close(): Promise<void> {
    this.closed = true;
    await this.running;
    const worker = this.worker;
    this.worker = undefined;
    if (!worker || this.failed) return worker?.terminate();
    await this.ask(worker, "close").catch(() => {});
    worker.terminate();
  }

  private async run(): Promise<void> {
    try {
      const worker = this.worker ?? (await this.start());
      await this.checkpoint(worker);
      const release = await this.opts.hold();
      try {
        await this.checkpoint(worker);
      } finally {
        release();
      }
      this.runs++;
    } catch (err) {
      this.fail(err as Error);
    }
  }

  private async start(): Promise<Worker> {
    const worker = new Worker(this.opts.script ?? workerScript("db/checkpoint-worker.ts"));
    worker.unref(); // a checkpoint is never a reason for the process to stay
    worker.addEventListener("message", (event: MessageEvent<CheckpointReply>) => {
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting?.(event.data);
    });
    worker.addEventListener("error", (event: ErrorEvent) => {
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting?.({ error: event.message || "the checkpoint thread failed" });
    });
    this.worker = worker;
    const reply = await this.ask(worker, { open: this.opts.file });
    if (!("ready" in reply)) throw new Error("the checkpoint thread did not open the database");
    return worker;
  }

  private async checkpoint(worker: Worker): Promise<void> {
    const reply = await this.ask(worker, "checkpoint");
    if (!("report" in reply)) throw new Error("the checkpoint thread answered out of turn");
  }

  /** One request at a time: `run` is never entered twice. */
  private ask(worker: Worker, request: CheckpointRequest): Promise<CheckpointReply> {
    return new Promise((ok, fail) => {
      this.waiting = (reply) => ("error" in reply ? fail(new Error(`checkpoint: ${reply.error}`)) : ok(reply));
      worker.postMessage(request);
    });
  }

  private fail(err: Error): void {
    this.failed = err;
    this.worker?.terminate();
    this.worker = undefined;
    this.opts.fallback();
    this.opts.onError?.(err);
  }
}
