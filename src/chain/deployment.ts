/**
 * Where the contracts of this gateway live: `DATA_DIR/chain/deployment.json`, written once when
 * they are deployed (embedded chain at first start, or `stowage chain deploy`), read by the
 * server and the CLI. Config (STOWAGE_*_ADDRESS) wins over the file.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { getAddress, isAddress } from "viem";
import type { Config } from "../config.ts";
import type { ContractAddresses } from "./types.ts";
import { chainDir } from "./devnet.ts";

export interface Deployment {
  chainId: number;
  contracts: ContractAddresses;
  /** Block of the first deployment: indexers start there. */
  block: number;
}

const file = (dataDir: string) => join(chainDir(dataDir), "deployment.json");

export function readDeployment(dataDir: string): Deployment | undefined {
  let text: string;
  try {
    text = readFileSync(file(dataDir), "utf8");
  } catch {
    return undefined;
  }
  const d = JSON.parse(text) as Deployment;
  for (const a of Object.values(d.contracts)) if (!isAddress(a)) throw new Error(`${file(dataDir)} holds a bad address: ${a}`);
  return d;
}

export function writeDeployment(dataDir: string, d: Deployment) {
  mkdirSync(chainDir(dataDir), { recursive: true, mode: 0o700 });
  const tmp = `${file(dataDir)}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(d, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, file(dataDir));
}

/** Addresses from config when all three are set; else from the data dir. */
export function configuredDeployment(config: Config): Deployment | undefined {
  const { proxyAddress, didRegistryAddress, directoryAddress } = config;
  if (proxyAddress && didRegistryAddress && directoryAddress) {
    return { chainId: config.chainId, block: config.contractsBlock, contracts: { proxy: getAddress(proxyAddress), didRegistry: getAddress(didRegistryAddress), directory: getAddress(directoryAddress) } };
  }
  if (proxyAddress || didRegistryAddress || directoryAddress) {
    throw new Error("set all three of STOWAGE_PROXY_ADDRESS, STOWAGE_DID_REGISTRY_ADDRESS and STOWAGE_DIRECTORY_ADDRESS, or none");
  }
  return readDeployment(config.dataDir);
}
