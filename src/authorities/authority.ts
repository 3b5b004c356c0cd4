/**
 * An authority: who a write acts for and pays with, and what it claims and counts when the file
 * is recorded. The storage pipeline (src/storage/pipeline.ts) takes one of these and nothing
 * else of how the request proved itself, so the spec's signed call and an access key (S3, the
 * pinning service) store files through the same steps.
 *
 * Its steps run in the file row's transaction (storage/files.ts Participant's `settle` phase):
 * `claim` before the quota's exact check (a refused claim answers for the write), `count` after
 * it, with the bytes that really came.
 *
 * A read (the pipeline's `read`) charges the account's traffic pool; an authority that spends
 * something of its own on it too (the spec's download voucher) says so in `reads`, which the
 * pipeline claims in the transaction that charges or holds that traffic.
 *
 * @example
 *   await pipeline.put(accountPays(did), "dfs", "a.txt", body, { digest: "md5" })
 */
import type { Look, Queryable } from "../db/sql.ts";
import type { Did } from "../identity/did.ts";

/** A step in the file row's transaction. */
export type AuthorityStep = (tx: Queryable) => Promise<unknown>;

export interface Authority {
  /** The account whose file it is and whose pools pay for its space and traffic. */
  readonly who: Did;
  /** What it reads before the body (a signed call: its session's requestID and its voucher), in
   * the one statement of the quota's first look (the pipeline's admit): a replay or a used
   * voucher is refused there, before any byte is read. Its other fields hold once it was read. */
  readonly look?: Look<unknown>;
  /** The most bytes this authority lets the write bring (a voucher's allowance) and the refusal
   * past it; without one, the gateway's body limit alone bounds the write. */
  readonly allowance?: { readonly bytes: number; refusal(): Error };
  /** Decides what the write spends once (a requestID, a voucher): refused, nothing is recorded. */
  readonly claim?: AuthorityStep;
  /** Counts `moved` bytes against what it spent (a voucher's count). */
  count?(moved: number): AuthorityStep;
  /** What a read spends besides the account's traffic; none: the traffic pool alone pays. */
  readonly reads?: ReadSpending;
}

/** What a read of `length` bytes spends of its authority (a download voucher, accepted once). */
export interface ReadSpending {
  /** Refuses, claiming nothing, a read it could not pay for now, as a look (db/sql.ts) read with
   * the traffic pool's: a body read whole is refused before its content is read (the claim
   * decides all the same). */
  look(length: number): Look<unknown>;
  /** Claims the read in `tx` (the traffic's charge or hold): refused, the transaction rolls back. */
  claim(tx: Queryable, length: number): Promise<ReadClaim>;
}

/** A read's claim, to count what went out or to take back when nothing did. */
export interface ReadClaim {
  /** Counts `sent` bytes (in `tx`, the traffic's settlement, or on its own). */
  settle(sent: number, tx?: Queryable): Promise<void>;
  /** Undoes the claim and a settlement of `counted` bytes in `tx`: the read failed before any
   * byte went out, so the same authority may read again. */
  refund(counted: number, tx: Queryable): Promise<void>;
}

/** An access key's authority (S3, the pinning service): the key already is the account's say-so;
 * the account pays from its own pools, with nothing to claim or count. */
export const accountPays = (who: Did): Authority => ({ who });
