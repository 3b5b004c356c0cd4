/**
 * The spec's signed call as an authority (authority.ts): a restricted call verified but not yet
 * claimed (sessions.ts `verify`) and a traffic voucher peeked but not yet claimed (vouchers.ts
 * `peek`). Both are decided where the file is recorded, by conditional inserts in its
 * transaction: of two uploads racing with one requestID or voucher, the second stores its bytes,
 * is refused there and keeps nothing; an upload that fails claims nothing, so its very request
 * (the owner's own signature of this upload) may be sent again.
 *
 * @example
 *   const request = await sessions.verify(fields, "upload", caller.did);
 *   const offered = await vouchers.peek(await vouchers.payerOf(fields, cid));
 *   await pipeline.put(signedCall(caller.did, request, vouchers, offered), "dfs", name, stream, opts)
 */
import { together } from "../db/sql.ts";
import type { Did } from "../identity/did.ts";
import { failure } from "../failure.ts";
import type { Authority, AuthorityStep } from "./authority.ts";
import type { PeekedVoucher, Vouchers } from "./vouchers.ts";

export function signedCall(who: Did, request: { claim: AuthorityStep }, vouchers: Pick<Vouchers, "claimPeeked" | "settle">, offered: PeekedVoucher): Authority {
  return {
    who,
    allowance: { bytes: offered.allowance, refusal: () => failure("quota-exceeded", `the voucher allows ${offered.allowance} more bytes`) },
    // The requestID's claim waits behind its session's row lock: READ COMMITTED suffices.
    claim: (tx) => together(request.claim(tx), vouchers.claimPeeked(tx, offered)),
    count: (moved) => (tx) => vouchers.settle(offered, moved, tx),
  };
}
