/**
 * A quota record as the Proxy keeps it (D7), read by its per-kind view. The server's metering and
 * the SDK both read records this way.
 */
import type { Address, Chain, PublicClient, Transport } from "viem";
import { proxyAbi } from "./artifacts/index.ts";

export type QuotaKind = "space" | "traffic";

export interface ChainRecord {
  /** +1 per purchase or grant of this kind. */
  nonce: bigint;
  /** The user's deposit, in wei. */
  deposit: bigint;
  purchased: bigint;
  free: bigint;
  /** Unix seconds. */
  expire: bigint;
  /** Block time when the current period began. */
  periodStart: bigint;
}

const VIEW = { space: "spaceRecord", traffic: "trafficRecord" } as const;

export async function readRecord(publicClient: PublicClient<Transport, Chain>, proxy: Address, user: Address, kind: QuotaKind): Promise<ChainRecord> {
  const [nonce, deposit, purchased, free, expire, periodStart] = await publicClient.readContract({ address: proxy, abi: proxyAbi, functionName: VIEW[kind], args: [user] });
  return { nonce, deposit, purchased, free, expire, periodStart };
}
