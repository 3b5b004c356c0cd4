/**
 * Quota enforcement (D7, D14). One space pool and one traffic pool per account, shared by `dfs` and
 * `ipfs`. A transfer holds only what it is sure to need: a download its length, an upload the bytes
 * that have arrived (multipart framing and bytes not yet sent never hold anything, so they cannot
 * refuse another transfer). An upload checks again when its bytes pass what was free (or its
 * declared length) at its last check; the exact check — stored + others' holds + this file ≤ pool
 * — runs in the transaction that inserts the file row. Each check is one `BEGIN IMMEDIATE`
 * transaction, so no number of parallel requests can exceed a pool.
 *
 * Holds carry this gateway's id and an `expires_at` renewed while bytes flow: a hold of a dead
 * gateway or a silent client stops counting once expired, and only expired holds are ever cleared.
 *
 * What an account stores is the storage catalog's to say: the meter is handed `storedBytes`, and
 * calls it inside its own transactions (one SQLite connection, so it sees the file row the
 * deciding transaction has just written).
 *
 * @example
 *   const meter = createMeter({ db, records, storedBytes: (did, except) => storedBytes(db, did, except) })
 *   const up = await meter.beginUpload(address, did, { declared, backend: "dfs", name })
 *   up.add(chunk.byteLength)              // throws 402 once it cannot fit
 *   files.add(row, (tx) => up.commit(tx, size, moved))   // or up.release()
 */
import { and, eq, gt, lte, notInArray, sql } from "drizzle-orm";
import type { Address } from "viem";
import type { Db } from "../db/open.ts";
import { storageError } from "../http/errors.ts";
import { allowance, weiToGwei, type Kind, type Records } from "./records.ts";
import { quotaReservations, trafficUsage } from "./schema.ts";

type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** A hold nobody renews stops counting after this long (a gateway killed, a client gone silent). */
export const RESERVATION_TTL_MS = 60_000;
/** A transfer whose bytes flow renews its holds this often, well inside the TTL. */
const RENEW_MS = 10_000;
/** An upload records the bytes it received at least every this many, so others' checks see them. */
const RECORD_STEP = 8 * 1024 * 1024;

/** JSON numbers are exact to 2^53 (D7: int64-safe); larger uint64 values are clamped. */
const safe = (n: bigint) => Number(n > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : n);

/**
 * Bytes `did` stores, leaving out the file named `except` (the one an upload would replace: it stops
 * counting when replaced). Read on the meter's own connection, inside its transactions.
 */
export type StoredBytes = (did: string, except?: { backend: string; name: string }) => number;

/** Bytes live holds of other transfers count against a pool. */
const sumReserved = (tx: Tx | Db, account: string, kind: Kind, at: number, mine: number[] = []) =>
  tx
    .select({ n: sql<number>`coalesce(sum(${quotaReservations.bytes}), 0)` })
    .from(quotaReservations)
    .where(and(eq(quotaReservations.account, account), eq(quotaReservations.kind, kind), gt(quotaReservations.expiresAt, at), mine.length ? notInArray(quotaReservations.id, mine) : undefined))
    .get()?.n ?? 0;

const trafficMoved = (tx: Tx | Db, account: string, periodStart: number) =>
  tx.select().from(trafficUsage).where(and(eq(trafficUsage.account, account), eq(trafficUsage.periodStart, periodStart))).get()?.bytes ?? 0;

export function createMeter({ db, records, storedBytes, now = Date.now, gateway = crypto.randomUUID() }: { db: Db; records: Records; storedBytes: StoredBytes; now?: () => number; gateway?: string }) {
  async function pool(account: Address, kind: Kind) {
    const [record, time] = await Promise.all([records.get(account, kind), records.chainTime()]);
    return { record, limit: allowance(record, time), periodStart: Number(record.periodStart), expired: record.expire <= time };
  }

  /**
   * Bytes of a pool in use: stored, leaving out `except` (space), or moved this period (traffic),
   * plus the live holds of transfers other than the holds `mine`.
   */
  function used(tx: Tx | Db, account: Address, did: string, kind: Kind, periodStart: number, opts: { except?: { backend: string; name: string }; mine?: number[] } = {}) {
    return (kind === "space" ? storedBytes(did, opts.except) : trafficMoved(tx, account, periodStart)) + sumReserved(tx, account, kind, now(), opts.mine);
  }

  const refuse = (kind: Kind, limit: number, inUse: number, want: number) =>
    storageError.quota(`not enough ${kind}: ${limit} bytes allowed, ${inUse} in use, ${want} more needed — buy more (GET /dfs/buy${kind}) or ask for a grant`);

  /** Inserts or renews a hold of `bytes`; a hold that expired meanwhile (and was cleared) is made again. */
  function hold(tx: Tx, account: Address, kind: Kind, bytes: number, id: number | undefined): number {
    const expiresAt = now() + RESERVATION_TTL_MS;
    if (id !== undefined) {
      const kept = tx.update(quotaReservations).set({ bytes, expiresAt }).where(eq(quotaReservations.id, id)).returning({ id: quotaReservations.id }).get();
      if (kept) return kept.id;
    }
    return tx.insert(quotaReservations).values({ account, kind, bytes, createdAt: now(), gateway, expiresAt }).returning({ id: quotaReservations.id }).get().id;
  }

  function addTraffic(tx: Tx, account: Address, periodStart: number, bytes: number) {
    if (bytes <= 0) return;
    tx.insert(trafficUsage)
      .values({ account, periodStart, bytes })
      .onConflictDoUpdate({ target: [trafficUsage.account, trafficUsage.periodStart], set: { bytes: sql`${trafficUsage.bytes} + ${bytes}` } })
      .run();
  }

  const drop = (tx: Tx | Db, ids: (number | undefined)[]) => {
    for (const id of ids) if (id !== undefined) tx.delete(quotaReservations).where(eq(quotaReservations.id, id)).run();
  };

  /**
   * An upload's meter. `declared` is the request's Content-Length (file plus framing), if any;
   * `backend` and `name` name the entry the file would replace, whose bytes it need not find room for.
   */
  async function beginUpload(account: Address, did: string, opts: { declared?: number; backend: string; name: string }) {
    const [space, traffic] = await Promise.all([pool(account, "space"), pool(account, "traffic")]);
    if (space.limit === 0) throw storageError.quota(space.expired ? "your storage space has expired: buy more or ask for a grant" : "no storage space: buy some (GET /dfs/buyspace) or ask for a grant");
    const replaced = { backend: opts.backend, name: opts.name };
    const declared = opts.declared !== undefined && opts.declared > 0 ? opts.declared : Number.POSITIVE_INFINITY;
    const ids: Record<Kind, number | undefined> = { space: undefined, traffic: undefined };
    let received = 0;
    /** Received bytes past which a check must run: what was free at the last one, or the declared length. */
    let checkAt = 0;
    let recorded = 0;
    let recordedAt = 0;
    let closed = false;

    const mine = () => Object.values(ids).filter((id) => id !== undefined);

    /** Checks both pools for the bytes received so far and records them as this upload's holds. */
    function check() {
      const outcome = db.transaction(
        (tx) => {
          let free = Number.POSITIVE_INFINITY;
          for (const [kind, p] of [["space", space], ["traffic", traffic]] as const) {
            const others = used(tx, account, did, kind, p.periodStart, { except: replaced, mine: mine() });
            if (others + received > p.limit) {
              // Dropped in this same transaction: a refused upload never counts against another.
              drop(tx, Object.values(ids));
              return refuse(kind, p.limit, others, received);
            }
            free = Math.min(free, p.limit - others - received);
          }
          ids.space = hold(tx, account, "space", received, ids.space);
          ids.traffic = hold(tx, account, "traffic", received, ids.traffic);
          return free;
        },
        { behavior: "immediate" },
      );
      if (typeof outcome !== "number") {
        closed = true;
        throw outcome;
      }
      recorded = received;
      recordedAt = now();
      checkAt = received + Math.min(Math.max(declared - received, 0), outcome);
    }

    check();
    return {
      /** Counts bytes that arrived: checks again past what was free, records them now and then. */
      add(bytes: number) {
        if (closed) return;
        received += bytes;
        if (received > checkAt || received - recorded >= RECORD_STEP || now() - recordedAt >= RENEW_MS) check();
      },
      /**
       * The exact check, in the transaction `tx` that has just recorded the file row (of `size`
       * bytes, `moved` over the wire): the file now counts as stored, its traffic as moved, and the
       * holds go. Throws 402 (rolling `tx` back) when it does not fit.
       */
      commit(tx: Tx, size: number, moved: number) {
        if (closed) throw new Error("upload meter already closed");
        const holds = mine();
        // The file row is in: it counts in what is stored.
        const withFile = used(tx, account, did, "space", space.periodStart, { mine: holds });
        if (withFile > space.limit) throw refuse("space", space.limit, withFile - size, size);
        const movedBefore = used(tx, account, did, "traffic", traffic.periodStart, { mine: holds });
        if (movedBefore + moved > traffic.limit) throw refuse("traffic", traffic.limit, movedBefore, moved);
        drop(tx, holds);
        addTraffic(tx, account, traffic.periodStart, moved);
        closed = true;
      },
      /** Gives the holds back (a refused or failed upload). Synchronous, so no other check runs first. */
      release() {
        if (closed) return;
        closed = true;
        drop(db, Object.values(ids));
      },
    };
  }

  /** A download holds its whole length from the start: those bytes are going out. */
  async function beginDownload(account: Address, bytes: number) {
    const traffic = await pool(account, "traffic");
    let id = db.transaction(
      (tx) => {
        const inUse = used(tx, account, "", "traffic", traffic.periodStart); // traffic: no DID needed
        if (inUse + bytes > traffic.limit) throw refuse("traffic", traffic.limit, inUse, bytes);
        return hold(tx, account, "traffic", bytes, undefined);
      },
      { behavior: "immediate" },
    );
    let renewedAt = now();
    let closed = false;
    return {
      /** Bytes are flowing: keeps the hold alive past its TTL (a slow client of a large file). */
      renew() {
        if (closed || now() - renewedAt < RENEW_MS) return;
        renewedAt = now();
        id = db.transaction((tx) => hold(tx, account, "traffic", bytes, id), { behavior: "immediate" });
      },
      /** What was really sent counts; the rest of the reservation is given back. */
      settle(sent: number) {
        if (closed) return;
        closed = true;
        db.transaction((tx) => {
          drop(tx, [id]);
          addTraffic(tx, account, traffic.periodStart, sent);
        }, { behavior: "immediate" });
      },
    };
  }

  /** The quota record of spec 2.6 for one pool: what is left once stored (or moved) bytes and live holds count. */
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

  /**
   * Clears holds whose time is up (at start, and whenever called later). A live hold — another
   * gateway's, or this one's — is never touched: it stops counting only once it expires.
   */
  function clearStale(): number {
    return db.delete(quotaReservations).where(lte(quotaReservations.expiresAt, now())).returning({ id: quotaReservations.id }).all().length;
  }

  return { beginUpload, beginDownload, record, clearStale, gateway };
}

export type Meter = ReturnType<typeof createMeter>;
