/**
 * What the rest of Stowage sees of the chain, embedded or external: clients, the contract
 * addresses and the operator's wallet. Built by `src/chain/start.ts` at server start.
 */
import type { Account, Address, Chain, PublicClient, Transport, WalletClient } from "viem";
import type { RpcEndpoint } from "./endpoint.ts";
import type { ReadLogs, Simulate } from "./public-rpc.ts";

export interface ContractAddresses {
  proxy: Address;
  didRegistry: Address;
  directory: Address;
}

export interface ChainContext {
  chain: Chain;
  /** The upstream JSON-RPC (the embedded chain's socket or STOWAGE_CHAIN_RPC); never handed to clients as is. */
  upstream: RpcEndpoint;
  /** Where the public `/rpc` sends what it lets through, when not `upstream`: a connection of its
   * own (anvil's socket), so the public's calls never queue ahead of the server's. */
  publicUpstream?: RpcEndpoint;
  /** Runs the public's eth_call and eth_estimateGas off the event loop (the in-process EVM's
   * simulation threads); without it they go to the chain like other calls. */
  simulate?: Simulate;
  /** Runs the public's eth_getLogs with its cap on logs (the in-process EVM); without it they are
   * sent to the chain and an answer over the cap is dropped. */
  readLogs?: ReadLogs;
  /** The chain's block gas limit when known: the public's gas cap never exceeds it. */
  blockGasLimit?: bigint;
  publicClient: PublicClient<Transport, Chain>;
  /** Signs with the operator key: purchases only. */
  operator: WalletClient<Transport, Chain, Account>;
  contracts: ContractAddresses;
  /** True for the chain this server runs itself (anvil or the in-process EVM); false for an external RPC. */
  embedded: boolean;
}
