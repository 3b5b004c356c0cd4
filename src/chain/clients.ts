/** viem clients for a chain endpoint: one definition used by the server, the CLI and the SDK. */
import { createPublicClient, createWalletClient, defineChain, type Account, type Chain } from "viem";
import { httpEndpoint, type RpcEndpoint } from "./endpoint.ts";

export function defineStowageChain(chainId: number, url?: string): Chain {
  return defineChain({
    id: chainId,
    name: chainId === 985 ? "Stowage chain" : `chain ${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: url ? [url] : [] } },
  });
}

/** Polls fast on the embedded chain (it mines each transaction at once), politely elsewhere.
 * A string is an HTTP JSON-RPC URL. */
export function chainClients(chainId: number, target: string | RpcEndpoint, fast: boolean) {
  const endpoint = typeof target === "string" ? httpEndpoint(target) : target;
  const chain = defineStowageChain(chainId, typeof target === "string" ? target : undefined);
  const transport = endpoint.transport();
  const pollingInterval = fast ? 25 : 2000;
  return {
    chain,
    publicClient: createPublicClient({ chain, transport, pollingInterval }),
    wallet: (account: Account) => createWalletClient({ account, chain, transport, pollingInterval }),
  };
}
