/**
 * The per-gateway limit on public reads per client address (D17, STOWAGE_PUBLIC_EGRESS_PER_CLIENT):
 * bytes per hour, in memory (a read is never a database write for this; see http/rate-limit.ts
 * for why read limits may stay per gateway). IPv6 clients count per /64, since one host commonly
 * holds a whole /64 and could otherwise take a fresh address per request.
 */
import { clientKey } from "../http/client-key.ts";

const WINDOW_MS = 3_600_000;
/** Ended windows are swept when the map grows past this, so memory stays bounded by live clients. */
const SWEEP_AT = 10_000;

export type Taken = { ok: true } | { ok: false; retryAfter: number };

export function createClientLimit(opts: { bytesPerHour: number; now?: () => number }) {
  const now = opts.now ?? Date.now;
  const windows = new Map<string, { start: number; bytes: number }>();

  const current = (key: string, t: number) => {
    let w = windows.get(key);
    if (!w || t - w.start >= WINDOW_MS) {
      if (windows.size >= SWEEP_AT) for (const [k, old] of windows) if (t - old.start >= WINDOW_MS) windows.delete(k);
      w = { start: t, bytes: 0 };
      windows.set(key, w);
    }
    return w;
  };

  return {
    /** Counts `n` bytes for the client at `ip` if they fit in its hour; 0 = no limit. */
    take(ip: string, n: number): Taken {
      if (opts.bytesPerHour <= 0) return { ok: true };
      const t = now();
      const w = current(clientKey(ip), t);
      if (w.bytes + n > opts.bytesPerHour) return { ok: false, retryAfter: Math.max(1, Math.ceil((w.start + WINDOW_MS - t) / 1000)) };
      w.bytes += n;
      return { ok: true };
    },
    /** Takes back bytes counted and then not sent. */
    giveBack(ip: string, n: number) {
      const w = windows.get(clientKey(ip));
      if (w) w.bytes = Math.max(0, w.bytes - n);
    },
  };
}

export type ClientLimit = ReturnType<typeof createClientLimit>;
