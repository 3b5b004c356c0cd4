/**
 * Rate limits of the login and code endpoints (DESIGN.md D12, D24), as data. `STOWAGE_RATE_LIMITS=off`
 * switches all of them off; the 60-second gap between two codes for one email and client, and the
 * five wrong tries that void a code, are code rules and stay. The counters live in the shared
 * database (shared-rate-limit.ts, login-guard.ts), so every limit holds across all gateways (D16).
 *
 * Every per-client limit counts a client by `clientKey()` (an IPv6 client by its /64). Failures
 * of a secret (a code, a password) count per (account, client): a client that fails too often is
 * refused for that account, nobody else. Across clients an account backs off instead of locking:
 * past a few failures a day, clients that never signed in to the account wait a growing delay
 * between tries and stop at a daily cap, while a client the account signed in from before goes
 * on (D24: nobody else's wrong tries lock an account out or void its code).
 */
import type { Limit } from "../http/rate-limit.ts";
import type { ClientKey } from "../http/client-key.ts";
import { accountError } from "../http/errors.ts";
import type { Ctx } from "./types.ts";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

export const defaultLimits = {
  codeSendsPerIp: { name: "code-send-ip", max: 10, windowMs: MINUTE },
  /** One client's codes for one email: its own allowance, which no other client can spend. */
  codeSendsPerEmailClient: { name: "code-send-email-client", max: 5, windowMs: HOUR },
  /** Codes for one email from clients it never signed in from (a cap on mail to one address). */
  codeSendsPerEmail: { name: "code-send-email", max: 5, windowMs: HOUR },
  /** All code mail from such clients together: a cap on how much mail the server can be made to send. */
  codeSendsOverall: { name: "code-send-all", max: 300, windowMs: MINUTE },
  loginsPerIp: { name: "login-ip", max: 30, windowMs: MINUTE },
  /** Wrong codes of one email from one client (two codes' five tries each). */
  wrongCodesPerEmailClient: { name: "wrong-code-email-client", max: 10, windowMs: HOUR },
  wrongPasswordsPerEmailClient: { name: "wrong-password-email-client", max: 10, windowMs: HOUR },
  /** Each challenge is a database row until it expires. */
  challengesPerIp: { name: "challenge-ip", max: 30, windowMs: MINUTE },
  refreshesPerIp: { name: "refresh-ip", max: 60, windowMs: MINUTE },
} satisfies Record<string, Limit>;

export type Limits = Record<keyof typeof defaultLimits, Limit>;

/**
 * How an account backs off failures from clients it never signed in from. In a window of
 * `windowMs` from its first such failure, the first `free` tries go at once; after try n ≥ `free`
 * the next waits `firstDelayMs · 2^(n − free)` (at most `maxDelayMs`) after it; past `cap` tries
 * such clients are refused until the window ends.
 */
export interface Backoff {
  windowMs: number;
  free: number;
  cap: number;
  firstDelayMs: number;
  maxDelayMs: number;
}

export const defaultBackoffs = {
  /** 20 wrong codes a day: one chance in 50,000 a day of guessing a 6-digit code. */
  code: { windowMs: DAY, free: 5, cap: 20, firstDelayMs: 15_000, maxDelayMs: 15 * MINUTE },
  password: { windowMs: DAY, free: 10, cap: 50, firstDelayMs: 15_000, maxDelayMs: 15 * MINUTE },
} satisfies Record<string, Backoff>;

export type BackoffKind = keyof typeof defaultBackoffs;
export type Backoffs = Record<BackoffKind, Backoff>;

/** How long a client an account signed in from stays one it knows (exempt from the backoff). */
export const KNOWN_CLIENT_MS = 90 * DAY;

export const rateLimited = (retryAfter: number, message = "Too many requests; try again later") =>
  accountError("RATE_LIMITED", message, { "Retry-After": String(retryAfter) });

/** Counts one event against `limit` for `key`, or throws RATE_LIMITED with Retry-After. */
export async function enforce(ctx: Pick<Ctx, "limiter">, limit: Limit, key: string): Promise<void> {
  const verdict = await ctx.limiter.hit(limit, key);
  if (!verdict.ok) throw rateLimited(verdict.retryAfter);
}

/** The key of one (account, client) counter: an email holds no whitespace, so a newline parts the two. */
export const pairKey = (account: string, client: ClientKey) => `${account}\n${client}`;
