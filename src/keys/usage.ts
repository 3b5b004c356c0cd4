/**
 * What the operator's usage report (src/ops) reads of the access keys (D18): per account, the S3
 * keys (scope rw or ro) that work now and those made since a date, and the Pinning Service API
 * tokens (scope pins) that work now. One table holds both; they are counted apart, as they are
 * different things to an operator. The keys keep their table to themselves; this is the way in.
 */
import type { Queryable } from "../db/sql.ts";

const LIVE = "revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1)";
const S3 = "access IN ('rw', 'ro')";
const BY_ACCOUNT = `SELECT did,
    CAST(SUM(CASE WHEN ${S3} AND ${LIVE} THEN 1 ELSE 0 END) AS BIGINT) AS live,
    CAST(SUM(CASE WHEN ${S3} AND created_at >= $2 THEN 1 ELSE 0 END) AS BIGINT) AS made,
    CAST(SUM(CASE WHEN access = 'pins' AND ${LIVE} THEN 1 ELSE 0 END) AS BIGINT) AS "pinTokens"
  FROM access_keys GROUP BY did ORDER BY did`;

/** Per account: S3 keys live at `now` and made since `since` (epoch ms), and pins tokens live at `now`. */
export function keysByAccount(q: Queryable, now: number, since: number): Promise<{ did: string; live: number; made: number; pinTokens: number }[]> {
  return q.all(BY_ACCOUNT, [now, since]);
}
