/**
 * argon2id hashing and verifying, a bounded number at once per gateway (DESIGN.md D12, D24).
 *
 * Each argon2id run takes about 64 MiB and a core for tens to hundreds of milliseconds. Left
 * unbounded, a burst of password requests piles up runs until memory or every request's latency
 * gives out; here at most `concurrency` run, `queue` more wait their turn in order, and any
 * further one is refused at once (503 with Retry-After) without hashing anything.
 *
 * `Bun.password` is read at each call, not captured, so a test can count the runs.
 *
 * @example
 *   const hasher = createPasswordHasher({ concurrency: 2 })
 *   const hash = await hasher.hash("correct horse")          // or PASSWORD_CHECKS_BUSY
 *   await hasher.verify("correct horse", hash)              // true
 */
import { availableParallelism } from "node:os";
import { fail } from "./error-codes.ts";

export interface PasswordHasher {
  hash(password: string): Promise<string>;
  verify(password: string, hash: string): Promise<boolean>;
}

/** Waiting runs allowed per run slot: a queue a few runs deep, so a short burst waits rather than fails. */
const QUEUE_PER_SLOT = 8;

/** `concurrency` 0 (the setting's default) = one run per core. */
export function createPasswordHasher(opts: { concurrency: number; queue?: number }): PasswordHasher {
  const slots = opts.concurrency > 0 ? opts.concurrency : availableParallelism();
  const queueMax = opts.queue ?? slots * QUEUE_PER_SLOT;
  let running = 0;
  const waiting: (() => void)[] = [];

  async function run<T>(work: () => Promise<T>): Promise<T> {
    if (running >= slots) {
      if (waiting.length >= queueMax) throw fail("PASSWORD_CHECKS_BUSY", undefined, { "Retry-After": "1" });
      // The slot is handed over by the run that ends, so `running` never dips and lets a newcomer jump the queue.
      await new Promise<void>((resolve) => waiting.push(resolve));
    } else {
      running++;
    }
    try {
      return await work();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  }

  return {
    hash: (password) => run(() => Bun.password.hash(password, { algorithm: "argon2id" })),
    verify: (password, hash) => run(() => Bun.password.verify(password, hash)),
  };
}
