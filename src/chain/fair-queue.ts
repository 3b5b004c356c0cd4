/**
 * Work from many clients on a few slots: the public JSON-RPC's simulations and forwarded reads,
 * so that however many the public sends, the chain (and the gateway's own calls to it) sees at
 * most `slots` of them at once. Waiting work is taken client by client in turn, so one client's
 * full batches never push another client's single call back. What may wait is bounded per client
 * (`perClient`) and in all (`maxWaiting`); when all is taken, a newcomer still gets in: the newest
 * work of the longest line makes room for it, so a few clients that keep the queue full cannot
 * shut out anyone whose line is shorter than theirs. Each piece of work has a deadline:
 * past it the caller gets `timedOut` at once, whether the work still waits (it never starts) or
 * runs (its signal aborts); a slot is freed only when the work itself settles, so work that cannot
 * be stopped (a call inside anvil) still counts against the slots until it ends.
 *
 * @example
 *   const queue = new FairQueue({ slots: 1, maxWaiting: 64, perClient: 20 })
 *   const outcome = await queue.submit(clientKey(ip), Date.now() + 5000, (signal) => simulate(request, signal))
 *   if ("done" in outcome) answer(outcome.done)
 */

export type Outcome<T> = { done: T } | { timedOut: true } | { full: true };

interface Job {
  client: string;
  work: (signal: AbortSignal) => Promise<unknown>;
  abort: AbortController;
  settle: (outcome: Outcome<unknown>) => void;
  fail: (err: unknown) => void;
  timer: ReturnType<typeof setTimeout>;
  started: boolean;
  settled: boolean;
}

export class FairQueue {
  /** Waiting work by client; a Map keeps its keys in insertion order, which makes the turns. */
  private readonly waiting = new Map<string, Job[]>();
  private waitingCount = 0;
  private running = 0;

  constructor(private readonly opts: { slots: number; maxWaiting: number; perClient: number }) {}

  /** Pieces of work running now and waiting: for tests and metrics. */
  get load() {
    return { running: this.running, waiting: this.waitingCount };
  }

  submit<T>(client: string, deadline: number, work: (signal: AbortSignal) => Promise<T>): Promise<Outcome<T>> {
    if (!this.makeRoom(client)) return Promise.resolve({ full: true });
    return new Promise<Outcome<T>>((resolve, reject) => {
      const job: Job = {
        client,
        work,
        abort: new AbortController(),
        settle: (outcome) => {
          if (job.settled) return;
          job.settled = true;
          clearTimeout(job.timer);
          resolve(outcome as Outcome<T>);
        },
        fail: (err) => {
          if (job.settled) return;
          job.settled = true;
          clearTimeout(job.timer);
          reject(err);
        },
        timer: setTimeout(() => this.expire(job), Math.max(0, deadline - Date.now())),
        started: false,
        settled: false,
      };
      const line = this.waiting.get(client);
      if (line) line.push(job);
      else this.waiting.set(client, [job]);
      this.waitingCount++;
      this.pump();
    });
  }

  /** Whether `client` may queue one more piece of work, bumping another client's newest if the
   * queue is full and that client's line is longer than this one's will be. */
  private makeRoom(client: string): boolean {
    const own = this.waiting.get(client)?.length ?? 0;
    if (own >= this.opts.perClient) return false;
    if (this.waitingCount < this.opts.maxWaiting) return true;
    let longest: Job[] | undefined;
    for (const line of this.waiting.values()) if (!longest || line.length > longest.length) longest = line;
    if (!longest || longest.length <= own + 1) return false;
    const bumped = longest.pop()!;
    this.waitingCount--;
    bumped.settle({ full: true });
    return true;
  }

  private expire(job: Job) {
    if (job.started) {
      job.abort.abort();
    } else {
      const line = this.waiting.get(job.client);
      const at = line?.indexOf(job) ?? -1;
      if (line && at >= 0) {
        line.splice(at, 1);
        this.waitingCount--;
        if (line.length === 0) this.waiting.delete(job.client);
      }
    }
    job.settle({ timedOut: true });
  }

  /** The next job: the first client in line gives one and goes to the back of the line. */
  private next(): Job | undefined {
    for (const [client, line] of this.waiting) {
      const job = line.shift();
      this.waiting.delete(client);
      if (line.length > 0) this.waiting.set(client, line);
      if (job) {
        this.waitingCount--;
        return job;
      }
    }
    return undefined;
  }

  private pump() {
    while (this.running < this.opts.slots) {
      const job = this.next();
      if (!job) return;
      job.started = true;
      this.running++;
      let work: Promise<unknown>;
      try {
        work = job.work(job.abort.signal);
      } catch (err) {
        work = Promise.reject(err);
      }
      work.then(
        (done) => job.settle({ done }),
        (err) => job.fail(err),
      ).finally(() => {
        this.running--;
        this.pump();
      });
    }
  }
}
