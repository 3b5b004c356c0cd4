/**
 * The event indexer that other capabilities subscribe to. Each consumer has its own cursor in
 * the database; events are read with `getLogs` over block ranges (no filters: production RPCs drop
 * them), `confirmations` blocks behind the head. A consumer's events and its cursor commit in one
 * transaction, so a crash or restart re-reads from the cursor and applies nothing twice. The hash
 * of each processed range's last block is kept; when the chain rewinds (the hash at the cursor
 * changed), the consumer rolls back to the newest block both chains share. Failures retry with
 * backoff, forever: the indexer never stops for good.
 *
 * Many gateways (D16): the server runs the indexer only while it holds the "indexer" lease
 * (src/db/leases.ts), and with `fence` set every cursor write is a compare-and-set on that
 * lease's epoch, in the same transaction as the consumer's writes: a former holder that lost the
 * lease without noticing has its whole range refused (`LeaseLostError`). Without a fence, passes
 * still apply nothing twice (the cursor is re-read inside the transaction), they only duplicate
 * the chain reads.
 *
 * @example
 *   const indexer = createIndexer({ sql, publicClient, confirmations: 0, log, fence: () => lease.held() })
 *   indexer.add({ name: "directory", address, abi: directoryAbi, fromBlock: 0n, apply, rollback })
 *   indexer.start()
 */
import type { Abi, Address, Chain, Log, PublicClient, Transport } from "viem";
import { decodeEventLog } from "viem";
import type { Logger } from "../log.ts";
import { fenceCondition, fenceParams, LeaseLostError, type Lease } from "../db/leases.ts";
import type { Queryable, Sql } from "../db/sql.ts";

export interface IndexedEvent {
  eventName: string;
  args: Record<string, unknown>;
  blockNumber: bigint;
  logIndex: number;
  transactionHash: `0x${string}`;
  address: Address;
  /** Unix seconds of the event's block: set for consumers that ask for it (`timestamps`). */
  blockTimestamp?: bigint;
}

export interface Consumer {
  /** Cursor key: unique per consumer. */
  name: string;
  address: Address | Address[];
  abi: Abi;
  /** First block that can hold its events (the deployment block). */
  fromBlock: bigint;
  /**
   * Applies a range's events in order, inside the range's transaction. Statements only: on
   * PostgreSQL the transaction may run again after a serialization failure.
   */
  apply(tx: Queryable, events: IndexedEvent[]): Promise<void>;
  /** Undoes everything applied from blocks after `block`, inside a transaction (statements only). */
  rollback(tx: Queryable, block: bigint): Promise<void>;
  /** Its events carry their block's time (`blockTimestamp`): from the log where the node gives it,
   * else one block read per block with events, before the range's transaction. */
  timestamps?: boolean;
}

export interface IndexerOptions {
  sql: Sql;
  publicClient: PublicClient<Transport, Chain>;
  /** Blocks an event waits behind the head before it is applied. */
  confirmations: number;
  log: Logger;
  pollMs?: number;
  /** Largest block range of one getLogs call. */
  batchBlocks?: number;
  /** First retry delay; doubles per failure up to `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Block hashes kept per consumer, to find where two chains part. */
  keepBlocks?: number;
  /**
   * The lease this indexer writes under: the current term, or undefined when not held (then a
   * pass stops with LeaseLostError before reading any logs). Unset: no cluster guard (one
   * process, tests).
   */
  fence?: () => Lease | undefined;
}

interface Cursor {
  block: number;
  hash: string | null;
}

const CURSOR = "SELECT block, hash FROM chain_cursors WHERE name = $1";
const SLOWEST_CURSOR = "SELECT MIN(block) AS block FROM chain_cursors";
// Two passes over one range (two gateways without a lease, or a takeover mid-pass) meet on this
// row lock: the second waits, then (SERIALIZABLE) retries and finds the cursor moved. Without it
// both would insert the range's rows, and a unique key would fail with 23505, not a retryable 40001.
const CURSOR_LOCKED = `${CURSOR} FOR UPDATE`;
// The row must exist for the lock to hold anything; the start position is the same whoever writes it.
const START_CURSOR = "INSERT INTO chain_cursors (name, block, hash) VALUES ($1, $2, NULL) ON CONFLICT (name) DO NOTHING";
const KEPT = "SELECT number, hash FROM chain_blocks WHERE name = $1 ORDER BY number DESC";
const DROP_AFTER = "DELETE FROM chain_blocks WHERE name = $1 AND number > $2";
const DROP_BEFORE = "DELETE FROM chain_blocks WHERE name = $1 AND number < $2";
const KEEP = "INSERT INTO chain_blocks (name, number, hash) VALUES ($1, $2, $3) ON CONFLICT (name, number) DO UPDATE SET hash = excluded.hash";
const UPSERT_CURSOR = "ON CONFLICT (name) DO UPDATE SET block = excluded.block, hash = excluded.hash";
const PUT_CURSOR = `INSERT INTO chain_cursors (name, block, hash) VALUES ($1, $2, $3) ${UPSERT_CURSOR}`;
// The compare-and-set: the row is written only while the lease is still this term. The casts
// give PostgreSQL the types a VALUES list would have taken from the columns.
const PUT_CURSOR_FENCED = `INSERT INTO chain_cursors (name, block, hash)
  SELECT CAST($1 AS TEXT), CAST($2 AS BIGINT), CAST($3 AS TEXT) WHERE ${fenceCondition(4)} ${UPSERT_CURSOR}`;

type Step = "idle" | "progress" | "rewound";

export function createIndexer(opts: IndexerOptions) {
  const { sql, publicClient, log } = opts;
  const pollMs = opts.pollMs ?? 2000;
  const batchBlocks = BigInt(opts.batchBlocks ?? 2000);
  const keepBlocks = opts.keepBlocks ?? 256;
  const consumers: Consumer[] = [];
  let running = false;
  let loop: Promise<void> | undefined;
  let wake: (() => void) | undefined;
  const listeners = new Set<() => void>();

  const start = (c: Consumer): Cursor => ({ block: Number(c.fromBlock) - 1, hash: null });
  const cursorOf = async (q: Queryable, c: Consumer, text = CURSOR): Promise<Cursor> => (await q.get<Cursor>(text, [c.name])) ?? start(c);
  const started = new Set<string>();

  /** The term to write under; throws when a fenced indexer does not hold its lease. */
  function term(): Lease | undefined {
    if (!opts.fence) return undefined;
    const lease = opts.fence();
    if (!lease) throw new LeaseLostError("indexer: this process does not hold its lease");
    return lease;
  }

  /** Moves the cursor, fenced when the indexer runs under a lease. */
  async function putCursor(tx: Queryable, c: Consumer, at: Cursor, lease: Lease | undefined) {
    if (!lease) {
      await tx.run(PUT_CURSOR, [c.name, at.block, at.hash]);
      return;
    }
    // No row written: another gateway holds the lease now; the transaction rolls back whole.
    if ((await tx.run(PUT_CURSOR_FENCED, [c.name, at.block, at.hash, ...fenceParams(lease)])) === 0) throw LeaseLostError.of(lease);
  }

  /** Gives each event its block's time; the blocks the logs left without one are read once each. */
  async function stamp(events: IndexedEvent[]) {
    const times = new Map<bigint, bigint>();
    for (const e of events) {
      if (e.blockTimestamp !== undefined) continue;
      let t = times.get(e.blockNumber);
      if (t === undefined) times.set(e.blockNumber, (t = (await publicClient.getBlock({ blockNumber: e.blockNumber })).timestamp));
      e.blockTimestamp = t;
    }
  }

  const hashAt = async (n: bigint) => {
    try {
      return (await publicClient.getBlock({ blockNumber: n })).hash;
    } catch (err) {
      if ((err as Error).name === "BlockNotFoundError") return undefined;
      throw err;
    }
  };

  /** Newest kept block that is still on the chain; the consumer goes back to it. */
  async function rewind(c: Consumer, lease: Lease | undefined, seen: Cursor) {
    const kept = await sql.all<{ number: number; hash: string }>(KEPT, [c.name]);
    let ancestor: Cursor = start(c);
    for (const k of kept) {
      if ((await hashAt(BigInt(k.number))) === k.hash) {
        ancestor = { block: k.number, hash: k.hash };
        break;
      }
    }
    await sql.tx(async (tx) => {
      const now = await cursorOf(tx, c, CURSOR_LOCKED);
      if (now.block !== seen.block || now.hash !== seen.hash) return; // another pass moved it meanwhile
      await c.rollback(tx, BigInt(ancestor.block));
      await tx.run(DROP_AFTER, [c.name, ancestor.block]);
      await putCursor(tx, c, ancestor, lease);
    });
    log.warn("chain rewound: indexer rolled back", { consumer: c.name, to: ancestor.block });
  }

  async function step(c: Consumer, safe: bigint): Promise<Step> {
    const lease = term();
    if (!started.has(c.name)) {
      await sql.run(START_CURSOR, [c.name, start(c).block]);
      started.add(c.name);
    }
    const cursor = await cursorOf(sql, c);
    if (cursor.hash && (await hashAt(BigInt(cursor.block))) !== cursor.hash) {
      await rewind(c, lease, cursor);
      return "rewound";
    }
    const from = BigInt(cursor.block) + 1n;
    if (from > safe) return "idle";
    const to = from + batchBlocks - 1n < safe ? from + batchBlocks - 1n : safe;
    const before = await hashAt(to);
    const logs = await publicClient.getLogs({ address: c.address, fromBlock: from, toBlock: to });
    const after = await hashAt(to);
    // The range moved under us (a reorg during the read): read it again next round.
    if (!before || before !== after) return "progress";
    const events = decode(c, logs);
    if (c.timestamps) await stamp(events);
    await sql.tx(async (tx) => {
      // Another pass (here or on another gateway) may have applied this range while we read it:
      // apply nothing twice.
      if ((await cursorOf(tx, c, CURSOR_LOCKED)).block !== cursor.block) return;
      await c.apply(tx, events);
      const at = { block: Number(to), hash: after };
      await putCursor(tx, c, at, lease);
      await tx.run(KEEP, [c.name, at.block, after]);
      await tx.run(DROP_BEFORE, [c.name, at.block - keepBlocks]);
    });
    return "progress";
  }

  /** Brings every consumer up to the safe head; returns when all are caught up. Passes run one
   * at a time (a test's or a poke's pass waits for the loop's). */
  let pass: Promise<void> = Promise.resolve();
  function syncOnce(): Promise<void> {
    const next = pass.then(syncPass, syncPass);
    pass = next.catch(() => {});
    return next;
  }

  async function syncPass(): Promise<void> {
    const head = await publicClient.getBlockNumber({ cacheTime: 0 });
    const safe = head - BigInt(opts.confirmations);
    for (const c of consumers) {
      while ((await step(c, safe)) !== "idle") {
        if (!running && loop) return;
      }
    }
    for (const l of listeners) l();
  }

  async function run() {
    let failures = 0;
    while (running) {
      try {
        await syncOnce();
        failures = 0;
        await pause(pollMs);
      } catch (err) {
        failures++;
        const delay = Math.min(opts.maxBackoffMs ?? 30_000, (opts.backoffMs ?? 500) * 2 ** Math.min(failures - 1, 16));
        const what = err instanceof LeaseLostError ? "indexer: lease lost, pausing" : "indexer: chain read failed, retrying";
        log.warn(what, { err: (err as Error).message.split("\n")[0], failures, retryMs: delay });
        await pause(delay);
      }
    }
  }

  function pause(ms: number) {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = done;
    });
  }

  return {
    add(c: Consumer) {
      consumers.push(c);
    },
    syncOnce,
    /** The block the consumer has applied up to. */
    cursor: async (name: string) => {
      const c = consumers.find((x) => x.name === name);
      return c ? (await cursorOf(sql, c)).block : undefined;
    },
    start() {
      if (running) return;
      running = true;
      loop = run();
    },
    /** Polls now instead of waiting for the next tick (after a transaction of our own, say). */
    poke() {
      wake?.();
    },
    /** Resolves after the next completed pass over every consumer. */
    nextPass(): Promise<void> {
      return new Promise((resolve) => {
        const l = () => {
          listeners.delete(l);
          resolve();
        };
        listeners.add(l);
        wake?.();
      });
    },
    async stop() {
      running = false;
      wake?.();
      await loop;
    },
  };
}

export type Indexer = ReturnType<typeof createIndexer>;

/** Blocks between the chain head and the slowest consumer's cursor (the metrics' indexer lag);
 * undefined before any consumer has a cursor. Read from the shared cursors, so every gateway of
 * a cluster reports the lag of the one indexer that runs. */
export async function indexerLag(sql: Sql, publicClient: Pick<PublicClient, "getBlockNumber">): Promise<number | undefined> {
  const row = await sql.get<{ block: number | null }>(SLOWEST_CURSOR);
  if (row?.block === null || row?.block === undefined) return undefined;
  return Math.max(0, Number(await publicClient.getBlockNumber()) - row.block);
}

function decode(c: Consumer, logs: Log[]): IndexedEvent[] {
  const out: IndexedEvent[] = [];
  for (const l of logs) {
    try {
      const d = decodeEventLog({ abi: c.abi, data: l.data, topics: l.topics });
      out.push({
        eventName: d.eventName ?? "",
        args: (d.args ?? {}) as Record<string, unknown>,
        blockNumber: l.blockNumber ?? 0n,
        logIndex: l.logIndex ?? 0,
        transactionHash: l.transactionHash ?? "0x",
        address: l.address,
        ...(typeof l.blockTimestamp === "bigint" ? { blockTimestamp: l.blockTimestamp } : {}),
      });
    } catch {
      // A log of an event the consumer's ABI does not know: not its business.
    }
  }
  return out.sort((a, b) => (a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1));
}
