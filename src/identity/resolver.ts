/**
 * Who may sign for a DID (D2): for did:ethr, the identity's current owner in the ERC-1056
 * registry or one of its valid `sigAuth`/`veriKey` delegates. Answers are cached for at most
 * `cacheMs` (10 s by default), so a revoked delegate stops working within that time.
 *
 * @example
 *   const resolver = ethrResolver({ publicClient, registry, chainId: 985 })
 *   await resolver.canSign(parseDid(did, 985), signer) // true | false
 */
import { isAddress, isAddressEqual, type Address, type Chain, type PublicClient, type Transport } from "viem";
import { didRegistryAbi } from "../chain/artifacts/index.ts";
import { DELEGATE_TYPES } from "./delegates.ts";
import { InvalidDid, parseDid, type Did } from "./did.ts";

/** Other DID methods plug in here. */
export interface DidResolver {
  canSign(did: Did, signer: Address): Promise<boolean>;
}

export function ethrResolver({ publicClient, registry, cacheMs = 10_000, now = Date.now }: { publicClient: PublicClient<Transport, Chain>; registry: Address; cacheMs?: number; now?: () => number }): DidResolver {
  const cache = new Map<string, { at: number; ok: Promise<boolean> }>();

  async function lookup(identity: Address, signer: Address): Promise<boolean> {
    const owner = await publicClient.readContract({ address: registry, abi: didRegistryAbi, functionName: "identityOwner", args: [identity] });
    if (isAddressEqual(owner, signer)) return true;
    const checks = Object.values(DELEGATE_TYPES).map((type) =>
      publicClient.readContract({ address: registry, abi: didRegistryAbi, functionName: "validDelegate", args: [identity, type, signer] }),
    );
    return (await Promise.all(checks)).some(Boolean);
  }

  return {
    canSign(did, signer) {
      const key = `${did.address}:${signer.toLowerCase()}`;
      const hit = cache.get(key);
      if (hit && now() - hit.at < cacheMs) return hit.ok;
      const ok = lookup(did.address, signer);
      cache.set(key, { at: now(), ok });
      // A failed lookup is not an answer: don't keep it.
      ok.catch(() => cache.delete(key));
      if (cache.size > 10_000) cache.delete(cache.keys().next().value as string);
      return ok;
    },
  };
}

/**
 * D3: a DID login's session lasts while the key that logged in may still sign for the DID; the
 * account API asks this at each refresh.
 */
export async function keyStillSigns(resolver: DidResolver, chainId: number, session: { did: string | null; signer: string | null }): Promise<boolean> {
  if (!session.did || !session.signer || !isAddress(session.signer)) return false;
  try {
    return await resolver.canSign(parseDid(session.did, chainId), session.signer);
  } catch (err) {
    if (err instanceof InvalidDid) return false;
    throw err;
  }
}
