/**
 * Quota records as the chain keeps them (D7), read through a cache of at most 1 s so a purchase
 * or a command-line grant shows at once, and the chain's latest block time, which judges expiry.
 */
import { getAddress, type Address, type Chain, type PublicClient, type Transport } from "viem";
import { readRecord, type ChainRecord, type QuotaKind } from "../chain/records.ts";

export type Kind = QuotaKind;
export type { ChainRecord };

export function createRecords({ publicClient, proxy, maxAgeMs = 1000, now = Date.now }: { publicClient: PublicClient<Transport, Chain>; proxy: Address; maxAgeMs?: number; now?: () => number }) {
  const cache = new Map<string, { at: number; value: Promise<ChainRecord> }>();
  let clock: { at: number; value: Promise<bigint> } | undefined;

  const load = (user: Address, kind: Kind) => readRecord(publicClient, proxy, user, kind);

  function cached<T>(entry: { at: number; value: Promise<T> } | undefined, fresh: () => { at: number; value: Promise<T> }) {
    return entry && now() - entry.at < maxAgeMs ? entry : fresh();
  }

  return {
    /** The record of `kind` for `user`; `fresh` skips the cache (purchases need the live nonce). */
    get(user: Address, kind: Kind, fresh = false): Promise<ChainRecord> {
      const key = `${getAddress(user)}:${kind}`;
      const entry = fresh ? undefined : cache.get(key);
      const hit = cached(entry, () => {
        const value = load(user, kind);
        const e = { at: now(), value };
        cache.set(key, e);
        value.catch(() => cache.delete(key));
        return e;
      });
      return hit.value;
    },
    /** The latest block's timestamp (unix seconds). */
    chainTime(): Promise<bigint> {
      clock = cached(clock, () => {
        const value = publicClient.getBlock({ blockTag: "latest" }).then((b) => b.timestamp);
        const e = { at: now(), value };
        value.catch(() => {
          clock = undefined;
        });
        return e;
      });
      return clock.value;
    },
    forget(user: Address) {
      for (const kind of ["space", "traffic"] as const) cache.delete(`${getAddress(user)}:${kind}`);
    },
  };
}

export type Records = ReturnType<typeof createRecords>;

export const weiToGwei = (wei: bigint) => wei / 1_000_000_000n;

/** Bytes a record allows in its period: nothing once expired. */
export function allowance(r: ChainRecord, chainTime: bigint): number {
  if (r.expire <= chainTime) return 0;
  const total = r.purchased + r.free;
  return Number(total > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : total);
}
