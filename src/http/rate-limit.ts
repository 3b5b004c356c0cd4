/**
 * Keyed fixed-window counters in memory, per gateway, forgotten on restart (which only ever lets a
 * client in earlier). Under D16 these are for limits that may stay per gateway (reads, so a read
 * is never a database write); the login and code limits count in the shared database instead
 * (shared-rate-limit.ts), since a client could otherwise spread its guesses over the gateways.
 * A limit per client keys on `clientKey()` (client-key.ts: IPv6 by /64), never on a raw address.
 *
 * @example
 *   const limiter = createRateLimiter()
 *   const perIp = { name: "login-ip", max: 30, windowMs: 60_000 }
 *   const verdict = limiter.hit(perIp, requestClientKey(request))
 *   if (!verdict.ok) throw accountError("RATE_LIMITED", "Too many attempts", { "Retry-After": String(verdict.retryAfter) })
 */

export interface Limit {
  /** Namespace of the counter, so two limits can share a key (an IP, an email). */
  name: string;
  max: number;
  windowMs: number;
}

export type Verdict = { ok: true } | { ok: false; retryAfter: number };

export interface RateLimiter {
  /** Counts `weight` events (one by default: a batch of requests counts each) and says whether
   * they are within the limit; events over the limit are not counted. */
  hit(limit: Limit, key: string, weight?: number): Verdict;
  /** Whether `weight` more events (one by default) would be within the limit, counting nothing:
   * for a limit on failures, asked before the work that may fail and `hit` once it did. */
  peek(limit: Limit, key: string, weight?: number): Verdict;
}

interface Window {
  start: number;
  count: number;
}

/** Expired windows are swept when the map grows past this, so memory stays bounded by live keys. */
const SWEEP_AT = 10_000;

export function createRateLimiter(opts: { now?: () => number; enabled?: boolean } = {}): RateLimiter {
  const now = opts.now ?? Date.now;
  if (opts.enabled === false) return { hit: () => ({ ok: true }), peek: () => ({ ok: true }) };

  const windows = new Map<string, Window & { windowMs: number }>();
  const sweep = (t: number) => {
    for (const [k, w] of windows) if (t - w.start >= w.windowMs) windows.delete(k);
  };
  const current = (limit: Limit, key: string, t: number) => {
    const id = `${limit.name}\u0000${key}`;
    let w = windows.get(id);
    if (!w || t - w.start >= limit.windowMs) {
      if (windows.size >= SWEEP_AT) sweep(t);
      w = { start: t, count: 0, windowMs: limit.windowMs };
      windows.set(id, w);
    }
    return w;
  };
  const verdict = (limit: Limit, w: Window, t: number, weight: number): Verdict =>
    w.count + weight <= limit.max ? { ok: true } : { ok: false, retryAfter: Math.max(1, Math.ceil((w.start + limit.windowMs - t) / 1000)) };

  return {
    hit(limit, key, weight = 1) {
      const t = now();
      const w = current(limit, key, t);
      const v = verdict(limit, w, t, weight);
      if (v.ok) w.count += weight;
      return v;
    },
    peek(limit, key, weight = 1) {
      const t = now();
      return verdict(limit, current(limit, key, t), t, weight);
    },
  };
}
