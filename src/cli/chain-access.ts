/**
 * How the command line reaches the chain: the RPC from STOWAGE_CHAIN_RPC or the running embedded
 * chain of the data dir, the admin key from config or `DATA_DIR/secrets/admin.key`, and the
 * contracts from config or `DATA_DIR/chain/deployment.json`. The server is not asked.
 */
import { privateKeyToAccount } from "viem/accounts";
import type { Config } from "../config.ts";
import { readChainKey } from "../datadir/secrets.ts";
import { chainClients } from "../chain/clients.ts";
import { configuredDeployment, type Deployment } from "../chain/deployment.ts";
import { readDevnetRecord } from "../chain/devnet.ts";
import { rpcCall } from "../chain/rpc.ts";

export class CliError extends Error {
  override name = "CliError";
}

export async function chainUrl(config: Config): Promise<{ url: string; embedded: boolean }> {
  if (config.chainRpc) return { url: config.chainRpc, embedded: false };
  const record = readDevnetRecord(config.dataDir);
  const alive = record && (await rpcCall<string>(record.url, "eth_chainId").catch(() => undefined));
  if (!record || !alive) {
    throw new CliError(`the embedded chain of ${config.dataDir} is not running: start \`stowage serve --data-dir ${config.dataDir}\` first, or set STOWAGE_CHAIN_RPC`);
  }
  return { url: record.url, embedded: true };
}

export async function adminAccess(config: Config) {
  const { url, embedded } = await chainUrl(config);
  const deployment: Deployment | undefined = configuredDeployment(config);
  if (!deployment) throw new CliError(`no contracts known for this data dir (${config.dataDir}/chain/deployment.json): run \`stowage chain deploy\` or set STOWAGE_*_ADDRESS`);
  const admin = privateKeyToAccount(config.adminKey ?? readChainKey(config.dataDir, "admin"));
  const { publicClient, wallet } = chainClients(config.chainId, url, embedded);
  return { url, embedded, deployment, admin, publicClient, wallet: wallet(admin) };
}
