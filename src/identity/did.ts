/**
 * did:ethr identifiers (D2): canonically `did:ethr:0x3d9:<EIP-55 address>` with the chain id in
 * lower-case hex. `did:ethr:<address>`, a decimal or named network part and any letter case are
 * accepted and canonicalised; a DID of another chain is refused.
 *
 * @example
 *   parseDid("did:ethr:0xabc…", 985).canonical // "did:ethr:0x3d9:0xAbC…"
 */
import { getAddress, isAddress, type Address } from "viem";

export class InvalidDid extends Error {
  override name = "InvalidDid";
  readonly code = "INVALID_DID";
}

export interface Did {
  address: Address;
  canonical: string;
}

export const canonicalDid = (address: Address, chainId: number) => `did:ethr:0x${chainId.toString(16)}:${getAddress(address)}`;

export function parseDid(did: string, chainId: number): Did {
  const parts = did.trim().split(":");
  if (parts.length < 3 || parts.length > 4 || parts[0]?.toLowerCase() !== "did" || parts[1]?.toLowerCase() !== "ethr") {
    throw new InvalidDid(`not a did:ethr identifier: ${did.slice(0, 80)}`);
  }
  const address = parts[parts.length - 1] as string;
  if (!isAddress(address, { strict: false })) throw new InvalidDid(`bad address in DID: ${address.slice(0, 60)}`);
  if (parts.length === 4) {
    const network = (parts[2] as string).toLowerCase();
    const id = /^0x[0-9a-f]+$/.test(network) ? Number.parseInt(network, 16) : /^\d+$/.test(network) ? Number(network) : Number.NaN;
    if (id !== chainId) throw new InvalidDid(`DID is for network ${parts[2]}, this gateway is on chain ${chainId}`);
  }
  return { address: getAddress(address), canonical: canonicalDid(address as Address, chainId) };
}

/** A DID or a bare address, as the command line accepts. */
export function parseDidOrAddress(value: string, chainId: number): Did {
  if (isAddress(value, { strict: false })) return { address: getAddress(value), canonical: canonicalDid(value as Address, chainId) };
  return parseDid(value, chainId);
}

/** The identity a DID names, whatever its spelling, as a key (the lower-case address); the raw text
 * when it names none. For limits and caches, not for authorization. */
export function didAddressKey(did: string): string {
  const last = did.trim().split(":").pop() ?? "";
  return isAddress(last, { strict: false }) ? last.toLowerCase() : did.trim().toLowerCase();
}
