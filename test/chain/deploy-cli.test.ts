/**
 * `stowage chain deploy` against an external chain, and the server's chain start in external
 * mode using what it recorded.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { runChain } from "../../src/cli/chain.ts";
import { readDeployment } from "../../src/chain/deployment.ts";
import { startChain } from "../../src/chain/start.ts";
import { ConfigError, parseConfig } from "../../src/config.ts";
import { loadSecrets } from "../../src/datadir/secrets.ts";
import { silentLogger } from "../../src/log.ts";
import { startAnvil } from "../support/anvil.ts";
import { tempDir } from "../support/tmp.ts";

const anvil = await startAnvil();
afterAll(() => anvil.stop());
const adminKey = generatePrivateKey();
await anvil.fund(privateKeyToAccount(adminKey).address, parseEther("100"));

async function deploy(env: Record<string, string>, args: string[] = []) {
  const out: string[] = [];
  const code = await runChain(["deploy", ...args], env, (l) => out.push(l), () => {});
  return { code, out };
}

test("deploys the three contracts, records them, and the server starts on them", async () => {
  const dataDir = tempDir("deploy");
  const env = { STOWAGE_DATA_DIR: dataDir, STOWAGE_CHAIN_RPC: anvil.url, STOWAGE_ADMIN_KEY: adminKey };
  const { code, out } = await deploy(env);
  expect(code).toBe(0);
  const recorded = readDeployment(dataDir);
  expect(recorded?.chainId).toBe(985);
  expect(out).toEqual([
    `STOWAGE_PROXY_ADDRESS=${recorded?.contracts.proxy}`,
    `STOWAGE_DID_REGISTRY_ADDRESS=${recorded?.contracts.didRegistry}`,
    `STOWAGE_DIRECTORY_ADDRESS=${recorded?.contracts.directory}`,
  ]);
  for (const address of Object.values(recorded!.contracts)) expect((await anvil.publicClient.getCode({ address }))?.length).toBeGreaterThan(2);

  // A second deploy would orphan the first set: it needs --force.
  await expect(deploy(env)).rejects.toThrow("--force");

  const config = parseConfig([], env);
  const secrets = loadSecrets(dataDir, config);
  // The operator pays its own gas on a real chain.
  await anvil.fund(privateKeyToAccount(secrets.operatorKey).address, parseEther("1"));
  const chain = await startChain(config, secrets, silentLogger);
  expect(chain.context.embedded).toBe(false);
  expect(chain.context.contracts).toEqual(recorded!.contracts);
  expect(existsSync(join(dataDir, "chain", "running.json"))).toBe(false); // no embedded chain was started
  await chain.stop();
});

test("refuses without STOWAGE_CHAIN_RPC, and on a chain id mismatch", async () => {
  await expect(deploy({ STOWAGE_DATA_DIR: tempDir("deploy") })).rejects.toThrow(ConfigError);
  await expect(deploy({ STOWAGE_DATA_DIR: tempDir("deploy"), STOWAGE_CHAIN_RPC: anvil.url, STOWAGE_ADMIN_KEY: adminKey, STOWAGE_CHAIN_ID: "1" })).rejects.toThrow("serves chain 985");
});

test("the server refuses an external chain without contracts, and contracts that are gone", async () => {
  const dataDir = tempDir("deploy");
  const env = { STOWAGE_DATA_DIR: dataDir, STOWAGE_CHAIN_RPC: anvil.url };
  const config = parseConfig([], env);
  await expect(startChain(config, loadSecrets(dataDir, config), silentLogger)).rejects.toThrow("stowage chain deploy");
  const nowhere = privateKeyToAccount(generatePrivateKey()).address;
  const wrong = parseConfig([], { ...env, STOWAGE_PROXY_ADDRESS: nowhere, STOWAGE_DID_REGISTRY_ADDRESS: nowhere, STOWAGE_DIRECTORY_ADDRESS: nowhere });
  await expect(startChain(wrong, loadSecrets(dataDir, wrong), silentLogger)).rejects.toThrow("no proxy contract");
});
