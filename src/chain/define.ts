/**
 * The viem `Chain` of a Stowage deployment. Its own module, importing viem alone, so that the SDK
 * (which runs in browsers, D19) can name the chain without pulling in the server's transports
 * (clients.ts reaches node:net through endpoint.ts).
 */
import { defineChain, type Chain } from "viem";

export function defineStowageChain(chainId: number, url?: string): Chain {
  return defineChain({
    id: chainId,
    name: chainId === 985 ? "Stowage chain" : `chain ${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: url ? [url] : [] } },
  });
}
