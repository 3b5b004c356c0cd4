/**
 * The event indexer that other capabilities subscribe to. Each consumer has its own cursor in
 * SQLite; events are read with `getLogs` over block ranges (no filters: production RPCs drop
 * them), `confirmations` blocks behind the head. A consumer's events and its cursor commit in one
 * transaction, so a crash or restart re-reads from the cursor and applies nothing twice. The hash
 * of each processed range's last block is kept; when the chain rewinds (the hash at the cursor
 * changed), the consumer rolls back to the newest block both chains share. Failures retry with
 * backoff, forever: the indexer never stops for good.
 *
 * @example
 *   const indexer = createIndexer({ db, publicClient, confirmations: 0, log })
 *   indexer.add({ name: "directory", address, abi: directoryAbi, fromBlock: 0n, apply, rollback })
 *   indexer.start()
 */
import { and, desc, eq, gt, lt } from "drizzle-orm";
import type { Abi, Address, Chain, Log, PublicClient, Transport } from "viem";
import { decodeEventLog } from "viem";
import type { Logger } from "../log.ts";
import type { Db } from "../db/open.ts";
import { chainBlocks, chainCursors } from "./schema.ts";

export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

export interface IndexedEvent {
  eventName: string;
  args: Record<string, unknown>;
  blockNumber: bigint;
  logIndex: number;
  transactionHash: `0x${string}`;
  address: Address;
}

export interface Consumer {
  /** Cursor key: unique per consumer. */
  name: string;
  address: Address | Address[];
  abi: Abi;
  /** First block that can hold its events (the deployment block). */
  fromBlock: bigint;
  /** Applies a range's events in order, inside the range's transaction. Must be synchronous. */
  apply(tx: Tx, events: IndexedEvent[]): void;
  /** Undoes everything applied from blocks after `block`, inside a transaction. */
  rollback(tx: Tx, block: bigint): void;
}

export interface IndexerOptions {
  db: Db;
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
}

type Step = "idle" | "progress" | "rewound";

export function createIndexer(opts: IndexerOptions) {
  const { db, publicClient, log } = opts;
  const pollMs = opts.pollMs ?? 2000;
  const batchBlocks = BigInt(opts.batchBlocks ?? 2000);
  const keepBlocks = opts.keepBlocks ?? 256;
  const consumers: Consumer[] = [];
  let running = false;
  let loop: Promise<void> | undefined;
  let wake: (() => void) | undefined;
  const listeners = new Set<() => void>();

  const cursorOf = (c: Consumer) =>
    db.select().from(chainCursors).where(eq(chainCursors.name, c.name)).get() ?? { name: c.name, block: Number(c.fromBlock) - 1, hash: null };

  const hashAt = async (n: bigint) => {
    try {
      return (await publicClient.getBlock({ blockNumber: n })).hash;
    } catch (err) {
      if ((err as Error).name === "BlockNotFoundError") return undefined;
      throw err;
    }
  };

  /** Newest kept block that is still on the chain; the consumer goes back to it. */
  async function rewind(c: Consumer) {
    const kept = db.select().from(chainBlocks).where(eq(chainBlocks.name, c.name)).orderBy(desc(chainBlocks.number)).all();
    let ancestor = { block: Number(c.fromBlock) - 1, hash: null as string | null };
    for (const k of kept) {
      if ((await hashAt(BigInt(k.number))) === k.hash) {
        ancestor = { block: k.number, hash: k.hash };
        break;
      }
    }
    db.transaction((tx) => {
      c.rollback(tx, BigInt(ancestor.block));
      tx.delete(chainBlocks).where(and(eq(chainBlocks.name, c.name), gt(chainBlocks.number, ancestor.block))).run();
      tx.insert(chainCursors).values({ name: c.name, ...ancestor }).onConflictDoUpdate({ target: chainCursors.name, set: ancestor }).run();
    }, { behavior: "immediate" });
    log.warn("chain rewound: indexer rolled back", { consumer: c.name, to: ancestor.block });
  }

  async function step(c: Consumer, safe: bigint): Promise<Step> {
    const cursor = cursorOf(c);
    if (cursor.hash && (await hashAt(BigInt(cursor.block))) !== cursor.hash) {
      await rewind(c);
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
    db.transaction((tx) => {
      // Another pass may have applied this range while we read it: apply nothing twice.
      const now = tx.select().from(chainCursors).where(eq(chainCursors.name, c.name)).get();
      if ((now?.block ?? Number(c.fromBlock) - 1) !== cursor.block) return;
      c.apply(tx, events);
      const at = { block: Number(to), hash: after };
      tx.insert(chainCursors).values({ name: c.name, ...at }).onConflictDoUpdate({ target: chainCursors.name, set: at }).run();
      tx.insert(chainBlocks).values({ name: c.name, number: at.block, hash: after }).onConflictDoUpdate({ target: [chainBlocks.name, chainBlocks.number], set: { hash: after } }).run();
      tx.delete(chainBlocks).where(and(eq(chainBlocks.name, c.name), lt(chainBlocks.number, at.block - keepBlocks))).run();
    }, { behavior: "immediate" });
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
        log.warn("indexer: chain read failed, retrying", { err: (err as Error).message.split("\n")[0], failures, retryMs: delay });
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
    cursor: (name: string) => {
      const c = consumers.find((x) => x.name === name);
      return c ? cursorOf(c).block : undefined;
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
      });
    } catch {
      // A log of an event the consumer's ABI does not know: not its business.
    }
  }
  return out.sort((a, b) => (a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1));
}
