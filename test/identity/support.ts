/**
 * Shared by the recovery tests (request-signer, voucher-signer): two domains to sign on, a
 * signature with another v, and the answer of a recovery or "refused" where it throws, so that
 * ours and viem's can be compared as plain values; and libsecp256k1, installed where missing.
 */
import { join } from "node:path";
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

/** Whether the loader knows Debian's libsecp256k1 (so.1 on Debian 12, so.2 on 13): signer.ts's native recovery. */
function haveLibsecp256k1(): boolean {
  const ldconfig = Bun.which("ldconfig") ?? "/sbin/ldconfig";
  const out = Bun.spawnSync([ldconfig, "-p"], { stdout: "pipe", stderr: "ignore" });
  return out.success && /\slibsecp256k1\.so\.[12] /.test(out.stdout.toString());
}

/** Installs libsecp256k1 where it is missing (scripts/secp256k1.sh: apt, under a lock), so that the
 * native recovery's tests run on every machine rather than pass on @noble where it is absent. */
export async function ensureLibsecp256k1(): Promise<void> {
  if (haveLibsecp256k1()) return;
  const proc = Bun.spawn(["sh", join(import.meta.dir, "..", "..", "scripts", "secp256k1.sh"), "install"], { stdout: "inherit", stderr: "inherit" });
  if ((await proc.exited) !== 0) throw new Error("installing libsecp256k1 failed (scripts/secp256k1.sh install): see the output above");
}
