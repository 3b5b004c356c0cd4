/**
 * The spec's download as an authority (authority.ts): the reader's account pays the traffic, and
 * its traffic voucher (vouchers.ts), whose payer was found to read the file and to sign for that
 * account now, is spent on it. The voucher is accepted once (D6): the pipeline claims it in the
 * transaction that charges or holds the traffic, so the claim is on disk before any byte goes out,
 * and counts what went out where the traffic is settled. A read that fails before any byte went
 * out gives both back: the same voucher then downloads once the content reads again.
 *
 * @example
 *   const voucher = await vouchers.payerOf(query, cid)
 *   const body = await pipeline.read(downloadVoucher(reader, vouchers, voucher), file, range)
 */
import type { Did } from "../identity/did.ts";
import type { Authority } from "./authority.ts";
import type { SignedVoucher, Vouchers } from "./vouchers.ts";

export function downloadVoucher(who: Did, vouchers: Pick<Vouchers, "peekLook" | "claim" | "settle" | "refund">, voucher: Pick<SignedVoucher, "payer" | "size">): Authority {
  return {
    who,
    reads: {
      look: (length) => vouchers.peekLook(voucher, length),
      async claim(tx, length) {
        const accepted = await vouchers.claim(tx, voucher, length);
        return {
          settle: (sent, q) => vouchers.settle(accepted, sent, q),
          refund: (counted, q) => vouchers.refund(accepted, counted, q),
        };
      },
    },
  };
}
