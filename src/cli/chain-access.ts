/**
 * How the command line reaches the chain: the RPC from STOWAGE_CHAIN_RPC or the running embedded
 * chain of the data dir (through its socket in the data dir: D14, no port), the admin key from config or `DATA_DIR/secrets/admin.key`, and the
 * contracts from config or `DATA_DIR/chain/deployment.json`. The server is not asked.
 */
import { privateKeyToAccount } from "viem/accounts";
import type { Config } from "../config.ts";
import { readChainKey } from "../datadir/secrets.ts";
import { chainClients, pollingOf } from "../chain/clients.ts";
import { configuredDeployment, type Deployment } from "../chain/deployment.ts";
import { readDevnetRecord, socketPath } from "../chain/devnet.ts";
import { httpEndpoint, ipcEndpoint, rpcCall, type RpcEndpoint } from "../chain/endpoint.ts";

export class CliError extends Error {
  override name = "CliError";
}

export async function chainEndpoint(config: Config): Promise<{ endpoint: RpcEndpoint; embedded: boolean }> {
  if (config.chainRpc) return { endpoint: httpEndpoint(config.chainRpc), embedded: false };
  const endpoint = readDevnetRecord(config.dataDir) && ipcEndpoint(socketPath(config.dataDir), 5000);
  const alive = endpoint && (await rpcCall<string>(endpoint, "eth_chainId").catch(() => undefined));
  if (!endpoint || !alive) {
    endpoint?.close();
    throw new CliError(`the embedded chain of ${config.dataDir} is not running: start \`stowage serve --data-dir ${config.dataDir}\` first, or set STOWAGE_CHAIN_RPC`);
  }
  return { endpoint, embedded: true };
}

export async function adminAccess(config: Config) {
  const { endpoint, embedded } = await chainEndpoint(config);
  const deployment: Deployment | undefined = configuredDeployment(config);
  if (!deployment) throw new CliError(`no contracts known for this data dir (${config.dataDir}/chain/deployment.json): run \`stowage chain deploy\` or set STOWAGE_*_ADDRESS`);
  const admin = privateKeyToAccount(config.adminKey ?? readChainKey(config.dataDir, "admin"));
  const { publicClient, wallet } = chainClients(config.chainId, endpoint, pollingOf(config.chainPoll, embedded));
  return { endpoint, embedded, deployment, admin, publicClient, wallet: wallet(admin) };
}
