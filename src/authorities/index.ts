/**
 * Authorities: who may act for a DID and who pays for a transfer. The spec's signed call is a
 * session (a DID login, then restricted calls each with a fresh requestID: sessions.ts) and a
 * traffic voucher bound to one file (vouchers.ts); the access keys of the S3 API and the pinning
 * service are the other authority (src/keys: the account pays). Storage, access keys and the
 * encryption routes verify signed calls here, so none of them needs another's internals; the
 * storage pipeline takes either as one `Authority` (authority.ts), a download's voucher too
 * (download-voucher.ts).
 *
 * @example
 *   import { createSessions, createVouchers } from "../authorities/index.ts";
 *   const sessions = createSessions({ sql, resolver, domain, chainId });
 *   const { signer } = await sessions.restricted(input, "keys", caller);
 */
export { createSessions, openSession, type RestrictedInput, type Sessions } from "./sessions.ts";
export { createVouchers, voucherCounters, type Vouchers } from "./vouchers.ts";
export { accountPays, type Authority, type AuthorityStep, type ReadClaim, type ReadSpending } from "./authority.ts";
export { downloadVoucher } from "./download-voucher.ts";
export { signedCall } from "./signed-call.ts";
