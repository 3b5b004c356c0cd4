/**
 * A real anvil with our contracts deployed, and the ChainContext the server would build over it,
 * for `app.handle()` tests of chain-backed routes.
 */
import { afterAll } from "bun:test";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { parseEther } from "viem";
import type { ChainContext } from "../../src/chain/types.ts";
import { httpEndpoint } from "../../src/chain/endpoint.ts";
import { deployContracts } from "../../src/chain/deploy.ts";
import { startAnvil, type Anvil } from "./anvil.ts";

export interface TestChain {
  anvil: Anvil;
  context: ChainContext;
  admin: ReturnType<typeof privateKeyToAccount>;
  operator: ReturnType<typeof privateKeyToAccount>;
  adminKey: `0x${string}`;
  deployBlock: bigint;
}

export async function testChain(): Promise<TestChain> {
  const anvil = await startAnvil();
  afterAll(() => anvil.stop());
  const adminKey = generatePrivateKey();
  const admin = privateKeyToAccount(adminKey);
  const operator = privateKeyToAccount(generatePrivateKey());
  await anvil.fund(admin.address, parseEther("1000000"));
  await anvil.fund(operator.address, parseEther("1000"));
  const deployment = await deployContracts(anvil.wallet(admin), anvil.publicClient, operator.address);
  const context: ChainContext = {
    chain: anvil.chain,
    upstream: httpEndpoint(anvil.url),
    publicClient: anvil.publicClient,
    operator: anvil.wallet(operator),
    contracts: deployment.contracts,
    embedded: true,
  };
  return { anvil, context, admin, adminKey, operator, deployBlock: BigInt(deployment.block) };
}
