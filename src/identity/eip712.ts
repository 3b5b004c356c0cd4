/**
 * The EIP-712 messages of the storage protocol (D4, D6). One domain per gateway —
 * `{ name: "Stowage", version: "1", chainId, verifyingContract: <Proxy> }` — so a signature made
 * for one gateway is worthless at another.
 *
 * @example
 *   const domain = storageDomain(chainId, proxy) // the SDK signs on it, signer.ts recovers on it
 */
import { keccak_256 } from "@noble/hashes/sha3.js";
import { getTypesForEIP712Domain, hashDomain, toBytes, type Address, type Hex, type TypedDataDomain } from "viem";

export const storageTypes = {
  Login: [
    { name: "did", type: "string" },
    { name: "token", type: "bytes" },
    { name: "timestamp", type: "uint64" },
  ],
  Request: [
    { name: "did", type: "string" },
    { name: "token", type: "bytes" },
    { name: "requestID", type: "uint64" },
    { name: "action", type: "string" },
    { name: "payload", type: "string" },
  ],
  Voucher: [
    { name: "seller", type: "address" },
    { name: "size", type: "uint64" },
  ],
} as const;

export interface LoginMessage {
  did: string;
  token: Hex;
  timestamp: bigint;
}

export type RequestAction = "upload" | "delete" | "keys" | "age";

export interface RequestMessage {
  did: string;
  token: Hex;
  requestID: bigint;
  /** D5 upload and delete; D18 "keys" mints an S3 access key; D20 "age" replaces a wrapped age identity. */
  action: RequestAction;
  payload: string;
}

/** The storage domain (D4). Typed as its own literal shape, not viem's TypedDataDomain, so the SDK's
 * published declarations that carry it (encryption.ts's EncryptionKey) name no abitype type. */
export const storageDomain = (chainId: number, proxy: Address): { name: "Stowage"; version: "1"; chainId: number; verifyingContract: Address } => ({ name: "Stowage", version: "1", chainId, verifyingContract: proxy });

/** Hand-built EIP-712 digests (request-signer.ts, voucher-signer.ts) share these: the type hash of a
 * storageTypes message without nested types, spelled from its fields, and a gateway's constant
 * first 34 bytes of every digest's preimage, 0x1901 ‖ domainSeparator. */
export const typeHashOf = (name: "Request" | "Voucher"): Uint8Array =>
  keccak_256(new TextEncoder().encode(`${name}(${storageTypes[name].map((f) => `${f.type} ${f.name}`).join(",")})`));

export function digestPrefix(domain: TypedDataDomain): Uint8Array {
  const prefix = new Uint8Array(34);
  prefix.set([0x19, 0x01]);
  // The domain's field list is built at run time (as viem does): abitype cannot infer it, hence the loose generic.
  prefix.set(toBytes(hashDomain<Record<string, unknown>>({ domain, types: { EIP712Domain: getTypesForEIP712Domain({ domain }) } })), 2);
  return prefix;
}

export const UINT64_MAX = (1n << 64n) - 1n;

/** 65-byte signatures only (v 27/28 or 0/1): a malformed one is refused before any curve work. */
export const isSignature = (s: unknown): s is Hex => typeof s === "string" && /^0x[0-9a-fA-F]{130}$/.test(s);
