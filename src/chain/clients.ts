/** viem clients for a chain URL: one definition used by the server, the CLI and the SDK. */
import { createPublicClient, createWalletClient, defineChain, http, type Account, type Chain } from "viem";

export function defineStowageChain(chainId: number, url: string): Chain {
  return defineChain({
    id: chainId,
    name: chainId === 985 ? "Stowage chain" : `chain ${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [url] } },
  });
}

/** Polls fast on the embedded chain (it mines each transaction at once), politely elsewhere. */
export function chainClients(chainId: number, url: string, fast: boolean) {
  const chain = defineStowageChain(chainId, url);
  const transport = http(url, { retryCount: 2, timeout: 15_000 });
  const pollingInterval = fast ? 25 : 2000;
  return {
    chain,
    publicClient: createPublicClient({ chain, transport, pollingInterval }),
    wallet: (account: Account) => createWalletClient({ account, chain, transport, pollingInterval }),
  };
}
