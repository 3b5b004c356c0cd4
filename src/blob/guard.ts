/**
 * Who may delete a blob, and when (D15). A blob (a `dfs` chunk, an `ipfs` block) is shared by every
 * file whose content contains it, so deleting one must never race an upload that has just found it
 * present and counts on it. Age proves nothing (an upload can find a blob written a year ago), so
 * the decision is made in the database, with the same code for local files and S3:
 *
 * - An upload takes a `Lease` and pins each key BEFORE it checks whether the blob exists; the lease
 *   renews its pins while the upload runs and drops them once its rows reference the blobs.
 * - A deleter decides in one transaction: nothing references the key (the back-end's rows say),
 *   no live pin holds it; it writes a tombstone in that same transaction, then sends the DELETE,
 *   then drops the tombstone. That transaction is the gateway's next pin transaction (an upload's,
 *   which pins first), or one of its own when none comes soon; deletions asked for meanwhile are
 *   decided together, and the tombstones dropped in a later such transaction: under a stream of
 *   uploads, deletions cost no commit of their own.
 * - An upload that meets a tombstone waits until it is gone (finishing it itself when its deleter
 *   died), then looks again, and writes the blob when it is missing. Its pin's transaction reads
 *   the tombstones of the keys it pins: a key without one needs no second look (`clearOf`).
 *
 * Either the deleter's transaction came first (the upload then sees the tombstone or the missing
 * blob) or the pin did (the deleter sees it and keeps the blob): no interleaving loses data. With
 * many gateways on PostgreSQL (D16) that order comes from SERIALIZABLE transactions on both sides
 * (see pinKeys); reference counts change only by relative updates, in the back-ends' own rows.
 *
 * @example
 *   const lease = guard.lease()
 *   await lease.pin([key])                    // before looking
 *   await guard.ensure(key, () => bytes, size, { lease })   // waits out a deletion, writes if missing
 *   await commitRows(); await lease.release() // the rows keep it now
 *   await guard.deleteIfUnused(key, (tx) => isReferenced(tx, key))
 */
import { randomBytes } from "node:crypto";
import { batches, placeholders, type Queryable, type Sql, together } from "../db/sql.ts";
import type { Logger } from "../log.ts";
import type { BlobBatch, BlobSource, BlobStore } from "./store.ts";

/** How long a pin or tombstone outlives its last renewal: a dead gateway's claims lapse after this. */
export const LEASE_MS = 60_000;
const RENEW_EVERY_MS = 10_000;
/** How often an upload waiting on a tombstone looks again. */
const TOMBSTONE_POLL_MS = 25;

/** Pins the keys and answers, per key, whether a tombstone names it: in the pin's own statement
 * (both databases read the tombstones in the transaction's snapshot, as a SELECT after it would). */
const PIN = (n: number) =>
  `INSERT INTO blob_pins (key, holder, expires_at) VALUES ${Array.from({ length: n }, (_, i) => `($${3 + i}, $1, $2)`).join(", ")}
   ON CONFLICT (key, holder) DO UPDATE SET expires_at = excluded.expires_at
   RETURNING key, EXISTS (SELECT 1 FROM blob_tombstones WHERE blob_tombstones.key = blob_pins.key) AS stoned`;
const RENEW = "UPDATE blob_pins SET expires_at = $2 WHERE holder = $1";
const UNPIN = "DELETE FROM blob_pins WHERE holder = $1";
const TOMBSTONE_OF = "SELECT holder, expires_at AS \"expiresAt\" FROM blob_tombstones WHERE key = $1";
/** The key of a pin that holds every blob (holdDeletions): no blob key can be `*` (checkKey). */
export const HOLD_ALL = "*";
/** Those of n keys a live pin holds, and `*` when one holds every key. */
const LIVE_PINS_AMONG = (n: number) => `SELECT DISTINCT key FROM blob_pins WHERE key IN ('${HOLD_ALL}', ${placeholders(n, 2)}) AND expires_at > $1`;
/** Tombstones of n keys for one holder; answers the keys no other deleter had. */
const TOMBSTONES = (n: number) =>
  `INSERT INTO blob_tombstones (key, holder, expires_at) VALUES ${Array.from({ length: n }, (_, i) => `($${3 + i}, $1, $2)`).join(", ")} ON CONFLICT (key) DO NOTHING RETURNING key`;
const DROP_TOMBSTONE = "DELETE FROM blob_tombstones WHERE key = $1 AND holder = $2";
/** A holder's tombstones of n keys. */
const DROP_TOMBSTONES = (n: number) => `DELETE FROM blob_tombstones WHERE holder = $1 AND key IN (${placeholders(n, 2)})`;
/** Takes over a deletion whose deleter died: exactly one of several claimants gets the row. */
const TAKE_OVER = "UPDATE blob_tombstones SET holder = $3, expires_at = $4 WHERE key = $1 AND holder = $2 AND expires_at <= $5";
const STALE_TOMBSTONES = "SELECT key, holder FROM blob_tombstones WHERE expires_at <= $1";
const DROP_EXPIRED_PINS = "DELETE FROM blob_pins WHERE expires_at <= $1";
/** Byte order on both (a blob key's prefix), not LIKE, which differs in case between the two. */
const PINNED_UNDER = "SELECT COUNT(DISTINCT key) AS n FROM blob_pins WHERE substr(key, 1, length($1)) = $1 AND expires_at > $2";

export interface Lease {
  readonly holder: string;
  /**
   * Claims keys (idempotent); await it before looking whether they exist. `alongside` runs in the
   * pin's transaction, statements only (PostgreSQL may run it again), and its answer is returned:
   * a back-end's look at its own rows (dfs: whether a row references the chunk) that then costs no
   * round trip of its own. Without fresh keys it runs by itself.
   */
  pin(keys: readonly string[]): Promise<void>;
  pin<T>(keys: readonly string[], alongside: (q: Queryable) => Promise<T>): Promise<T>;
  /**
   * Whether this lease pinned `key` and its pin's transaction found no deletion of it in
   * progress. None can begin while the pin holds (a deleter's decision reads the pins, pinKeys),
   * so `ensure` need not look for one again: one statement less per blob.
   */
  clearOf(key: string): boolean;
  /**
   * Drops this lease's pins in the caller's transaction, the one that writes the rows referencing
   * its keys (an upload's file row's): pins and rows then change in one commit. Once it
   * committed, `release({ unpinned: true })`; if it rolled back, `release()`.
   */
  unpinIn(tx: Queryable): Promise<void>;
  /** Drops this lease's pins: the referencing rows have committed, or the upload gave up.
   * `unpinned`: `unpinIn`'s transaction committed, so only the renewals stop. */
  release(opts?: { unpinned?: boolean }): Promise<void>;
}

export interface BlobGuard {
  readonly store: BlobStore;
  lease(): Lease;
  /** Makes sure the blob exists, writing `source()` when it does not; the caller holds a pin on
   * `key`. Answers whether it wrote. `size` (when known) must match an existing blob's.
   * `unseen`: the caller's rows do not name the key, so the blob is most likely missing: it is
   * written without asking the store first (a content-addressed key holds the same bytes
   * whoever writes them, so writing it again changes nothing a reader sees) — one request
   * instead of a HEAD and a PUT. A deletion in progress is waited out first either way.
   * `batch`: the write goes through it (durable once the caller's `batch.sync()` resolves).
   * `lease`: the caller's, which pinned `key`; no deletion is waited for when its pin found none. */
  ensure(key: string, source: () => BlobSource, size?: number, opts?: { unseen?: boolean; batch?: BlobBatch; lease?: Pick<Lease, "clearOf"> }): Promise<boolean>;
  /** Waits out a deletion in progress; then whether the blob exists (its size, or undefined). */
  present(key: string): Promise<number | undefined>;
  /** Deletes the blob when nothing references it and no live pin holds it; true if it did.
   * `isReferenced` runs inside the deciding transaction: statements only (it may run again).
   * `ride`: nobody waits for the answer (a replaced content's blobs, after the upload answered),
   * so the decision waits for this gateway's next pin transaction to ride in (RIDE_WAIT_MS);
   * without it the decision is made at once, with the deletions asked for at the same time. */
  deleteIfUnused(key: string, isReferenced: (tx: Queryable) => Promise<boolean>, opts?: { ride?: boolean }): Promise<boolean>;
  /** Finishes deletions whose deleter died; returns how many. */
  finishStaleTombstones(): Promise<number>;
  /** Drops expired pins (they no longer count either way; this only keeps the table small). */
  dropExpiredPins(): Promise<number>;
  /** How many keys under `prefix` some live lease pins now (health). */
  pinnedUnder(prefix: string): Promise<number>;
  /** Stops renewing every open lease: the gateway is stopping, and its database may close next.
   * Their pins lapse after LEASE_MS, as a dead gateway's do; new leases are refused. Resolves once
   * the deletions asked for are decided and done (those waiting for a pin transaction run now). */
  close(): Promise<void>;
}

/** `rideWaitMs`: the longest a deletion waits for a pin to ride in (RIDE_WAIT_MS; tests shorten it). */
export function createBlobGuard({ sql, store, log, now = Date.now, rideWaitMs = RIDE_WAIT_MS }: { sql: Sql; store: BlobStore; log: Logger; now?: () => number; rideWaitMs?: number }): BlobGuard {
  const gateway = randomBytes(6).toString("hex");
  let seq = 0;
  /** The renewal timers of open leases: close() stops them all, so none runs on a closed database
   * (a caller that never settles an upload would otherwise keep one forever). */
  const renewals = new Set<ReturnType<typeof setInterval>>();
  let closed = false;

  /**
   * Deletions, several at once, and at no commit of their own while uploads keep coming. A
   * decision — no row references the key (`isReferenced`), no live pin holds it, no other
   * deleter's tombstone is there; then the tombstones of the keys it won — runs in the next pin
   * transaction this gateway makes (an upload's, see pinKeys: SERIALIZABLE too, and after that
   * upload's own pins), or by itself when none comes soon (RIDE_WAIT_MS). It takes up to
   * DECIDE_BATCH keys; deletions asked for meanwhile go in the next. Once its transaction
   * committed, the DELETEs go, then the tombstones of those that went are dropped: in the next
   * pin transaction or decision too (an upload meeting one of those tombstones waits that much
   * longer), or at once after a decision that ran by itself with nothing else waiting. Answers,
   * per call, whether it deleted its key (one call per key: another call for the same key in
   * the batch is answered no), or the DELETE's failure (its tombstone stays: a later pass
   * finishes it, as after a crash).
   */
  let asked: Ask[] = [];
  /** Tombstones whose DELETE went, per deciding holder: dropped by the next transaction that takes them. */
  let toDrop: Drop[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  /** Whether decisions are running by themselves (`alone`); asks meanwhile join its next one. */
  let deciding = false;
  /** Deletion work under way (a decision, its DELETEs, a drop): close() waits for it. */
  const working = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>) => {
    const settled = work.then(
      () => undefined,
      (e) => log.error("blob: deletion work failed", { err: String(e) }),
    );
    working.add(settled);
    void settled.finally(() => working.delete(settled));
  };

  /** When this gateway last began a pin transaction, and the usual time between two (a moving
   * average, each gap counted up to rideWaitMs). */
  let lastPinAt = Number.NEGATIVE_INFINITY;
  let pinGap = rideWaitMs;
  const pinning = () => {
    const t = performance.now();
    pinGap += (Math.min(t - lastPinAt, rideWaitMs) - pinGap) / 8;
    lastPinAt = t;
  };
  /** How long what is asked now waits for the next pin transaction (see RIDE_WAIT_MS). */
  const rideWait = () => (closed || performance.now() - lastPinAt > rideWaitMs ? 0 : Math.min(rideWaitMs, 4 * pinGap));

  const arm = () => {
    if (timer || (asked.length === 0 && toDrop.length === 0)) return;
    timer = setTimeout(() => {
      timer = undefined;
      track(alone());
    }, rideWait());
  };

  /** Decides what waits now, riders included: someone waits for the answer. */
  const decideNow = () => {
    if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    track(alone());
  };

  /** What the next transaction carries: the asks of one batch and every tombstone to drop. */
  const take = (): Rider | undefined => {
    if (asked.length === 0 && toDrop.length === 0) return undefined;
    const asks = asked.slice(0, DECIDE_BATCH);
    asked = asked.slice(asks.length);
    const drops = toDrop;
    toDrop = [];
    if (asked.length === 0 && timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    return rider(`${gateway}-del-${++seq}`, asks, drops, now);
  };

  const dropAlone = async (drops: readonly Drop[]) => {
    if (drops.length === 0) return;
    const statements = drops.reduce((n, d) => n + Math.ceil(d.keys.length / DECIDE_BATCH), 0);
    try {
      // One commit either way: a transaction only when there are several statements.
      await (statements === 1 ? dropIn(sql, drops) : sql.tx((tx) => dropIn(tx, drops), { isolation: "read committed" }));
    } catch (e) {
      log.warn("blob: dropping tombstones failed; a later pass finishes them", { keys: drops.reduce((n, d) => n + d.keys.length, 0), err: String(e) });
    }
  };

  /** Runs the waiting decisions by themselves, one batch after another, until none waits. */
  async function alone(): Promise<void> {
    if (deciding) return; // the running loop takes what waits
    deciding = true;
    try {
      await Promise.resolve(); // the deletions asked for in this tick join the first decision
      for (let r = take(); r; r = take()) await decideAlone(r);
    } finally {
      deciding = false;
      arm(); // tombstones a riding decision handed on meanwhile
    }
  }

  /** One rider in a transaction of its own; its failure is its asks' (its drops go by themselves). */
  async function decideAlone(r: Rider): Promise<void> {
    if (r.asks.length === 0) return dropAlone(r.drops);
    let won: Set<string>;
    try {
      won = await sql.tx(async (tx) => (await together(dropIn(tx, r.drops), r.decideIn(tx)))[1]);
    } catch (err) {
      await dropAlone(r.drops);
      for (const a of r.asks) a.reject(err);
      return;
    }
    await act(r, won, false);
  }

  /**
   * After a decision committed: the DELETEs of the keys it won, then their tombstones go with the
   * next transaction that takes them (`rode`, or when more asks wait) or at once.
   */
  async function act(r: Rider, won: Set<string>, rode: boolean): Promise<void> {
    const mine = r.asks.map((a) => won.delete(a.key));
    const keys = r.asks.filter((_, i) => mine[i]).map((a) => a.key);
    const failed = new Map<string, Error>();
    if (keys.length > 0) {
      // Others finish a tombstone only after LEASE_MS; a deleter that was held up past half of it
      // leaves the DELETE to them rather than racing an upload that has finished it and written
      // the blob again.
      if (now() > r.decidedAt() + LEASE_MS / 2) {
        log.warn("blob: deletion decided too long ago, left to a later pass", { keys: keys.length });
        for (const a of r.asks) a.resolve(false);
        return;
      }
      await deleteEach(keys, async (key) => (await store.delete(key), true), (key, err) => failed.set(key, err instanceof Error ? err : new Error(String(err))), DELETE_CONCURRENCY);
      const gone = keys.filter((k) => !failed.has(k));
      if (gone.length > 0) toDrop.push({ holder: r.holder, keys: gone });
      if (!rode && asked.length === 0) await dropAlone(toDrop.splice(0));
      else arm();
    }
    r.asks.forEach((a, i) => a.resolve(mine[i] ? (failed.get(a.key) ?? true) : false));
  }

  /** DELETE, then the tombstone: a crash in between leaves a tombstone someone finishes later. */
  async function finish(key: string, holder: string) {
    await store.delete(key);
    await sql.run(DROP_TOMBSTONE, [key, holder]);
  }

  /** Finishes a dead deleter's decision unless another gateway took it over first. */
  async function takeOver(key: string, holder: string): Promise<boolean> {
    const mine = `${gateway}-fin-${++seq}`;
    if ((await sql.run(TAKE_OVER, [key, holder, mine, now() + LEASE_MS, now()])) === 0) return false;
    await finish(key, mine);
    return true;
  }

  /** Waits until no deletion of `key` is in progress (finishing one whose deleter died). */
  async function settled(key: string): Promise<void> {
    for (;;) {
      const stone = await sql.get<{ holder: string; expiresAt: number }>(TOMBSTONE_OF, [key]);
      if (!stone) break;
      // The deleter died between its decision and its DELETE: the decision stands, finish it.
      if (stone.expiresAt <= now()) {
        log.warn("blob: finishing a deletion its deleter left", { key });
        await takeOver(key, stone.holder);
      } else await Bun.sleep(TOMBSTONE_POLL_MS);
    }
  }

  async function present(key: string): Promise<number | undefined> {
    await settled(key);
    return store.stat(key);
  }

  return {
    store,
    lease() {
      const holder = `${gateway}-${++seq}`;
      /** Pinned keys → whether their pin's transaction found no tombstone (`clearOf`). */
      const pinned = new Map<string, boolean>();
      /** Pins being written: release() waits for them, so none lands after the pins are dropped. */
      const writing = new Set<Promise<unknown>>();
      if (closed) throw new Error("blob guard closed: the gateway is stopping");
      let released = false;
      const renew = async () => {
        try {
          await sql.run(RENEW, [holder, now() + LEASE_MS]);
        } catch (e) {
          log.warn("blob: renewing pins failed", { holder, error: String(e) });
        }
      };
      const timer = setInterval(renew, RENEW_EVERY_MS);
      timer.unref();
      renewals.add(timer);
      return {
        holder,
        async pin<T>(list: readonly string[], alongside?: (q: Queryable) => Promise<T>) {
          if (released) throw new Error("blob lease already released");
          const fresh = [...new Set(list)].filter((k) => !pinned.has(k));
          if (fresh.length === 0) return alongside?.(sql);
          // The deletions waiting to be decided ride along (see `asked`). Should their part
          // fail, the whole transaction does: the pin goes again without them, and they are
          // decided by themselves, so a deletion never fails an upload.
          pinning();
          const carried = take();
          const attempt = async () => {
            try {
              return await pinKeys(sql, holder, fresh, now() + LEASE_MS, alongside, carried);
            } catch (err) {
              if (!carried) throw err;
              log.warn("blob: a pin carrying deletions failed; pinning again without them", { err: String(err) });
              track(decideAlone(carried));
              return pinKeys(sql, holder, fresh, now() + LEASE_MS, alongside);
            }
          };
          const write = attempt();
          writing.add(write);
          let pinnedNow: Awaited<typeof write>;
          try {
            pinnedNow = await write;
          } finally {
            writing.delete(write);
          }
          for (const k of fresh) pinned.set(k, !pinnedNow.stoned.has(k));
          // The DELETEs are the deleters' wait, not the upload's.
          if (carried && pinnedNow.won) track(act(carried, pinnedNow.won, true));
          return pinnedNow.answer;
        },
        clearOf: (key) => pinned.get(key) === true,
        async unpinIn(tx) {
          // Sent at once when no pin is being written (the usual case): it then goes out with
          // the statements its caller sends next, in their round trip.
          if (writing.size > 0) await Promise.allSettled([...writing]);
          await tx.run(UNPIN, [holder]);
        },
        async release(opts) {
          if (released) return;
          released = true;
          clearInterval(timer);
          renewals.delete(timer);
          await Promise.allSettled([...writing]);
          // No fsync of its own (sql.ts durable): a power cut that loses it leaves pins that lapse
          // after LEASE_MS, which only delays a deletion.
          if (!opts?.unpinned) await sql.tx((tx) => tx.run(UNPIN, [holder]), { isolation: "read committed", durable: false });
          pinned.clear();
        },
      };
    },

    present,

    async ensure(key, source, size, opts) {
      const write = async () => {
        const bytes = source();
        if (opts?.batch && bytes instanceof Uint8Array) await opts.batch.put(key, bytes);
        else await store.put(key, bytes);
      };
      const clear = opts?.lease?.clearOf(key) === true;
      if (opts?.unseen) {
        if (!clear) await settled(key);
        await write();
        return true;
      }
      const found = clear ? await store.stat(key) : await present(key);
      if (found !== undefined && (size === undefined || found === size)) return false;
      await write();
      return true;
    },

    async deleteIfUnused(key, isReferenced, opts) {
      const outcome = await new Promise<boolean | Error>((resolve, reject) => {
        asked.push({ key, isReferenced, resolve, reject });
        if (opts?.ride) arm();
        else decideNow();
      });
      if (outcome instanceof Error) throw outcome;
      return outcome;
    },

    async finishStaleTombstones() {
      let finished = 0;
      for (const stone of await sql.all<{ key: string; holder: string }>(STALE_TOMBSTONES, [now()])) {
        if (await takeOver(stone.key, stone.holder)) finished++;
      }
      return finished;
    },

    dropExpiredPins() {
      return sql.run(DROP_EXPIRED_PINS, [now()]);
    },

    async pinnedUnder(prefix) {
      return (await sql.get<{ n: number }>(PINNED_UNDER, [prefix, now()]))?.n ?? 0;
    },

    async close() {
      closed = true;
      for (const timer of renewals) clearInterval(timer);
      renewals.clear();
      // What waits for a pin transaction now runs by itself, before the database closes.
      if (timer) {
        clearTimeout(timer);
        timer = undefined;
        track(alone());
      }
      while (working.size > 0) await Promise.allSettled([...working]);
    },
  };
}

/**
 * Writes pins and, in the same transaction, reads the tombstones of the same keys. On SQLite
 * writing transactions run one at a time, so a deleter's decision is wholly before or after the
 * pin. On PostgreSQL the two run SERIALIZABLE and each reads what the other writes (the decision
 * reads pins and writes a tombstone; this writes pins and reads tombstones): if they overlap,
 * PostgreSQL aborts one of them and `sql.tx` runs it again, so either the deleter sees the pin, or
 * the pin's transaction comes after the tombstone, which the upload then meets and waits out.
 * Without the read here the two would not conflict, and an upload could find the blob present
 * just before a deleter that had missed its pin deleted it. Answers the keys whose deletion is in
 * progress (a tombstone): for the others no deletion can begin while the pin holds. `alongside`
 * (Lease.pin) rides in the first batch's round trip; its answer comes back with them.
 *
 * `carried`: deletions waiting to be decided (see the guard's `asked`), decided here too. Its
 * tombstones to drop go first, so this pin does not meet them; its decision's reads go after
 * every pin of this transaction, so it sees them and never decides to delete a key this upload
 * pins. A retried transaction runs both again. Answers the keys its decision won (`won`).
 */
function pinKeys<T>(
  sql: Sql,
  holder: string,
  keys: readonly string[],
  expiresAt: number,
  alongside?: (q: Queryable) => Promise<T>,
  carried?: Rider,
): Promise<{ stoned: ReadonlySet<string>; answer: T | undefined; won?: Set<string> }> {
  return sql.tx(
    async (tx) => {
      const stoned = new Set<string>(); // per attempt: a retried transaction reads again
      let answer: T | undefined;
      let won: Set<string> | undefined;
      const parts = [...batches(keys)];
      // Each batch's statements in one round trip on PostgreSQL; the carried decision's first
      // reads in the last batch's, its tombstones' write one more.
      for (const [i, part] of parts.entries()) {
        const first = i === 0;
        const last = i === parts.length - 1;
        const [, found, extra, decided] = await together(
          first && carried ? dropIn(tx, carried.drops) : undefined,
          tx.all<{ key: string; stoned: boolean | number }>(PIN(part.length), [holder, expiresAt, ...part]),
          first ? alongside?.(tx) : undefined,
          last ? carried?.decideIn(tx) : undefined,
        );
        for (const { key, stoned: s } of found) if (s) stoned.add(key); // 0/1 on SQLite
        if (first) answer = extra;
        if (last) won = decided;
      }
      return { stoned, answer, won };
    },
    // A pin matters only while its upload runs; a power cut that loses it ends the upload too,
    // and the referencing rows commit durably (fsyncing the pins before them, in log order). So
    // do the carried decision's tombstones and drops: the log keeps a prefix, so a power cut that
    // loses one loses every later commit too, and the rows that named the blobs were gone before.
    { durable: false },
  );
}

/** Items per batch: each is a few parameters of one statement (sql.ts BATCH bounds them). */
const DECIDE_BATCH = 200;

/**
 * The longest a deletion waits for a pin transaction to ride in before it is decided by itself.
 * It waits four times the usual time between this gateway's pin transactions (a longer gap comes
 * about once in 50 when uploads arrive at random): under a stream of uploads faster than 16/s
 * (one client's or many) the next pin nearly always comes first and the decision costs no commit;
 * at slower rates more run by themselves, and the commits saved matter less. On a gateway no pin
 * came to for this long (an idle one) it does not wait at all. Only deletions nobody waits for
 * ride (`deleteIfUnused`'s `ride`: a replaced content's blobs, after the upload answered); a
 * request that waits for its deletions (a DELETE, a refused upload's leftovers, a sweep) has
 * them decided at once. A wait is short next to what sees it: nobody reads a blob whose rows are
 * gone, a decision has LEASE_MS / 2 to be acted on, and an upload of content whose tombstone has
 * yet to be dropped waits it out.
 */
export const RIDE_WAIT_MS = 250;

/** A deletion asked for: answered with whether it deleted the key, or the DELETE's failure. */
interface Ask {
  key: string;
  isReferenced: (tx: Queryable) => Promise<boolean>;
  resolve: (outcome: boolean | Error) => void;
  reject: (err: unknown) => void;
}
/** A deleter's tombstones whose DELETE went. */
interface Drop {
  holder: string;
  keys: readonly string[];
}

/** What one transaction decides and drops (a pin's, or one of its own): see the guard's `asked`. */
interface Rider {
  readonly holder: string;
  readonly asks: readonly Ask[];
  readonly drops: readonly Drop[];
  /** Decides, statements only (a retried transaction runs it again); answers the keys it won. */
  decideIn(tx: Queryable): Promise<Set<string>>;
  /** When the last attempt decided. */
  decidedAt(): number;
}

function rider(holder: string, asks: readonly Ask[], drops: readonly Drop[], now: () => number): Rider {
  let at = 0;
  return {
    holder,
    asks,
    drops,
    decidedAt: () => at,
    async decideIn(tx) {
      at = now();
      if (asks.length === 0) return new Set();
      const keys = [...new Set(asks.map((a) => a.key))];
      // Whether rows reference them and whether pins hold them, in one round trip on PostgreSQL.
      const [referenced, pins] = await together(together(...asks.map((a) => a.isReferenced(tx))), tx.all<{ key: string }>(LIVE_PINS_AMONG(keys.length), [at, ...keys]));
      const pinned = new Set(pins.map((r) => r.key));
      if (pinned.has(HOLD_ALL)) return new Set();
      const free = [...new Set(asks.filter((a, i) => !referenced[i] && !pinned.has(a.key)).map((a) => a.key))];
      if (free.length === 0) return new Set();
      // A tombstone already there means another deleter is on it.
      return new Set((await tx.all<{ key: string }>(TOMBSTONES(free.length), [holder, at + LEASE_MS, ...free])).map((r) => r.key));
    },
  };
}

/** Drops deleters' tombstones (their DELETEs went), the statements side by side. */
async function dropIn(q: Queryable, drops: readonly Drop[]): Promise<void> {
  await together(...drops.flatMap(({ holder, keys }) => [...batches(keys, DECIDE_BATCH)].map((part) => q.run(DROP_TOMBSTONES(part.length), [holder, ...part]))));
}

/** DELETEs in flight at once: each is a round trip to S3 (a few ms), so one at a time would
 * make releasing a 10 GiB file take a minute. */
const DELETE_CONCURRENCY = 8;

/**
 * Runs `deleteOne` (a `deleteIfUnused` with the back-end's reference check) over `items`,
 * `concurrency` at a time; returns how many it deleted. A failure goes to `failed` and the rest go
 * on: the rows are gone already, so the next sweep finds the object and tries again. By default
 * a decision's worth at once: the calls of one tick are decided together (riding ones up to
 * RIDE_WAIT_MS later), and the guard bounds the DELETEs in flight itself.
 */
export async function deleteEach<T>(items: Iterable<T>, deleteOne: (item: T) => Promise<boolean>, failed: (item: T, err: unknown) => void, concurrency = DECIDE_BATCH): Promise<number> {
  const todo = [...items];
  let next = 0;
  let deleted = 0;
  const worker = async () => {
    while (next < todo.length) {
      const item = todo[next++] as T;
      try {
        if (await deleteOne(item)) deleted++;
      } catch (err) {
        failed(item, err);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, todo.length) }, worker));
  return deleted;
}

/**
 * Holds every deletion of blobs while a backup copies them (D26): one pin on HOLD_ALL, which every
 * deleter's decision reads beside the key's own pins. A deletion decided before the hold committed
 * goes on; none is decided after it until `release()`, or LEASE_MS after the last renewal if the
 * holder dies. So a snapshot of the database taken once this resolves names only blobs that stay
 * until the hold ends: an upload that met a deletion in progress writes its blob again before its
 * rows commit (D15). Deletions refused meanwhile are left to the next sweep.
 */
export async function holdDeletions(sql: Sql, holder: string, now: () => number = Date.now): Promise<{ release(): Promise<void> }> {
  const hold = () => sql.run(PIN(1), [holder, now() + LEASE_MS, HOLD_ALL]);
  await hold();
  const timer = setInterval(() => void hold().catch(() => {}), RENEW_EVERY_MS);
  timer.unref();
  return {
    async release() {
      clearInterval(timer);
      await sql.run(UNPIN, [holder]);
    },
  };
}

/** Drops every pin. Only for a copy of the database that no process uses yet (a backup's): pins
 * are claims of running processes, which the copy's processes are not. */
export function clearPins(q: Queryable): Promise<number> {
  return q.run("DELETE FROM blob_pins");
}
