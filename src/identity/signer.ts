/**
 * Who signed: every signed message of the protocol (D4, D6 — logins, requests, grants, vouchers)
 * is recovered here from its EIP-712 digest, on the system's libsecp256k1 where it loads and agrees
 * with @noble (secp256k1-native.ts: ≈ 0.05 ms against @noble's ≈ 0.55), else on @noble.
 * Both answer alike, refusals included (test/identity/secp256k1.test.ts compares them; the signer
 * tests compare either with viem). Apart from eip712.ts because of `bun:ffi`: the SDK and the
 * console import the messages' types from there, and their bundles must not see it.
 *
 * @example
 *   const signer = await recoverLogin(domain, { did, token, timestamp }, signature)
 */
import { keccak_256 } from "@noble/hashes/sha3.js";
import { bytesToHex, getAddress, hashTypedData, hexToBytes, type Address, type Hex, type TypedDataDomain } from "viem";
import { isSignature, storageTypes, type LoginMessage } from "./eip712.ts";
import { nativeRecovery, nobleRecoverKey, type RecoverKey } from "./secp256k1-native.ts";

/** r ‖ s of the signature being recovered, decoded into one buffer (both recoveries read it at once). */
const compact = Buffer.alloc(64);

/** A signerOfDigest on `recoverKey`: the function below is this on the library's, or @noble's. */
export function signerBy(recoverKey: RecoverKey): (digest: Uint8Array, signature: Hex) => Address {
  return (digest, signature) => {
    if (!isSignature(signature)) throw new Error("invalid signature length");
    const v = Number.parseInt(signature.slice(130), 16);
    const recovery = v === 0 || v === 27 ? 0 : v === 1 || v === 28 ? 1 : undefined;
    if (recovery === undefined) throw new Error("Invalid yParityOrV value");
    compact.write(signature.slice(2, 130), "hex");
    const key = recoverKey(digest, compact, recovery);
    return getAddress(bytesToHex(keccak_256(key.subarray(1)).subarray(12)));
  };
}

/** Which recovery this process uses, settled at the first signature: the library's or @noble's. */
export const recoveryIn = (): "libsecp256k1" | "@noble" => (nativeRecovery() ? "libsecp256k1" : "@noble");

let signer: ((digest: Uint8Array, signature: Hex) => Address) | undefined;

/**
 * The address whose key signed `digest` as `signature` (65 bytes, v 0/1/27/28), checksummed.
 * Throws where viem's `recoverAddress` would: a bad length or v, r or s 0 or ≥ n, r off the curve
 * (test/identity/voucher-signer.test.ts compares both); a high-s signature is recovered, as viem does.
 */
export function signerOfDigest(digest: Uint8Array, signature: Hex): Address {
  signer ??= signerBy(nativeRecovery() ?? nobleRecoverKey);
  return signer(digest, signature);
}

/** viem's hash, our recovery. Async, as viem's recoverTypedDataAddress was: a refusal is a rejection. */
export const recoverLogin = async (domain: TypedDataDomain, message: LoginMessage, signature: Hex) =>
  signerOfDigest(hexToBytes(hashTypedData({ domain, types: storageTypes, primaryType: "Login", message })), signature);
