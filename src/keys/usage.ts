/**
 * What the operator's usage report (src/ops) reads of the S3 access keys (D18): per account, the
 * keys that work now and those made since a date. The keys keep their table to themselves; this is
 * the way in.
 */
import type { Queryable } from "../db/sql.ts";

const BY_ACCOUNT = `SELECT did,
    CAST(SUM(CASE WHEN revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1) THEN 1 ELSE 0 END) AS BIGINT) AS live,
    CAST(SUM(CASE WHEN created_at >= $2 THEN 1 ELSE 0 END) AS BIGINT) AS made
  FROM access_keys GROUP BY did ORDER BY did`;

/** Per account: keys live at `now`, and keys made since `since` (epoch ms). */
export function keysByAccount(q: Queryable, now: number, since: number): Promise<{ did: string; live: number; made: number }[]> {
  return q.all(BY_ACCOUNT, [now, since]);
}
