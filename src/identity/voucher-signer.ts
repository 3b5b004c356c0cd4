/**
 * Recovers the payer of a traffic voucher (D6, D22) on every download and upload: viem's generic
 * `recoverTypedDataAddress` cost ≈ 1.1 ms of a ranged GET — 140 µs re-deriving the domain and type
 * hashes that never change for one gateway, ≈ 930 µs of secp256k1 recovery in viem's
 * @noble/curves 1.9. Here only the struct hash is computed per call (the seller is fixed; the
 * size, the Cid's hash and the expiry vary) and the curve work is signer.ts's (libsecp256k1
 * where it loads, else our pinned @noble/curves 2.4, ≈ 1.7× faster than viem's).
 * The answer is exactly viem's, refusals included: test/identity/voucher-signer.test.ts compares
 * both on random keys, messages and malformed signatures.
 *
 * The old two-field voucher (`legacyVoucherTypes`) is recovered too, only to tell a client that
 * still signs it which type to sign now: it is never accepted.
 *
 * @example
 *   const payerOf = voucherSigner(domain, seller)
 *   const payer = payerOf({ size, cid, expires: 0n }, sign) // throws where recoverTypedDataAddress would
 */
import { keccak_256 } from "@noble/hashes/sha3.js";
import { getAddress, hexToBytes, type Address, type Hex, type TypedDataDomain } from "viem";
import { digestPrefix, isSignature, legacyVoucherTypes, typeHashOf, UINT64_MAX, type VoucherMessage } from "./eip712.ts";
import { signerOfDigest } from "./signer.ts";

/** What a voucher signs besides the gateway's seller. */
export type VoucherTerms = Omit<VoucherMessage, "seller">;

const UINT256_MAX = (1n << 256n) - 1n;
const encoder = new TextEncoder();

/** Refuses terms no signature could be checked against, before any hashing. */
function checkTerms(v: VoucherTerms) {
  if (v.size < 0n || v.size > UINT256_MAX) throw new Error(`size ${v.size} is not a uint256`);
  if (v.expires < 0n || v.expires > UINT64_MAX) throw new Error(`expires ${v.expires} is not a uint64`);
}

/** The envelope `0x1901 ‖ domainSeparator ‖ structHash` of a hand-built digest, its first 34 bytes this gateway's constant. */
function envelopeOf(domain: TypedDataDomain) {
  const envelope = new Uint8Array(66);
  envelope.set(digestPrefix(domain));
  return (struct: Uint8Array) => {
    envelope.set(keccak_256(struct), 34);
    return keccak_256(envelope);
  };
}

/** The EIP-712 digest of `Voucher(seller, size, cid, expires)` at this gateway: what GET /traffichash
 * answers and what a voucher's signature is recovered against. Exactly viem's hashTypedData (the test compares). */
export function voucherDigest(domain: TypedDataDomain, seller: Address): (v: VoucherTerms) => Uint8Array {
  const digestOf = envelopeOf(domain);
  // typeHash ‖ seller (left-padded) ‖ size (uint256) ‖ keccak(cid) ‖ expires (uint64, left-padded),
  // in storageTypes.Voucher's order: the type hash and the seller never change.
  const struct = new Uint8Array(160);
  struct.set(typeHashOf("Voucher"), 0);
  struct.set(hexToBytes(getAddress(seller)), 44);
  const view = new DataView(struct.buffer);
  return (v) => {
    checkTerms(v);
    for (let word = 0; word < 4; word++) view.setBigUint64(64 + 8 * word, (v.size >> BigInt(192 - 64 * word)) & UINT64_MAX);
    struct.set(keccak_256(encoder.encode(v.cid)), 96);
    view.setBigUint64(152, v.expires);
    return digestOf(struct);
  };
}

/** The payer of `Voucher(seller, size, cid, expires)` signed as `signature` (65 bytes, v 0/1/27/28), checksummed. */
export function voucherSigner(domain: TypedDataDomain, seller: Address): (v: VoucherTerms, signature: Hex) => Address {
  const digestOf = voucherDigest(domain, seller);
  return (v, signature) => {
    checkTerms(v);
    if (!isSignature(signature)) throw new Error("invalid signature length"); // before any hashing
    return signerOfDigest(digestOf(v), signature);
  };
}

/** The key that signed the old `Voucher(seller, size)` as `signature`: who an old client meant to pay. */
export function legacyVoucherSigner(domain: TypedDataDomain, seller: Address): (size: bigint, signature: Hex) => Address {
  const digestOf = envelopeOf(domain);
  const struct = new Uint8Array(96);
  struct.set(typeHashOf("Voucher", legacyVoucherTypes.Voucher), 0);
  struct.set(hexToBytes(getAddress(seller)), 44);
  const sizeView = new DataView(struct.buffer, 88, 8);
  return (size, signature) => {
    if (size < 0n || size > UINT64_MAX) throw new Error(`size ${size} is not a uint64`);
    if (!isSignature(signature)) throw new Error("invalid signature length");
    sizeView.setBigUint64(0, size);
    return signerOfDigest(digestOf(struct), signature);
  };
}
