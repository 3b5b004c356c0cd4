/**
 * Shared by the recovery tests (request-signer, voucher-signer): two domains to sign on, a
 * signature with another v, and the answer of a recovery or "refused" where it throws, so that
 * ours and viem's can be compared as plain values.
 */
import type { Hex } from "viem";
import { storageDomain } from "../../src/identity/eip712.ts";

export const domains = [storageDomain(31337, "0x5FbDB2315678afecb367f032d93F642f64180aa3"), storageDomain(8453, "0x00000000000000000000000000000000000000aa")];

/** `sig` with its last byte (v) replaced by `v`. */
export const withV = (sig: Hex, v: number): Hex => `${sig.slice(0, 130)}${v.toString(16).padStart(2, "0")}` as Hex;

/** What `recover` answers, or "refused" where it throws. */
export async function orRefused(recover: () => string | Promise<string>): Promise<string> {
  try {
    return await recover();
  } catch {
    return "refused";
  }
}
