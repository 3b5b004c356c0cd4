/**
 * What the operator's usage report (src/ops) reads of the quota's own rows: traffic moved per
 * account in its current period (what the quota counts against the traffic pool now, D7) and in
 * the periods that began since a date. The quota keeps its tables to itself; this is the way in.
 */
import type { Queryable } from "../db/sql.ts";

/** The latest period per account and its bytes; `since` (chain seconds) sums the periods begun since. */
const TRAFFIC = `SELECT u.account, u.period_start AS "periodStart", u.bytes,
    (SELECT CAST(COALESCE(SUM(s.bytes), 0) AS BIGINT) FROM traffic_usage s WHERE s.account = u.account AND s.period_start >= $1) AS "sinceBytes"
  FROM traffic_usage u
  WHERE u.period_start = (SELECT MAX(m.period_start) FROM traffic_usage m WHERE m.account = u.account)
  ORDER BY u.account`;

export interface TrafficUsage {
  /** EIP-55 address. */
  account: string;
  /** Chain time (s) the account's current traffic period began, and the bytes moved in it. */
  periodStart: number;
  bytes: number;
  /** Bytes moved in periods that began at or after the report's `since`. */
  sinceBytes: number;
}

export function trafficByAccount(q: Queryable, sinceSeconds: number): Promise<TrafficUsage[]> {
  return q.all(TRAFFIC, [sinceSeconds]);
}
