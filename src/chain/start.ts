/**
 * Starts the chain part of the server: the embedded devnet unless STOWAGE_CHAIN_RPC is set, the
 * clients, the operator wallet, and the contracts (deployed on the embedded chain's first start,
 * checked with eth_getCode on every start).
 */
import { parseEther, type Address } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { Config } from "../config.ts";
import type { Logger } from "../log.ts";
import type { Secrets } from "../datadir/secrets.ts";
import { chainClients, pollingOf, type RpcObserver } from "./clients.ts";
import { checkDeployed, deployContracts } from "./deploy.ts";
import { configuredDeployment, writeDeployment, type Deployment } from "./deployment.ts";
import { startDevnet, type Devnet, type EngineChoice } from "./devnet.ts";
import { httpEndpoint, rpcCall, type RpcEndpoint } from "./endpoint.ts";
import type { ChainContext } from "./types.ts";

export interface RunningChain {
  context: ChainContext;
  deployment: Deployment;
  health(): Promise<{ block: number; embedded: boolean }>;
  stop(): Promise<void>;
}

/** Gas money for the embedded chain's own keys; users get theirs from `stowage admin fund`. */
const EMBEDDED_BALANCE = { admin: parseEther("1000000"), operator: parseEther("1000") };

async function topUp(endpoint: RpcEndpoint, address: Address, wei: bigint) {
  const balance = BigInt(await rpcCall<string>(endpoint, "eth_getBalance", [address, "latest"]));
  if (balance < wei / 2n) await rpcCall(endpoint, "anvil_setBalance", [address, `0x${wei.toString(16)}`]);
}

export async function startChain(config: Config, secrets: Secrets, log: Logger, onRpc?: RpcObserver): Promise<RunningChain> {
  const embedded = config.chainRpc === undefined;
  const devnet: Devnet | undefined = embedded ? await startDevnet({ dataDir: config.dataDir, chainId: config.chainId, log, engine: config.embeddedChain as EngineChoice }) : undefined;
  try {
    const endpoint = devnet?.endpoint ?? httpEndpoint(config.chainRpc as string);
    const { chain, publicClient, wallet } = chainClients(config.chainId, endpoint, pollingOf(config.chainPoll, embedded), onRpc);
    const remoteId = await publicClient.getChainId();
    if (remoteId !== config.chainId) throw new Error(`STOWAGE_CHAIN_RPC serves chain ${remoteId}, but STOWAGE_CHAIN_ID is ${config.chainId}`);

    const operatorAccount = privateKeyToAccount(secrets.operatorKey);
    const adminAccount = privateKeyToAccount(secrets.adminKey);
    if (embedded) {
      await topUp(endpoint, adminAccount.address, EMBEDDED_BALANCE.admin);
      await topUp(endpoint, operatorAccount.address, EMBEDDED_BALANCE.operator);
    }

    let deployment = configuredDeployment(config);
    if (!deployment) {
      if (!embedded) throw new Error("no contracts for STOWAGE_CHAIN_RPC: run `stowage chain deploy`, or set STOWAGE_PROXY_ADDRESS, STOWAGE_DID_REGISTRY_ADDRESS and STOWAGE_DIRECTORY_ADDRESS");
      log.info("deploying contracts to the embedded chain");
      const started = Date.now();
      deployment = await deployContracts(wallet(adminAccount), publicClient, operatorAccount.address, (line) => log.info("deployed", { line: line.trim() }));
      // On disk before it is recorded, or a kill -9 in between would leave a record of
      // contracts the restarted chain never had.
      await devnet?.saved(started);
      writeDeployment(config.dataDir, deployment);
    }
    if (deployment.chainId !== config.chainId) throw new Error(`the contracts in DATA_DIR/chain/deployment.json are on chain ${deployment.chainId}, not ${config.chainId}`);
    await checkDeployed(publicClient, deployment);

    const { gasLimit } = await publicClient.getBlock();
    const context: ChainContext = {
      chain,
      upstream: endpoint,
      publicUpstream: devnet?.publicEndpoint,
      simulate: devnet?.simulate,
      readLogs: devnet?.readLogs,
      blockGasLimit: gasLimit,
      publicClient,
      operator: wallet(operatorAccount),
      contracts: deployment.contracts,
      embedded,
    };
    return {
      context,
      deployment,
      health: async () => ({ block: Number(await publicClient.getBlockNumber()), embedded }),
      stop: async () => devnet?.stop(),
    };
  } catch (err) {
    await devnet?.stop();
    throw err;
  }
}
