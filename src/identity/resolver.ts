/**
 * Who may sign for a DID (D2, D21): for did:ethr, the identity's current owner in the ERC-1056
 * registry or one of its valid `sigAuth`/`veriKey` delegates — the identity's own address only
 * while it is the owner. Every credential that acts for a DID asks this on each use, so answers
 * are cached: an answer is at most `cacheMs` old (10 s by default), which bounds how long a
 * revoked delegate or a rotated-away owner key keeps working.
 *
 * The cache is refreshed ahead: a hit past half its age is answered at once while a fresh lookup
 * runs, so a key in steady use never waits for the chain on its requests (uploads and downloads
 * ask on every call); only a key unseen for `cacheMs` waits for a lookup.
 *
 * @example
 *   const resolver = ethrResolver({ publicClient, registry, chainId: 985 })
 *   await resolver.canSign(parseDid(did, 985), signer) // true | false
 */
import { isAddress, isAddressEqual, type Address, type Chain, type PublicClient, type Transport } from "viem";
import { didRegistryAbi } from "../chain/artifacts/index.ts";
import { Unavailable } from "../unavailable.ts";
import { DELEGATE_TYPES } from "./delegates.ts";
import { InvalidDid, parseDid, type Did } from "./did.ts";

/**
 * The registry could not be asked (the chain is down or slow): not a "no", so nobody is refused
 * for good, and not the request's fault. The API edges answer it as 503, try again.
 */
export class RegistryUnavailable extends Unavailable {
  override name = "RegistryUnavailable";
  constructor(detail: string) {
    super("The DID registry did not answer, so who may sign for this DID is unknown; try again shortly", detail);
  }
}

/** Other DID methods plug in here. */
export interface DidResolver {
  canSign(did: Did, signer: Address): Promise<boolean>;
}

/** D2: lookups are cached for at most this long. */
export const RESOLVER_CACHE_MS = 10_000;
/** Distinct (identity, signer) answers kept; past it the oldest goes. */
const CACHE_MAX = 10_000;

interface Entry {
  /** When the lookup behind `ok` began: the chain it read is at least this recent. */
  at: number;
  ok: Promise<boolean>;
  /** A lookup ahead of expiry is under way. */
  renewing?: boolean;
}

export function ethrResolver({ publicClient, registry, cacheMs = RESOLVER_CACHE_MS, now = Date.now }: { publicClient: PublicClient<Transport, Chain>; registry: Address; cacheMs?: number; now?: () => number }): DidResolver {
  const cache = new Map<string, Entry>();

  async function lookup(identity: Address, signer: Address): Promise<boolean> {
    try {
      const owner = await publicClient.readContract({ address: registry, abi: didRegistryAbi, functionName: "identityOwner", args: [identity] });
      if (isAddressEqual(owner, signer)) return true;
      const checks = Object.values(DELEGATE_TYPES).map((type) =>
        publicClient.readContract({ address: registry, abi: didRegistryAbi, functionName: "validDelegate", args: [identity, type, signer] }),
      );
      return (await Promise.all(checks)).some(Boolean);
    } catch (err) {
      throw new RegistryUnavailable((err as Error).message);
    }
  }

  function store(key: string, entry: Entry) {
    cache.delete(key); // re-inserted last: the oldest-first eviction below sees it as new
    cache.set(key, entry);
    if (cache.size > CACHE_MAX) cache.delete(cache.keys().next().value as string);
  }

  return {
    canSign(did, signer) {
      const key = `${did.address}:${signer.toLowerCase()}`;
      const t = now();
      const hit = cache.get(key);
      if (hit && t - hit.at < cacheMs) {
        if (t - hit.at >= cacheMs / 2 && !hit.renewing) {
          hit.renewing = true;
          const ok = lookup(did.address, signer);
          // The old answer stays until the new one is in; a failed renewal leaves it to expire.
          ok.then(
            () => store(key, { at: t, ok }),
            () => void (hit.renewing = false),
          );
        }
        return hit.ok;
      }
      const ok = lookup(did.address, signer);
      store(key, { at: t, ok });
      // A failed lookup is not an answer: don't keep it.
      ok.catch(() => {
        if (cache.get(key)?.ok === ok) cache.delete(key);
      });
      return ok;
    },
  };
}

/**
 * Whether the key a credential recorded (a login's signer, an access key's minter) may still sign
 * for its DID: the account API asks this at each refresh, the S3 API at each request.
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
