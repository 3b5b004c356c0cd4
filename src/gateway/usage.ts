/**
 * What the operator's usage report (src/ops) reads of the trustless gateway's counts (D17): bytes
 * of each owner's public ipfs content served, paid by the operator, per UTC day. Only days not yet
 * cleared are kept (the first count of a new day clears the days before it), so this tells recent
 * activity, not all time. The gateway keeps its table to itself; this is the way in.
 */
import type { Queryable } from "../db/sql.ts";

const DAY_MS = 86_400_000;
const BY_OWNER = `SELECT owner, CAST(COALESCE(SUM(bytes), 0) AS BIGINT) AS bytes FROM public_egress WHERE day >= $1 GROUP BY owner ORDER BY owner`;

/** Bytes served per owner (EIP-55 address) on the UTC days from the one holding `since` (epoch ms). */
export function publicEgressByOwner(q: Queryable, since: number): Promise<{ owner: string; bytes: number }[]> {
  return q.all(BY_OWNER, [Math.floor(since / DAY_MS)]);
}
