/**
 * Transaction nonces of the operator account, allocated from the database (D16): gateways that
 * share one operator key and one database each take the next nonce in one relative update, so
 * purchases on many gateways never reuse a nonce, nor wait for one another's transactions to be
 * mined. The row starts from the chain's pending count; an allocation never goes below the
 * chain's pending count either (a transaction sent by other means moves it), and a nonce whose
 * transaction was never sent is given back when nobody took a later one. When someone did, the
 * nonce cannot come back and the chain would hold every later transaction of the operator behind
 * the gap until their receipts time out: the caller's `fill` sends something else with it.
 *
 * @example
 *   const nonces = operatorNonces({ sql, chainId, address, pending: () => publicClient.getTransactionCount({ address, blockTag: "pending" }), fill: (nonce) => selfTransfer(nonce) })
 *   await nonces.send((nonce) => operator.writeContract({ ...request, nonce }))
 */
import { BaseError, NonceTooLowError, type Address } from "viem";
import type { Sql } from "../db/sql.ts";

const INIT = "INSERT INTO operator_nonces (chain_id, address, next) VALUES ($1, $2, $3) ON CONFLICT (chain_id, address) DO NOTHING";
// Read as `next - 1` after the update: the nonce this call took. CASE, not GREATEST: one text for both dialects.
const TAKE = "UPDATE operator_nonces SET next = CASE WHEN next < $3 THEN $3 + 1 ELSE next + 1 END WHERE chain_id = $1 AND address = $2 RETURNING next - 1 AS nonce";
const GIVE_BACK = "UPDATE operator_nonces SET next = $3 WHERE chain_id = $1 AND address = $2 AND next = $3 + 1";

/** Nonces the node refused as already used: the chain moved past the row (a transaction sent by other means). */
function tooLow(err: unknown): boolean {
  return err instanceof BaseError && err.walk((e) => e instanceof NonceTooLowError) instanceof NonceTooLowError;
}

/** `fill` sends a transaction of no effect with a nonce taken and never used; it logs its own failure. */
export function operatorNonces({ sql, chainId, address, pending, fill }: { sql: Sql; chainId: number; address: Address; pending: () => Promise<number>; fill: (nonce: number) => Promise<void> }) {
  /** The next nonce of the operator, never below the chain's pending count. */
  async function take(): Promise<number> {
    const chainNext = await pending();
    await sql.run(INIT, [chainId, address, chainNext]);
    const row = await sql.get<{ nonce: number }>(TAKE, [chainId, address, chainNext]);
    if (!row) throw new Error("operator_nonces: no row after its insert");
    return row.nonce;
  }

  /** Gives `nonce` back when it is still the last one taken (its transaction was never sent): whether it could. */
  async function giveBack(nonce: number): Promise<boolean> {
    return (await sql.run(GIVE_BACK, [chainId, address, nonce])) > 0;
  }

  /**
   * Sends one operator transaction with a nonce of its own. A node that says the nonce is used
   * makes it take another (the next allocation starts from the chain's count); any other failure
   * gives the nonce back, if it can, or else fills it, and is thrown. A nonce the node called used
   * is never filled: it is not a gap.
   */
  async function send<T>(sign: (nonce: number) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const nonce = await take();
      try {
        return await sign(nonce);
      } catch (err) {
        const used = tooLow(err);
        if (used && attempt < 3) continue;
        const given = await giveBack(nonce).catch(() => false);
        if (!given && !used) await fill(nonce).catch(() => {});
        throw err;
      }
    }
  }

  return { take, giveBack, send };
}

export type OperatorNonces = ReturnType<typeof operatorNonces>;
