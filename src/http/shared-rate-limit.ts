/**
 * Fixed-window counters in the database every gateway shares (DESIGN.md D12 under D16): the login
 * and code limits must hold across gateways, or a client spreading its guesses over N gateways
 * gets N times the allowance. One atomic upsert per event, so racing gateways never lose a count;
 * read limits stay in memory per gateway (rate-limit.ts), so a read is never a database write.
 * A limit per client keys on `clientKey()` (client-key.ts: IPv6 by /64), never on a raw address.
 *
 * @example
 *   const limiter = createSharedRateLimiter(sql)
 *   const verdict = await limiter.hit({ name: "login-ip", max: 30, windowMs: 60_000 }, requestClientKey(request))
 *   if (!verdict.ok) throw rateLimited(verdict.retryAfter)
 */
import type { Sql } from "../db/sql.ts";
import type { Limit, Verdict } from "./rate-limit.ts";

export interface SharedRateLimiter {
  /** Counts one event and says whether it is within the limit. */
  hit(limit: Limit, key: string): Promise<Verdict>;
  /** Takes back one counted event (one that turned out not to be a failure). */
  unhit(limit: Limit, key: string): Promise<void>;
}

/**
 * A window begins at the first event after the last one ended ($2 = now, $3 = now − window). Every
 * SET expression reads the row as it was, so count and window_start move together; an event over
 * the limit is counted too, which only keeps the count over the limit until the window ends.
 */
const HIT = `INSERT INTO rate_counters (key, window_start, count) VALUES ($1, $2, 1)
  ON CONFLICT (key) DO UPDATE SET
    count = CASE WHEN rate_counters.window_start > $3 THEN rate_counters.count + 1 ELSE 1 END,
    window_start = CASE WHEN rate_counters.window_start > $3 THEN rate_counters.window_start ELSE excluded.window_start END
  RETURNING count, window_start AS "windowStart"`;
const UNHIT = "UPDATE rate_counters SET count = count - 1 WHERE key = $1 AND window_start > $2 AND count > 0";
const SWEEP = "DELETE FROM rate_counters WHERE window_start <= $1";

/** How often one gateway clears ended windows (any gateway's sweep clears every gateway's rows). */
const SWEEP_EVERY_MS = 60_000;
/** Rows are kept at least this long after their window began, whatever limits other gateways use. */
const KEEP_MS = 60 * 60_000;

export function createSharedRateLimiter(sql: Sql, opts: { now?: () => number; enabled?: boolean } = {}): SharedRateLimiter {
  const now = opts.now ?? Date.now;
  if (opts.enabled === false) return { hit: async () => ({ ok: true }), unhit: async () => {} };

  // A limit's name has no ':', so "name:key" names one counter whatever the key holds (PostgreSQL
  // text cannot hold the NUL the in-memory limiter uses).
  const id = (limit: Limit, key: string) => `${limit.name}:${key}`;
  let longest = KEEP_MS;
  let lastSweep = 0;

  async function sweep(t: number) {
    if (t - lastSweep < SWEEP_EVERY_MS) return;
    lastSweep = t;
    await sql.run(SWEEP, [t - longest]);
  }

  return {
    async hit(limit, key) {
      const t = now();
      if (limit.windowMs > longest) longest = limit.windowMs;
      const row = await sql.get<{ count: number; windowStart: number }>(HIT, [id(limit, key), t, t - limit.windowMs]);
      if (!row) throw new Error("rate counter upsert returned no row");
      await sweep(t);
      if (row.count <= limit.max) return { ok: true };
      return { ok: false, retryAfter: Math.max(1, Math.ceil((row.windowStart + limit.windowMs - t) / 1000)) };
    },
    async unhit(limit, key) {
      await sql.run(UNHIT, [id(limit, key), now() - limit.windowMs]);
    },
  };
}
