/**
 * Guards the secrets a login checks (email codes, passwords) against guessing without letting a
 * stranger lock the owner out (DESIGN.md D12, D24).
 *
 * An attempt is counted before its secret is checked (so parallel guesses cannot all slip under a
 * limit) and given back when the secret was right. It counts twice: per (account, client), where
 * a client that fails too often is refused for that account and nobody else is; and, for a client
 * the account never signed in from, against the account's backoff (limits.ts' `Backoff`): a
 * growing delay between such clients' tries and a daily cap. A client the account signed in from
 * within `KNOWN_CLIENT_MS` skips the backoff, so however many strangers fail, the owner's own
 * client still gets in. All of it lives in the shared database: gateways see each other's counts.
 *
 * A try claims its place in the backoff with one upsert that counts it only if the row lets it
 * in (on PostgreSQL a racing upsert of the row waits and re-reads it), so one try per slot and
 * exactly `cap` a window, on one gateway or many; a refused try reads the row for Retry-After.
 *
 * @example
 *   const attempt = await guard.begin("password", email, client)   // or RATE_LIMITED
 *   if (!(await hasher.verify(password, hash))) throw fail("PASSWORD_WRONG")  // stays counted
 *   await attempt.succeeded()
 */
import type { ClientKey } from "../http/client-key.ts";
import type { Limit } from "../http/rate-limit.ts";
import { fail } from "./error-codes.ts";
import { KNOWN_CLIENT_MS, pairKey, type Backoff, type BackoffKind, type Backoffs } from "./limits.ts";
import type { Ctx } from "./types.ts";

export interface Attempt {
  /** Whether the account signed in from this client lately (then no backoff applied). */
  readonly known: boolean;
  /** The secret was right: the counts are given back and the client becomes known to the account. */
  succeeded(): Promise<void>;
  /** The secret was never checked (the server was too busy): the counts are given back. */
  release(): Promise<void>;
}

export interface LoginGuard {
  /** Counts one try of `kind` for `account` from `client`, or throws RATE_LIMITED with Retry-After. */
  begin(kind: BackoffKind, account: string, client: ClientKey): Promise<Attempt>;
  /** Whether `account` signed in from `client` within `KNOWN_CLIENT_MS`. */
  knows(account: string, client: ClientKey): Promise<boolean>;
  /** Records a sign-in of `account` from `client`. */
  remember(account: string, client: ClientKey): Promise<void>;
}

const READ = `SELECT window_start AS "windowStart", failures, next_at AS "nextAt" FROM login_backoff WHERE kind = $1 AND account = $2`;
/** The delay after this try, from the row as it was (see CLAIM); a window that ended starts at $5. */
const DELAY = `(CASE WHEN login_backoff.window_start <= $4 THEN $5
    WHEN login_backoff.failures + 1 < $6 THEN 0
    WHEN login_backoff.failures + 1 = $6 OR login_backoff.delay_ms * 2 < $7 THEN $7
    WHEN login_backoff.delay_ms * 2 > $8 THEN $8
    ELSE login_backoff.delay_ms * 2 END)`;
/**
 * One try: $3 now, $4 now − window, $5 the delay after a window's first try, $6 free, $7 first
 * delay, $8 longest delay, $9 cap. A window that ended starts again at this try; otherwise the try
 * is counted only below the cap and once the row's `next_at` has come, and the delay after it
 * doubles from the first (0 while under `free`). Every SET expression reads the row as it was.
 */
const CLAIM = `INSERT INTO login_backoff (kind, account, window_start, failures, delay_ms, next_at) VALUES ($1, $2, $3, 1, $5, $3 + $5)
  ON CONFLICT (kind, account) DO UPDATE SET
    window_start = CASE WHEN login_backoff.window_start <= $4 THEN excluded.window_start ELSE login_backoff.window_start END,
    failures = CASE WHEN login_backoff.window_start <= $4 THEN 1 ELSE login_backoff.failures + 1 END,
    delay_ms = ${DELAY},
    next_at = $3 + ${DELAY}
  WHERE login_backoff.window_start <= $4 OR (login_backoff.failures < $9 AND login_backoff.next_at <= $3)
  RETURNING window_start AS "windowStart"`;
const GIVE_BACK = "UPDATE login_backoff SET failures = failures - 1 WHERE kind = $1 AND account = $2 AND window_start = $3 AND failures > 0";
const SWEEP_BACKOFF = "DELETE FROM login_backoff WHERE window_start <= $1";

const KNOWN = "SELECT 1 AS one FROM known_clients WHERE account = $1 AND client = $2 AND seen_at > $3";
const REMEMBER = `INSERT INTO known_clients (account, client, seen_at) VALUES ($1, $2, $3)
  ON CONFLICT (account, client) DO UPDATE SET seen_at = excluded.seen_at`;
/** An account's clients not seen for `KNOWN_CLIENT_MS` are forgotten when it signs in again. */
const FORGET_OLD = "DELETE FROM known_clients WHERE account = $1 AND seen_at <= $2";

/** How often one gateway deletes ended backoff windows (any gateway's sweep clears every gateway's rows). */
const SWEEP_EVERY_MS = 60_000;

interface Row {
  windowStart: number;
  failures: number;
  nextAt: number;
}

/** When the try after the n-th failure of a window may come (CLAIM computes the same in SQL). */
export function nextTryAt(policy: Backoff, n: number, t: number): number {
  if (n < policy.free) return t;
  return t + Math.min(policy.maxDelayMs, policy.firstDelayMs * 2 ** (n - policy.free));
}

export function createLoginGuard(ctx: Pick<Ctx, "sql" | "now" | "limiter" | "limits" | "config">, backoffs: Backoffs): LoginGuard {
  const { sql, now, limiter, limits } = ctx;
  const enabled = ctx.config.rateLimits !== "off";
  const perClient: Record<BackoffKind, Limit> = { code: limits.wrongCodesPerEmailClient, password: limits.wrongPasswordsPerEmailClient };
  const longest = Math.max(...Object.values(backoffs).map((b) => b.windowMs));
  let lastSweep = 0;

  /** Claims a try in the account's backoff, or throws; answers the window it was counted in. */
  async function claim(kind: BackoffKind, account: string): Promise<number> {
    const p = backoffs[kind];
    const t = now();
    const afterFirst = nextTryAt(p, 1, t) - t;
    const row = await sql.get<{ windowStart: number }>(CLAIM, [kind, account, t, t - p.windowMs, afterFirst, p.free, p.firstDelayMs, p.maxDelayMs, p.cap]);
    if (row) return row.windowStart;
    const held = await sql.get<Row>(READ, [kind, account]);
    const seconds = (until: number) => String(Math.max(1, Math.ceil((until - t) / 1000)));
    if (held && held.failures >= p.cap) throw fail("ACCOUNT_FAILURES_CAPPED", undefined, { "Retry-After": seconds(held.windowStart + p.windowMs) });
    throw fail("ACCOUNT_BACKING_OFF", undefined, { "Retry-After": seconds(held?.nextAt ?? t) });
  }

  async function sweep(t: number) {
    if (t - lastSweep < SWEEP_EVERY_MS) return;
    lastSweep = t;
    await sql.run(SWEEP_BACKOFF, [t - longest]);
  }

  const guard: LoginGuard = {
    async knows(account, client) {
      return (await sql.get(KNOWN, [account, client, now() - KNOWN_CLIENT_MS])) !== undefined;
    },

    async remember(account, client) {
      const t = now();
      await sql.run(REMEMBER, [account, client, t]);
      await sql.run(FORGET_OLD, [account, t - KNOWN_CLIENT_MS]);
    },

    async begin(kind, account, client) {
      const known = await guard.knows(account, client);
      if (!enabled) return { known, succeeded: () => guard.remember(account, client), release: async () => {} };

      const limit = perClient[kind];
      const pair = pairKey(account, client);
      const verdict = await limiter.hit(limit, pair);
      if (!verdict.ok) throw fail("CLIENT_FAILURES", undefined, { "Retry-After": String(verdict.retryAfter) });
      let window: number | undefined;
      if (!known) {
        try {
          window = await claim(kind, account);
        } catch (err) {
          await limiter.unhit(limit, pair);
          throw err;
        }
        await sweep(now());
      }
      let settled = false;
      const giveBack = async () => {
        if (settled) return;
        settled = true;
        await limiter.unhit(limit, pair);
        if (window !== undefined) await sql.run(GIVE_BACK, [kind, account, window]);
      };
      return {
        known,
        async succeeded() {
          await giveBack();
          await guard.remember(account, client);
        },
        release: giveBack,
      };
    },
  };
  return guard;
}
