/**
 * `stowage chain deploy`: deploys the contracts to the external chain of STOWAGE_CHAIN_RPC with the
 * admin key (owner and treasury) and the operator address, and records them in the data dir.
 *
 * @example
 *   STOWAGE_CHAIN_RPC=https://rpc.example STOWAGE_ADMIN_KEY=0x… stowage chain deploy --data-dir /var/lib/stowage
 */
import { privateKeyToAccount } from "viem/accounts";
import { ConfigError, parseConfig } from "../config.ts";
import { readChainKey, loadSecrets } from "../datadir/secrets.ts";
import { chainClients, pollingOf } from "../chain/clients.ts";
import { deployContracts } from "../chain/deploy.ts";
import { readDeployment, writeDeployment } from "../chain/deployment.ts";
import { explainChainError } from "../chain/explain.ts";
import { parseArgs } from "./args.ts";
import { CliError } from "./chain-access.ts";

export const chainHelp = `Usage: stowage chain deploy [--data-dir DIR] [--force]

Deploys Proxy, DIDRegistry and Directory to the chain at STOWAGE_CHAIN_RPC (chain id
STOWAGE_CHAIN_ID), owned by the admin key (STOWAGE_ADMIN_KEY, or DATA_DIR/secrets/admin.key) with
the operator of STOWAGE_OPERATOR_KEY (or DATA_DIR/secrets/operator.key, made if missing). The
addresses are written to DATA_DIR/chain/deployment.json, where \`stowage serve\` finds them.
The embedded chain needs no deploy: the server deploys to it on its first start.
--force deploys a new set even when the data dir already records one.`;

export async function runChain(argv: string[], env: Record<string, string | undefined>, out: (l: string) => void = console.log, log: (l: string) => void = (l) => console.error(l)): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== "deploy") throw new ConfigError(sub ? `unknown chain command "${sub}"` : "chain needs a command: deploy");
  const { flags, positionals } = parseArgs(rest, ["--data-dir"], ["--force"]);
  if (positionals.length) throw new ConfigError(`unexpected argument ${positionals[0]}`);
  const config = parseConfig(flags.has("--data-dir") ? ["--data-dir", flags.get("--data-dir") as string] : [], env);
  if (!config.chainRpc) throw new ConfigError("set STOWAGE_CHAIN_RPC to the chain to deploy to (the embedded chain deploys by itself)");
  const existing = readDeployment(config.dataDir);
  if (existing && !flags.has("--force")) {
    throw new CliError(`${config.dataDir}/chain/deployment.json already records contracts on chain ${existing.chainId}; pass --force to deploy a new set`);
  }
  const secrets = loadSecrets(config.dataDir, config);
  const admin = privateKeyToAccount(config.adminKey ?? readChainKey(config.dataDir, "admin"));
  const operator = privateKeyToAccount(secrets.operatorKey);
  const { publicClient, wallet } = chainClients(config.chainId, config.chainRpc, pollingOf(config.chainPoll, false));
  try {
    const remote = await publicClient.getChainId();
    if (remote !== config.chainId) throw new CliError(`${config.chainRpc} serves chain ${remote}, but STOWAGE_CHAIN_ID is ${config.chainId}`);
    log(`deploying to chain ${remote} from ${admin.address} (operator ${operator.address}) …`);
    const deployment = await deployContracts(wallet(admin), publicClient, operator.address, log);
    writeDeployment(config.dataDir, deployment);
    out(`STOWAGE_PROXY_ADDRESS=${deployment.contracts.proxy}`);
    out(`STOWAGE_DID_REGISTRY_ADDRESS=${deployment.contracts.didRegistry}`);
    out(`STOWAGE_DIRECTORY_ADDRESS=${deployment.contracts.directory}`);
    return 0;
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw new CliError(explainChainError(err));
  }
}
