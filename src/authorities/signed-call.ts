/**
 * The spec's signed call as an authority (authority.ts): a restricted call whose signature is
 * verified (sessions.ts `check`) and a traffic voucher whose payer may sign for the DID, neither
 * claimed yet. Its look reads the call's session and the voucher's count (refusing a replay, a
 * used or a spent voucher) with the quota's first look, before the body. Both are decided where
 * the file is recorded, by conditional inserts in its transaction: of two uploads racing with one
 * requestID or voucher, the second stores its bytes, is refused there and keeps nothing; an upload
 * that fails claims nothing, so its very request (the owner's own signature of this upload) may
 * be sent again.
 *
 * @example
 *   const request = await sessions.check(fields, "upload", caller.did);
 *   const voucher = await vouchers.payerOf(fields, cid);
 *   await pipeline.put(signedCall(caller.did, request, vouchers, voucher), "dfs", name, stream, opts)
 */
import { joined, type Look, together } from "../db/sql.ts";
import type { Did } from "../identity/did.ts";
import { failure } from "../failure.ts";
import type { Authority, AuthorityStep } from "./authority.ts";
import type { PeekedVoucher, SignedVoucher, Vouchers } from "./vouchers.ts";

export function signedCall(who: Did, request: { claim: AuthorityStep; look: Look<void> }, vouchers: Pick<Vouchers, "peekLook" | "claimPeeked" | "settle">, voucher: SignedVoucher): Authority {
  /** The voucher as the look found it: what it allows, and the count its claim takes as base. */
  let offered: PeekedVoucher | undefined;
  const peek = vouchers.peekLook(voucher);
  const peeked = (): PeekedVoucher => {
    if (!offered) throw new Error("a signed call's look was not read before its use");
    return offered;
  };
  return {
    who,
    look: joined(request.look, { ...peek, read: (row) => void (offered = peek.read(row)) }),
    get allowance() {
      const { allowance } = peeked();
      return { bytes: allowance, refusal: () => failure("quota-exceeded", `the voucher allows ${allowance} more bytes`) };
    },
    // The requestID's claim waits behind its session's row lock: READ COMMITTED suffices.
    claim: (tx) => together(request.claim(tx), vouchers.claimPeeked(tx, peeked())),
    count: (moved) => (tx) => vouchers.settle(peeked(), moved, tx),
  };
}
