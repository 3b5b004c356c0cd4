/**
 * Deploys the three contracts: Proxy (owned by the deployer = admin/treasury, with the given
 * operator), DIDRegistry and Directory. One after the other: one key's sends would race for a nonce.
 */
import { getAddress, type Account, type Address, type Chain, type Hash, type PublicClient, type Transport, type WalletClient } from "viem";
import { didRegistryAbi, didRegistryBytecode, directoryAbi, directoryBytecode, proxyAbi, proxyBytecode } from "./artifacts/index.ts";
import type { Deployment } from "./deployment.ts";

type Progress = (line: string) => void;

async function addressOf(publicClient: PublicClient<Transport, Chain>, hash: Hash, name: string, progress: Progress): Promise<Address> {
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success" || !receipt.contractAddress) throw new Error(`deploying ${name} failed (tx ${hash})`);
  progress(`  ${name.padEnd(12)} ${receipt.contractAddress} (tx ${hash})`);
  return getAddress(receipt.contractAddress);
}

export async function deployContracts(
  wallet: WalletClient<Transport, Chain, Account>,
  publicClient: PublicClient<Transport, Chain>,
  operator: Address,
  progress: Progress = () => {},
): Promise<Deployment> {
  const block = Number(await publicClient.getBlockNumber());
  const proxy = await addressOf(publicClient, await wallet.deployContract({ abi: proxyAbi, bytecode: proxyBytecode, args: [operator] }), "Proxy", progress);
  const didRegistry = await addressOf(publicClient, await wallet.deployContract({ abi: didRegistryAbi, bytecode: didRegistryBytecode }), "DIDRegistry", progress);
  const directory = await addressOf(publicClient, await wallet.deployContract({ abi: directoryAbi, bytecode: directoryBytecode }), "Directory", progress);
  return { chainId: publicClient.chain.id, block, contracts: { proxy, didRegistry, directory } };
}

/** Every contract still has code: a reset chain or a wrong address stops the start. */
export async function checkDeployed(publicClient: PublicClient<Transport, Chain>, d: Deployment) {
  for (const [name, address] of Object.entries(d.contracts)) {
    const code = await publicClient.getCode({ address });
    if (!code || code === "0x") {
      throw new Error(`no ${name} contract at ${address} on chain ${publicClient.chain.id}: the chain was reset or the address is wrong (see DATA_DIR/chain/deployment.json)`);
    }
  }
}
