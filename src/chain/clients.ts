/** viem clients for a chain endpoint: one definition used by the server, the CLI and the SDK. */
import { createPublicClient, createWalletClient, type Account, type Transport } from "viem";
import { defineStowageChain } from "./define.ts";
import { httpEndpoint, type RpcEndpoint } from "./endpoint.ts";

export { defineStowageChain };

/** Hears of every JSON-RPC call with its duration (the server's metrics). */
export type RpcObserver = (method: string, seconds: number, ok: boolean) => void;

/**
 * How often receipts are polled for, in ms: STOWAGE_CHAIN_POLL when set, else fast on the embedded
 * chain (it mines each transaction at once) and politely elsewhere (a block is seconds).
 */
export function pollingOf(configured: number | undefined, embedded: boolean): number {
  return configured ?? (embedded ? 25 : 2000);
}

/** Clients polling every `pollingInterval` ms (`pollingOf`). A string is an HTTP JSON-RPC URL. */
export function chainClients(chainId: number, target: string | RpcEndpoint, pollingInterval: number, onRpc?: RpcObserver) {
  const endpoint = typeof target === "string" ? httpEndpoint(target) : target;
  const chain = defineStowageChain(chainId, typeof target === "string" ? target : undefined);
  const transport = onRpc ? timed(endpoint.transport(), onRpc) : endpoint.transport();
  return {
    chain,
    publicClient: createPublicClient({ chain, transport, pollingInterval }),
    wallet: (account: Account) => createWalletClient({ account, chain, transport, pollingInterval }),
  };
}

/** The same transport, timing each request. */
function timed(transport: Transport, onRpc: RpcObserver): Transport {
  return ((params: Parameters<Transport>[0]) => {
    const inner = transport(params);
    return {
      ...inner,
      async request(args: { method: string; params?: unknown }, options?: unknown) {
        const started = performance.now();
        let ok = false;
        try {
          const result = await (inner.request as (a: typeof args, o?: unknown) => Promise<unknown>)(args, options);
          ok = true;
          return result;
        } finally {
          onRpc(args.method, (performance.now() - started) / 1000, ok);
        }
      },
    };
  }) as Transport;
}
