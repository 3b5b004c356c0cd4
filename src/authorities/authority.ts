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
}

/** An access key's authority (S3, the pinning service): the key already is the account's say-so;
 * the account pays from its own pools, with nothing to claim or count. */
export const accountPays = (who: Did): Authority => ({ who });
