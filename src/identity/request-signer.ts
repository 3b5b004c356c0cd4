/**
 * Recovers the signer of a restricted call's `Request` (D5) on every upload, delete and key call:
 * viem's `hashTypedData` spent ≈ 350–400 µs per call validating and ABI-encoding the message and
 * re-deriving the domain and type hashes, which never change for one gateway (a 4 KiB
 * upload's two recoveries were ≈ 25 % of its server CPU). Here the domain separator and the type
 * hash are computed once and the struct hash is built by hand: five keccaks, ≈ 70 µs. The curve
 * work is signerOfDigest's. The answer is exactly viem's hash recovered, refusals included:
 * test/identity/request-signer.test.ts compares both on random keys and messages.
 *
 * @example
 *   const signerOf = requestSigner(domain)
 *   const signer = signerOf({ did, token, requestID, action, payload }, signature) // throws on a bad one
 */
import { keccak_256 } from "@noble/hashes/sha3.js";
import { hexToBytes, isHex, type Address, type Hex, type TypedDataDomain } from "viem";
import { digestPrefix, isSignature, storageTypes, typeHashOf, UINT64_MAX, type RequestMessage } from "./eip712.ts";
import { signerOfDigest } from "./signer.ts";

const utf8 = new TextEncoder();
const REQUEST_TYPE = typeHashOf("Request");

/** The field order of storageTypes.Request, which the struct below follows: a change there must show here. */
const ORDER = "did,token,requestID,action,payload";
if (storageTypes.Request.map((f) => f.name).join(",") !== ORDER) throw new Error("storageTypes.Request changed: update request-signer.ts");

/** The signer of `Request(did, token, requestID, action, payload)` signed as `signature` (65 bytes, v 0/1/27/28), checksummed. */
export function requestSigner(domain: TypedDataDomain): (message: RequestMessage, signature: Hex) => Address {
  // 0x1901 ‖ domainSeparator ‖ structHash: the first 34 bytes are this gateway's constant.
  const prefix = digestPrefix(domain);

  return (m, signature) => {
    if (m.requestID < 0n || m.requestID > UINT64_MAX) throw new Error(`requestID ${m.requestID} is not a uint64`);
    if (!isHex(m.token, { strict: true })) throw new Error("token is not hex");
    if (!isSignature(signature)) throw new Error("invalid signature length"); // before any hashing
    // typeHash ‖ keccak(did) ‖ keccak(token) ‖ requestID (uint64, left-padded) ‖ keccak(action) ‖ keccak(payload)
    const struct = new Uint8Array(192);
    struct.set(REQUEST_TYPE, 0);
    struct.set(keccak_256(utf8.encode(m.did)), 32);
    struct.set(keccak_256(hexToBytes(m.token)), 64);
    new DataView(struct.buffer).setBigUint64(120, m.requestID);
    struct.set(keccak_256(utf8.encode(m.action)), 128);
    struct.set(keccak_256(utf8.encode(m.payload)), 160);
    const envelope = new Uint8Array(66);
    envelope.set(prefix);
    envelope.set(keccak_256(struct), 34);
    return signerOfDigest(keccak_256(envelope), signature);
  };
}
