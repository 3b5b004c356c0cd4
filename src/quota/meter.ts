/**
 * Quota enforcement (D7). One space pool and one traffic pool per account, shared by `dfs` and
 * `ipfs`. Every reservation is one `BEGIN IMMEDIATE` transaction that checks what is stored (or
 * moved this period) plus what other in-flight transfers hold, so no number of parallel requests
 * can exceed a pool. An upload reserves as it streams (in steps), a download its length; both
 * settle to the real count, or release on failure.
 *
 * @example
 *   const up = await meter.beginUpload(address, did)
 *   up.add(chunk.byteLength)   // throws 402 past the allowance
 *   up.commit(totalBytes)      // or up.release()
 */
import { and, eq, sql } from "drizzle-orm";
import type { Address } from "viem";
import type { Db } from "../db/open.ts";
import { storageError } from "../http/errors.ts";
import { files } from "../storage/schema.ts";
import { allowance, weiToGwei, type Kind, type Records } from "./records.ts";
import { quotaReservations, trafficUsage } from "./schema.ts";

type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** Uploads reserve this much at a time, so a transaction per network chunk is not needed. */
export const RESERVE_STEP = 8 * 1024 * 1024;

/** JSON numbers are exact to 2^53 (D7: int64-safe); larger uint64 values are clamped. */
const safe = (n: bigint) => Number(n > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : n);

const sumFiles = (tx: Tx | Db, did: string) =>
  tx.select({ n: sql<number>`coalesce(sum(${files.size}), 0)` }).from(files).where(eq(files.did, did)).get()?.n ?? 0;

const sumReserved = (tx: Tx | Db, account: string, kind: Kind) =>
  tx.select({ n: sql<number>`coalesce(sum(${quotaReservations.bytes}), 0)` }).from(quotaReservations).where(and(eq(quotaReservations.account, account), eq(quotaReservations.kind, kind))).get()?.n ?? 0;

const trafficMoved = (tx: Tx | Db, account: string, periodStart: number) =>
  tx.select().from(trafficUsage).where(and(eq(trafficUsage.account, account), eq(trafficUsage.periodStart, periodStart))).get()?.bytes ?? 0;

export function createMeter({ db, records, now = Date.now }: { db: Db; records: Records; now?: () => number }) {
  /** Bytes of the pool in use: stored (space) or moved this period (traffic), plus reservations. */
  function used(tx: Tx | Db, account: Address, did: string, kind: Kind, periodStart: number) {
    return (kind === "space" ? sumFiles(tx, did) : trafficMoved(tx, account, periodStart)) + sumReserved(tx, account, kind);
  }

  async function pool(account: Address, kind: Kind) {
    const [record, time] = await Promise.all([records.get(account, kind), records.chainTime()]);
    return { record, limit: allowance(record, time), periodStart: Number(record.periodStart), expired: record.expire <= time };
  }

  const refuse = (kind: Kind, limit: number, inUse: number, want: number) =>
    storageError.quota(`not enough ${kind}: ${limit} bytes allowed, ${inUse} in use, ${want} more needed — buy more (GET /dfs/buy${kind}) or ask for a grant`);

  /** Holds at least `need` bytes (else 402), and up to `prefer` when the pool has room. */
  function reserve(account: Address, did: string, kind: Kind, need: number, prefer: number, limit: number, periodStart: number, id?: number): { id: number; held: number } {
    return db.transaction(
      (tx) => {
        const inUse = used(tx, account, did, kind, periodStart);
        if (inUse + need > limit) throw refuse(kind, limit, inUse, need);
        const held = Math.max(need, Math.min(prefer, limit - inUse));
        if (id !== undefined) {
          tx.update(quotaReservations).set({ bytes: sql`${quotaReservations.bytes} + ${held}` }).where(eq(quotaReservations.id, id)).run();
          return { id, held };
        }
        return { id: tx.insert(quotaReservations).values({ account, kind, bytes: held, createdAt: now() }).returning({ id: quotaReservations.id }).get().id, held };
      },
      { behavior: "immediate" },
    );
  }

  function addTraffic(tx: Tx, account: Address, periodStart: number, bytes: number) {
    if (bytes <= 0) return;
    tx.insert(trafficUsage)
      .values({ account, periodStart, bytes })
      .onConflictDoUpdate({ target: [trafficUsage.account, trafficUsage.periodStart], set: { bytes: sql`${trafficUsage.bytes} + ${bytes}` } })
      .run();
  }

  const drop = (tx: Tx | Db, ...ids: (number | undefined)[]) => {
    for (const id of ids) if (id !== undefined) tx.delete(quotaReservations).where(eq(quotaReservations.id, id)).run();
  };

  async function beginUpload(account: Address, did: string) {
    const [space, traffic] = await Promise.all([pool(account, "space"), pool(account, "traffic")]);
    if (space.limit === 0) throw storageError.quota(space.expired ? "your storage space has expired: buy more or ask for a grant" : "no storage space: buy some (GET /dfs/buyspace) or ask for a grant");
    const ids: { space?: number; traffic?: number } = {};
    const held = { space: 0, traffic: 0 };
    let seen = 0;
    let closed = false;
    const top = (kind: Kind, p: typeof space) => {
      if (seen <= held[kind]) return;
      const r = reserve(account, did, kind, seen - held[kind], RESERVE_STEP, p.limit, p.periodStart, ids[kind]);
      ids[kind] = r.id;
      held[kind] += r.held;
    };
    return {
      /** Counts bytes that arrived; holds more of each pool when they pass what is held. */
      add(bytes: number) {
        seen += bytes;
        top("space", space);
        top("traffic", traffic);
      },
      /** The file row now counts as stored; the traffic becomes real. Call after the file is recorded. */
      commit(total: number) {
        if (closed) return;
        closed = true;
        db.transaction((tx) => {
          drop(tx, ids.space, ids.traffic);
          addTraffic(tx, account, traffic.periodStart, total);
        }, { behavior: "immediate" });
      },
      release() {
        if (closed) return;
        closed = true;
        drop(db, ids.space, ids.traffic);
      },
    };
  }

  async function beginDownload(account: Address, bytes: number) {
    const traffic = await pool(account, "traffic");
    const { id } = reserve(account, "", "traffic", bytes, bytes, traffic.limit, traffic.periodStart);
    let closed = false;
    return {
      /** What was really sent counts; the rest of the reservation is given back. */
      settle(sent: number) {
        if (closed) return;
        closed = true;
        db.transaction((tx) => {
          drop(tx, id);
          addTraffic(tx, account, traffic.periodStart, sent);
        }, { behavior: "immediate" });
      },
    };
  }

  /** The quota record of spec 2.6 for one pool. */
  async function record(account: Address, did: string, kind: Kind) {
    const { record: r, limit, periodStart } = await pool(account, kind);
    const inUse = used(db, account, did, kind, periodStart);
    const gwei = weiToGwei(r.deposit);
    return {
      Nonce: Number(r.nonce),
      Balance: safe(gwei),
      SizeByte: Math.max(0, limit - inUse),
      FreeByte: safe(r.free),
      Expire: Number(r.expire),
    };
  }

  /** In-flight transfers died with the last process: their holds go too. */
  function clearStale() {
    db.delete(quotaReservations).run();
  }

  return { beginUpload, beginDownload, record, clearStale };
}

export type Meter = ReturnType<typeof createMeter>;
