/**
 * Cluster singletons (DESIGN.md D16): work that must run on one gateway at a time (the chain
 * indexer, the blob sweeps, gc) runs only while its process holds the `leases` row of that name.
 * Why a lease and not a lock held by a connection: a lease outlives no one — a gateway that dies
 * (kill -9, a partition) simply stops renewing, and another takes over once the row expires, with
 * no session or advisory-lock state to clean up, the same on SQLite and PostgreSQL.
 *
 * - `acquire` is one statement: take the row if it is free or expired, renew it if it is ours.
 *   `epoch` grows at every change of holder, so it names one holder's term.
 * - Fencing: a holder that lost its lease without noticing (a pause, a partition) may still try
 *   to write. A write that must not outlive the term adds `fenceCondition` (the lease row still
 *   has this holder and epoch) to its own statement, in a SERIALIZABLE transaction or as one
 *   statement, and treats "no row changed" as `LeaseLostError`.
 * - `singleton(sql, name, holder, run)` renews every `renewMs` (3 s) with a `ttlMs` (8 s)
 *   lifetime and runs `run` while it holds; a waiting gateway tries again at the moment the
 *   current lease expires, so it takes over at most `ttlMs` after the holder's last renewal,
 *   that is within 10 s of its death.
 *
 * A run whose work leaves the database (deleting blobs, say) checks `held()` before each step:
 * the fence protects only the writes that carry it, and a run learns of a lost lease at the next
 * renewal at the latest.
 *
 * Times are the gateways' own clocks (epoch ms), so they must agree to well within `ttlMs` (NTP).
 * Tests inject `now` and drive `tick()` by hand instead of sleeping.
 *
 * @example
 *   const sweeps = singleton(sql, "dfs-sweep", gatewayId, async ({ lease, signal }) => {
 *     while (!signal.aborted) { await sweepOnce(lease); await sleep(60_000, signal) }
 *   }, { log })
 *   sweeps.start()
 *   // … at shutdown:
 *   await sweeps.stop() // ends the run, then releases the row so another gateway takes over now
 */
import type { Logger } from "../log.ts";
import type { Param, Queryable } from "./sql.ts";

/** One holder's term: its epoch stays the same for as long as it keeps renewing. */
export interface Lease {
  name: string;
  holder: string;
  epoch: number;
  /** When the row expires unless renewed (epoch ms). */
  expiresAt: number;
}

/** The lease lapses 8 s after its last renewal, so "another gateway takes over within 10 s of a
 * death" (D16) holds with the new holder's first pass included (an indexer poll, a sweep start). */
export const LEASE_DEFAULTS = { ttlMs: 8_000, renewMs: 3_000 } as const;

/** A fenced write found that its lease is no longer this holder's term. */
export class LeaseLostError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LeaseLostError";
  }
  static of(lease: Pick<Lease, "name" | "holder" | "epoch">) {
    return new LeaseLostError(`lease "${lease.name}" is no longer held by ${lease.holder} at epoch ${lease.epoch}`);
  }
}

// The epoch changes only with the holder: a holder renewing (even after its own row expired, when
// nobody took over meanwhile) keeps its term. `leases.x` in DO UPDATE is the row as it was.
const ACQUIRE = `INSERT INTO leases (name, holder, epoch, expires_at) VALUES ($1, $2, 1, $3)
  ON CONFLICT (name) DO UPDATE SET
    epoch = CASE WHEN leases.holder = excluded.holder THEN leases.epoch ELSE leases.epoch + 1 END,
    holder = excluded.holder,
    expires_at = excluded.expires_at
  WHERE leases.holder = excluded.holder OR leases.expires_at <= $4
  RETURNING epoch`;
const CURRENT = `SELECT holder, epoch, expires_at AS "expiresAt" FROM leases WHERE name = $1`;
// Expired, not deleted: the epoch stays in the row, so the next holder's term is a new number.
const RELEASE = "UPDATE leases SET expires_at = 0 WHERE name = $1 AND holder = $2 AND epoch = $3";

/** Takes `name` for `holder` if it is free, expired or already `holder`'s; the lease, or undefined. */
export async function acquire(q: Queryable, name: string, holder: string, opts: { ttlMs?: number; now: number }): Promise<Lease | undefined> {
  const expiresAt = opts.now + (opts.ttlMs ?? LEASE_DEFAULTS.ttlMs);
  const row = await q.get<{ epoch: number }>(ACQUIRE, [name, holder, expiresAt, opts.now]);
  return row ? { name, holder, epoch: row.epoch, expiresAt } : undefined;
}

/** The row as it is now (any holder's), or undefined when nobody ever took it. */
export function currentLease(q: Queryable, name: string): Promise<Omit<Lease, "name"> | undefined> {
  return q.get<Omit<Lease, "name">>(CURRENT, [name]);
}

/** Gives the lease up at once (if still this term's), so another gateway need not wait for it to expire. */
export async function release(q: Queryable, lease: Lease): Promise<void> {
  await q.run(RELEASE, [lease.name, lease.holder, lease.epoch]);
}

/**
 * The condition a fenced write adds to its statement: true while `lease` is still the current
 * term. Its three parameters start at `$from`; bind them with `fenceParams(lease)`.
 *
 * @example
 *   `UPDATE chain_cursors SET block = $2 WHERE name = $1 AND ${fenceCondition(3)}`, [name, block, ...fenceParams(lease)]
 */
export const fenceCondition = (from: number) => `EXISTS (SELECT 1 FROM leases WHERE name = $${from} AND holder = $${from + 1} AND epoch = $${from + 2})`;
export const fenceParams = (lease: Pick<Lease, "name" | "holder" | "epoch">): Param[] => [lease.name, lease.holder, lease.epoch];

/** What `run` is given: the term it runs in, and a signal that fires when the term ends. */
export interface Term {
  lease: Lease;
  signal: AbortSignal;
}

export interface SingletonOptions {
  ttlMs?: number;
  renewMs?: number;
  /** The clock (epoch ms); tests pass their own and call `tick()`. */
  now?: () => number;
  log?: Logger;
}

export interface Singleton {
  /** Renews on a timer from now on (the first attempt at once). */
  start(): void;
  /**
   * One acquire-or-renew: starts `run` when the lease is won, ends it (and waits for it) when
   * lost. Resolves to the milliseconds until the next attempt is due.
   */
  tick(): Promise<number>;
  /** This process's lease while it holds one that has not expired by its own clock. */
  held(): Lease | undefined;
  /** Ends the run, waits for it, and releases the lease. */
  stop(): Promise<void>;
}

/**
 * Runs `run` on one gateway of the cluster at a time. `run` should return soon after
 * `term.signal` aborts (the lease was lost or the process stops); if it returns or throws by
 * itself while the lease is still held, it is started again at the next renewal.
 */
export function singleton(sql: Queryable, name: string, holder: string, run: (term: Term) => Promise<void>, opts: SingletonOptions = {}): Singleton {
  const ttlMs = opts.ttlMs ?? LEASE_DEFAULTS.ttlMs;
  const renewMs = opts.renewMs ?? LEASE_DEFAULTS.renewMs;
  const now = opts.now ?? Date.now;
  const log = opts.log;
  if (!(renewMs > 0 && renewMs < ttlMs)) throw new RangeError(`lease "${name}": renewMs must be above 0 and below ttlMs`);
  let lease: Lease | undefined;
  let term: { lease: Lease; controller: AbortController; done: Promise<void> } | undefined;
  let stopped = false;
  let timer: Timer | undefined;
  let ticks: Promise<unknown> = Promise.resolve();

  function begin(l: Lease) {
    const controller = new AbortController();
    const t = { lease: l, controller, done: Promise.resolve() };
    term = t;
    log?.info("lease taken", { lease: name, holder, epoch: l.epoch });
    t.done = (async () => {
      try {
        await run({ lease: l, signal: controller.signal });
      } catch (err) {
        log?.error("singleton run failed", { lease: name, err: (err as Error).message });
      } finally {
        if (term === t) term = undefined;
      }
    })();
  }

  async function end() {
    const t = term;
    if (!t) return;
    term = undefined;
    t.controller.abort();
    await t.done;
  }

  async function attempt(): Promise<number> {
    if (stopped) return renewMs;
    const at = now();
    let got: Lease | undefined;
    try {
      got = await acquire(sql, name, holder, { ttlMs, now: at });
    } catch (err) {
      log?.warn("lease renewal failed", { lease: name, err: (err as Error).message });
      // The database did not answer: keep working while the lease we had is still ours by the
      // clock (a fenced write fails anyway if it is not), try again soon.
      if (lease && now() < lease.expiresAt) return Math.min(renewMs, 1000);
      lease = undefined;
      await end();
      return Math.min(renewMs, 1000);
    }
    if (got) {
      lease = got; // even when stopping: stop() releases it
      if (term && term.lease.epoch !== got.epoch) await end();
      if (!term && !stopped) begin(got);
      return renewMs;
    }
    if (lease) log?.warn("lease lost", { lease: name, holder, epoch: lease.epoch });
    lease = undefined;
    await end();
    // Someone else holds it: try again when their lease runs out, if that comes first.
    const other = await currentLease(sql, name).catch(() => undefined);
    return other ? Math.max(0, Math.min(renewMs, other.expiresAt - now())) : renewMs;
  }

  function tick(): Promise<number> {
    const next = ticks.then(attempt, attempt);
    ticks = next.catch(() => {});
    return next;
  }

  function loop() {
    timer = undefined;
    void tick().then((ms) => {
      if (!stopped) timer = setTimeout(loop, ms);
    });
  }

  return {
    start() {
      if (stopped || timer) return;
      timer = setTimeout(loop, 0);
    },
    tick,
    held: () => (lease && now() < lease.expiresAt ? lease : undefined),
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await ticks;
      await end();
      const l = lease;
      lease = undefined;
      if (l) await release(sql, l).catch((err) => log?.warn("lease release failed", { lease: name, err: (err as Error).message }));
    },
  };
}

/** Resolves once `signal` aborts: for runs whose work goes on elsewhere until then. */
export function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
}

const LIVE = `SELECT name, holder FROM leases WHERE expires_at > $1 ORDER BY name`;

/** Leases some gateway holds now: every running gateway renews one (the indexer's, the sweeps'),
 * so none live means none runs (or every one died at least a lease's lifetime ago). */
export function liveLeases(q: Queryable, now: number): Promise<{ name: string; holder: string }[]> {
  return q.all(LIVE, [now]);
}
