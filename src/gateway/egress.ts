/**
 * The operator-paid allowance of public reads (D17, STOWAGE_PUBLIC_EGRESS): bytes served from an
 * owner's public content per UTC day, counted in the shared database so every gateway of a cluster
 * spends from one allowance. Never the owner's traffic pool: anyone may read public content, so
 * anyone could drain it.
 *
 * Counting is one conditional upsert (a relative update, `bytes = bytes + n` only while the sum
 * stays within the allowance): racing gateways never lose a count nor pass the limit together.
 * A response takes its bytes in slabs (one statement per SLAB, not per block) and gives back
 * what it did not send when it ends; a gateway that dies mid-response leaves at most one slab
 * counted and unsent, which errs on the operator's side.
 */
import type { Sql } from "../db/sql.ts";

const DAY_MS = 86_400_000;
/** Bytes taken from the allowance at a time by a streaming response. */
export const SLAB = 4 * 1024 * 1024;
/** How often one gateway deletes the rows of past days. */
const CLEAR_EVERY_MS = 3_600_000;

const TAKE = `INSERT INTO public_egress (owner, day, bytes) VALUES ($1, $2, $3)
  ON CONFLICT (owner, day) DO UPDATE SET bytes = public_egress.bytes + excluded.bytes
  WHERE public_egress.bytes + excluded.bytes <= $4
  RETURNING bytes`;
const GIVE_BACK = "UPDATE public_egress SET bytes = bytes - $3 WHERE owner = $1 AND day = $2";
const CLEAR_PAST = "DELETE FROM public_egress WHERE day < $1";
const USED = "SELECT bytes FROM public_egress WHERE owner = $1 AND day = $2";

export interface EgressDeps {
  sql: Sql;
  /** Bytes per owner per UTC day; 0 = public reads are off. */
  allowance: number;
  now?: () => number;
}

export function createEgress({ sql, allowance, now = Date.now }: EgressDeps) {
  const dayOf = (t: number) => Math.floor(t / DAY_MS);
  let lastClear = 0;

  /** Takes `n` bytes of `owner`'s allowance for today, if that many are left. */
  async function take(owner: string, n: number): Promise<{ day: number } | undefined> {
    const t = now();
    const day = dayOf(t);
    if (n > allowance) return undefined;
    const row = await sql.get<{ bytes: number }>(TAKE, [owner, day, n, allowance]);
    if (t - lastClear >= CLEAR_EVERY_MS) {
      lastClear = t;
      await sql.run(CLEAR_PAST, [day]);
    }
    return row ? { day } : undefined;
  }

  async function giveBack(owner: string, day: number, n: number): Promise<void> {
    if (n > 0) await sql.run(GIVE_BACK, [owner, day, n]);
  }

  /** Seconds until the allowance starts again (the next UTC day). */
  const retryAfter = () => Math.max(1, Math.ceil((DAY_MS - (now() % DAY_MS)) / 1000));

  /** Bytes of `owner`'s allowance spent today. */
  async function used(owner: string): Promise<number> {
    return (await sql.get<{ bytes: number }>(USED, [owner, dayOf(now())]))?.bytes ?? 0;
  }

  /**
   * The allowance one response spends: the first owner among `owners` with bytes left pays for
   * it all. `spend(n)` before sending n bytes (false: nothing left); `close()` gives back what
   * was taken and not sent. `slab` 0 takes exactly what is spent (one block: one statement).
   */
  function charge(owners: readonly string[], slab = SLAB) {
    let payer: string | undefined;
    let balance = 0;
    let day = 0;
    let closed = false;

    return {
      async spend(n: number): Promise<boolean> {
        if (closed) return false;
        if (balance >= n) {
          balance -= n;
          return true;
        }
        // What is left of the last slab is spent first; a new one covers the rest.
        const missing = n - balance;
        for (const owner of payer ? [payer, ...owners.filter((o) => o !== payer)] : owners) {
          // A slab when one fits, else exactly what is missing (the allowance's last bytes).
          for (const amount of missing < slab ? [slab, missing] : [missing]) {
            const got = await take(owner, amount);
            if (!got) continue;
            payer = owner;
            day = got.day;
            balance = amount - missing;
            return true;
          }
        }
        return false;
      },
      async close(): Promise<void> {
        if (closed) return;
        closed = true;
        if (payer && balance > 0) await giveBack(payer, day, balance);
        balance = 0;
      },
      get payer() {
        return payer;
      },
    };
  }

  return { allowance, charge, retryAfter, used };
}

export type Egress = ReturnType<typeof createEgress>;
