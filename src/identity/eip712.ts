/**
 * The EIP-712 messages of the storage protocol (D4, D6, D22). One domain per gateway —
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
  // Bound to one file (its canonical Cid) and optionally expiring, so that a voucher seen in a
  // log or a shared link reads that file once and nothing else of its payer's.
  Voucher: [
    { name: "seller", type: "address" },
    { name: "size", type: "uint256" },
    { name: "cid", type: "string" },
    { name: "expires", type: "uint64" },
  ],
} as const;

/** The voucher clients signed before vouchers named their file: never accepted, only recognised,
 * so that an old client is told which type to sign instead of a bare refusal. */
export const legacyVoucherTypes = {
  Voucher: [
    { name: "seller", type: "address" },
    { name: "size", type: "uint64" },
  ],
} as const;

type Fields = readonly { name: string; type: string }[];

/** A message type without nested types as EIP-712 encodes it: `Voucher(address seller,…)`. */
export const typeText = (name: string, fields: Fields) => `${name}(${fields.map((f) => `${f.type} ${f.name}`).join(",")})`;

/** The voucher's type as error messages spell it, and the old one they name. */
export const VOUCHER_TYPE_TEXT = typeText("Voucher", storageTypes.Voucher);
export const LEGACY_VOUCHER_TYPE_TEXT = typeText("Voucher", legacyVoucherTypes.Voucher);

export interface VoucherMessage {
  seller: Address;
  /** The payer's all-time count of bytes this voucher covers (D6). */
  size: bigint;
  /** The canonical Cid (CIDv1, base32) of the one file the transfer moves. */
  cid: string;
  /** Unix seconds after which it is refused; 0: never. */
  expires: bigint;
}

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
export const typeHashOf = (name: "Request" | "Voucher", fields: Fields = storageTypes[name]): Uint8Array => keccak_256(new TextEncoder().encode(typeText(name, fields)));

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
