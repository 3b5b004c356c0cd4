/**
 * SDK: the chain side of a gateway. Discover it with `GET /chain`, then deposit, withdraw, manage
 * DID delegates and read prices and quota records, all through the gateway's public RPC with the
 * user's own key (the gateway never holds it).
 *
 * @example
 *   const gw = await connectGateway("https://gw.example", { account })
 *   await gw.deposit(parseEther("1"))
 *   const { space } = await gw.records()
 */
import { createPublicClient, createWalletClient, http, type Account, type Address, type Chain, type Hash, type PublicClient, type Transport, type WalletClient } from "viem";
import { didRegistryAbi, proxyAbi } from "../chain/artifacts/index.ts";
import { defineStowageChain } from "../chain/define.ts";
import { readRecord } from "../chain/records.ts";
import { DELEGATE_TYPES } from "../identity/delegates.ts";
import type { ChainRecord, DelegateType } from "./wire.ts";

export type { ChainRecord, DelegateType };

export interface GatewayInfo {
  chainId: number;
  rpcUrl: string;
  contracts: { proxy: Address; didRegistry: Address; directory: Address };
  /** The operator address: vouchers name it as the seller. */
  seller: Address;
  /** The gateway's age recipient, which priced encrypted entries escrow their keys to (D20). */
  ageRecipient?: string;
}

/** A quota record as the chain keeps it (D7). */
export type QuotaRecord = ChainRecord;

export interface ConnectOptions {
  account?: Account;
  /** A fetch to use instead of the global one (tests, proxies). */
  fetch?: typeof fetch;
  /**
   * Where transactions go instead of the gateway's RPC: a browser wallet's EIP-1193 provider
   * (`custom(window.ethereum)`) with `account` its address, since such wallets send transactions
   * themselves and do not hand out signed ones. Reads stay on the gateway's RPC.
   */
  walletTransport?: Transport;
}

export async function discoverGateway(baseUrl: string, opts: Pick<ConnectOptions, "fetch"> = {}): Promise<GatewayInfo> {
  const res = await (opts.fetch ?? fetch)(`${baseUrl.replace(/\/$/, "")}/chain`);
  if (!res.ok) throw new Error(`GET /chain answered ${res.status}`);
  return (await res.json()) as GatewayInfo;
}

/** A connected gateway, spelled out: the package's declarations (packages/sdk) cannot print the
 * inferred type (viem's clients are too large to serialise). */
export interface Gateway {
  info: GatewayInfo;
  publicClient: PublicClient<Transport, Chain>;
  /** For the other SDK modules (directory): the account's wallet client. */
  wallet(): WalletClient<Transport, Chain, Account>;
  /** Waits for a sent transaction's success. */
  confirm(sent: Promise<Hash>): Promise<Hash>;
  deposit(wei: bigint): Promise<Hash>;
  withdraw(wei: bigint): Promise<Hash>;
  addDelegate(delegate: Address, validitySeconds: bigint, type?: DelegateType): Promise<Hash>;
  revokeDelegate(delegate: Address, type?: DelegateType): Promise<Hash>;
  prices(): Promise<{ space: bigint; traffic: bigint }>;
  records(address?: Address): Promise<{ space: ChainRecord; traffic: ChainRecord }>;
}

export async function connectGateway(baseUrl: string, opts: ConnectOptions = {}): Promise<Gateway> {
  const info = await discoverGateway(baseUrl, opts);
  const chain = defineStowageChain(info.chainId, info.rpcUrl);
  const transport = http(info.rpcUrl, opts.fetch ? { fetchFn: opts.fetch } : {});
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 250 });
  const { proxy, didRegistry } = info.contracts;

  const wallet = () => {
    if (!opts.account) throw new Error("this operation needs an account: connectGateway(url, { account })");
    return createWalletClient({ account: opts.account, chain, transport: opts.walletTransport ?? transport });
  };
  /** Waits for a sent transaction's success. Each call simulates first, so a revert comes back
   * with its reason before anything is sent. */
  async function confirm(sent: Promise<Hash>): Promise<Hash> {
    const hash = await sent;
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`);
    return hash;
  }
  const account = () => wallet().account;
  const me = (address?: Address) => address ?? wallet().account.address;

  return {
    info,
    publicClient,
    /** For the other SDK modules (directory): the account's wallet client and the receipt wait. */
    wallet,
    confirm,
    deposit: async (wei: bigint) =>
      confirm(publicClient.simulateContract({ account: account(), address: proxy, abi: proxyAbi, functionName: "deposit", value: wei }).then(({ request }) => wallet().writeContract(request))),
    withdraw: async (wei: bigint) =>
      confirm(publicClient.simulateContract({ account: account(), address: proxy, abi: proxyAbi, functionName: "withdraw", args: [wei] }).then(({ request }) => wallet().writeContract(request))),
    /** Lets `delegate` sign for the account's DID (ERC-1056 addDelegate). */
    addDelegate: async (delegate: Address, validitySeconds: bigint, type: DelegateType = "sigAuth") =>
      confirm(publicClient.simulateContract({ account: account(), address: didRegistry, abi: didRegistryAbi, functionName: "addDelegate", args: [me(), DELEGATE_TYPES[type], delegate, validitySeconds] }).then(({ request }) => wallet().writeContract(request))),
    revokeDelegate: async (delegate: Address, type: DelegateType = "sigAuth") =>
      confirm(publicClient.simulateContract({ account: account(), address: didRegistry, abi: didRegistryAbi, functionName: "revokeDelegate", args: [me(), DELEGATE_TYPES[type], delegate] }).then(({ request }) => wallet().writeContract(request))),
    /** Unit prices in wei per byte (spec 4.1 rule 8). */
    async prices() {
      const [space, traffic] = await Promise.all([
        publicClient.readContract({ address: proxy, abi: proxyAbi, functionName: "spacePrice" }),
        publicClient.readContract({ address: proxy, abi: proxyAbi, functionName: "trafficPrice" }),
      ]);
      return { space, traffic };
    },
    async records(address?: Address) {
      const user = me(address);
      const [space, traffic] = await Promise.all([readRecord(publicClient, proxy, user, "space"), readRecord(publicClient, proxy, user, "traffic")]);
      return { space, traffic };
    },
  };
}

