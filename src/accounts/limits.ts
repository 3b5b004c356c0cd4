/**
 * Rate limits of the login and code endpoints (DESIGN.md D12), as data. `STOWAGE_RATE_LIMITS=off`
 * switches all of them off; the 60-second gap between two codes for one email is a code rule
 * and stays. The counters live in the shared database (shared-rate-limit.ts), so every limit
 * holds across all gateways (D16).
 */
import type { Limit } from "../http/rate-limit.ts";
import { accountError } from "../http/errors.ts";
import type { Ctx } from "./types.ts";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

export const defaultLimits = {
  codeSendsPerIp: { name: "code-send-ip", max: 10, windowMs: MINUTE },
  codeSendsPerEmail: { name: "code-send-email", max: 5, windowMs: HOUR },
  /** All code mail together: a cap on how much mail the server can be made to send. */
  codeSendsOverall: { name: "code-send-all", max: 300, windowMs: MINUTE },
  loginsPerIp: { name: "login-ip", max: 30, windowMs: MINUTE },
  wrongPasswordsPerEmail: { name: "wrong-password-email", max: 10, windowMs: HOUR },
  /** Each challenge is a database row until it expires. */
  challengesPerIp: { name: "challenge-ip", max: 30, windowMs: MINUTE },
  refreshesPerIp: { name: "refresh-ip", max: 60, windowMs: MINUTE },
} satisfies Record<string, Limit>;

export type Limits = Record<keyof typeof defaultLimits, Limit>;

export const rateLimited = (retryAfter: number, message = "Too many requests; try again later") =>
  accountError("RATE_LIMITED", message, { "Retry-After": String(retryAfter) });

/** Counts one event against `limit` for `key`, or throws RATE_LIMITED with Retry-After. */
export async function enforce(ctx: Pick<Ctx, "limiter">, limit: Limit, key: string): Promise<void> {
  const verdict = await ctx.limiter.hit(limit, key);
  if (!verdict.ok) throw rateLimited(verdict.retryAfter);
}
