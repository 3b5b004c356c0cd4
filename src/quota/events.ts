/**
 * The quota's consumer for the chain event indexer (src/chain/indexer.ts): every `Purchased` and
 * `FreeGranted` event of the Proxy contract, written to `quota_events` with its block's time, in
 * the indexer's transaction with its cursor. The operator's usage report (src/ops) reads them
 * through `quotaActivity`: purchases made by any gateway of the deployment, and grants sent by
 * `stowage admin grant` or any other wallet of the owner, as the chain has them.
 *
 * @example
 *   indexer.add(quotaEventsConsumer({ address: contracts.proxy, fromBlock }))
 *   await quotaActivity(sql, Date.parse("2025-01-01"))
 */
import { getAddress, type Address } from "viem";
import { proxyAbi } from "../chain/artifacts/index.ts";
import type { Consumer } from "../chain/indexer.ts";
import type { Queryable } from "../db/sql.ts";

/** The Proxy's `kind`: 0 space, 1 traffic. */
const POOLS = ["space", "traffic"] as const;

const LOG = "INSERT INTO quota_events (block, log_index, tx, kind, account, pool, bytes, cost, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING";
const DROP_AFTER = "DELETE FROM quota_events WHERE block > $1";
const SINCE = "SELECT account, kind, pool, bytes, cost FROM quota_events WHERE at >= $1";
// Floating point is what a gauge shows; the exact sums are quotaActivity's.
const TOTALS = "SELECT kind, pool, COUNT(*) AS events, COALESCE(SUM(CAST(bytes AS DOUBLE PRECISION)), 0) AS bytes FROM quota_events GROUP BY kind, pool";

export function quotaEventsConsumer(opts: { address: Address; fromBlock: bigint; name?: string }): Consumer {
  return {
    name: opts.name ?? "quota",
    address: opts.address,
    abi: proxyAbi,
    fromBlock: opts.fromBlock,
    timestamps: true,
    async apply(tx, events) {
      for (const e of events) {
        const kind = e.eventName === "Purchased" ? "purchase" : e.eventName === "FreeGranted" ? "grant" : undefined;
        if (!kind) continue;
        const pool = POOLS[Number(e.args.kind)];
        if (!pool) continue; // a kind this gateway does not know: not a quota pool of ours
        const cost = kind === "purchase" ? String(e.args.cost as bigint) : "0";
        const at = Number(e.blockTimestamp ?? 0n) * 1000;
        // A uint64, kept exactly: decimal text on SQLite, numeric on PostgreSQL.
        const bytes = String(e.args.bytes_ as bigint);
        await tx.run(LOG, [Number(e.blockNumber), e.logIndex, e.transactionHash, kind, getAddress(e.args.user as string), pool, bytes, cost, at]);
      }
    },
    async rollback(tx, block) {
      await tx.run(DROP_AFTER, [Number(block)]);
    },
  };
}

/** Per account, kind and pool since `since` (epoch ms): events, and the bytes they came to. */
export interface QuotaActivity {
  account: string;
  kind: "purchase" | "grant";
  pool: "space" | "traffic";
  events: number;
  /** Summed exactly: uint64 amounts, whose sum may pass even 2^64. */
  bytes: bigint;
}

/** The events since `since`, summed per account, kind and pool, and the wei each account spent on purchases. */
export async function quotaActivity(q: Queryable, since: number): Promise<{ rows: QuotaActivity[]; spent: Map<string, bigint> }> {
  // uint64 bytes and uint256 wei: summed here as bigints, never as SQL numbers.
  const sums = new Map<string, QuotaActivity>();
  const spent = new Map<string, bigint>();
  for (const r of await q.all<{ account: string; kind: QuotaActivity["kind"]; pool: QuotaActivity["pool"]; bytes: string; cost: string }>(SINCE, [since])) {
    const key = `${r.account} ${r.kind} ${r.pool}`;
    const sum = sums.get(key) ?? { account: r.account, kind: r.kind, pool: r.pool, events: 0, bytes: 0n };
    sum.events++;
    sum.bytes += BigInt(r.bytes);
    sums.set(key, sum);
    if (r.kind === "purchase") spent.set(r.account, (spent.get(r.account) ?? 0n) + BigInt(r.cost));
  }
  const rows = [...sums.values()].sort((a, b) => (a.account < b.account ? -1 : a.account > b.account ? 1 : 0));
  return { rows, spent };
}

/** All-time events and bytes (as a float: a gauge's value) by kind and pool, for the metrics. */
export function quotaEventTotals(q: Queryable): Promise<{ kind: string; pool: string; events: number; bytes: number }[]> {
  return q.all(TOTALS);
}
