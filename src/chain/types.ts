/**
 * What the rest of Stowage sees of the chain, embedded or external: clients, the contract
 * addresses and the operator's wallet. Built by `src/chain/start.ts` at server start.
 */
import type { Account, Address, Chain, PublicClient, Transport, WalletClient } from "viem";
import type { RpcEndpoint } from "./endpoint.ts";

export interface ContractAddresses {
  proxy: Address;
  didRegistry: Address;
  directory: Address;
}

export interface ChainContext {
  chain: Chain;
  /** The upstream JSON-RPC (the embedded chain's socket or STOWAGE_CHAIN_RPC); never handed to clients as is. */
  upstream: RpcEndpoint;
  publicClient: PublicClient<Transport, Chain>;
  /** Signs with the operator key: purchases only. */
  operator: WalletClient<Transport, Chain, Account>;
  contracts: ContractAddresses;
  /** True for the chain this server runs itself (anvil or the in-process EVM); false for an external RPC. */
  embedded: boolean;
}
