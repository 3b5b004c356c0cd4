// A throwaway anvil per test file, the three contracts deployed on it, and small helpers for
// asserting reverts and events. Tests run against the real node, never a mock.
import { expect } from "bun:test";
import {
  type Account,
  type Address,
  BaseError,
  type Chain,
  ContractFunctionRevertedError,
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  getAddress,
  type Hash,
  http,
  type HttpTransport,
  type PublicClient,
  parseEther,
  type TestClient,
  type TransactionReceipt,
  type Transport,
  type WalletClient,
} from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import {
  didRegistryAbi,
  didRegistryBytecode,
  directoryAbi,
  directoryBytecode,
  proxyAbi,
  proxyBytecode,
} from "../../src/chain/artifacts/index.ts";

export const ANVIL_BIN = Bun.resolveSync("@foundry-rs/anvil-linux-amd64/bin/anvil", import.meta.dir);

/** Fast enough that a test never waits on a mined receipt; anvil mines each transaction at once. */
const POLLING_MS = 20;
const READY_TIMEOUT_MS = 10_000;

export interface AnvilOptions {
  chainId?: number;
}

export interface Anvil {
  url: string;
  chainId: number;
  chain: Chain;
  publicClient: PublicClient<HttpTransport, Chain>;
  testClient: TestClient<"anvil", HttpTransport, Chain>;
  /** A wallet client that signs locally with `account` and sends raw transactions. */
  wallet(account: PrivateKeyAccount): WalletClient<HttpTransport, Chain, PrivateKeyAccount>;
  /** Sets the balance of `address` to `wei` (anvil_setBalance). */
  fund(address: Address, wei: bigint): Promise<void>;
  /** A fresh random key holding 1000 ETH. */
  newAccount(): Promise<PrivateKeyAccount>;
  stop(): Promise<void>;
}

function freePort(): number {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  return port;
}

async function answersChainId(url: string): Promise<number | undefined> {
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      // A half-started node must not stall the poll past the overall deadline.
      signal: AbortSignal.timeout(1000),
    });
    const body = (await res.json()) as { result?: string };
    return body.result === undefined ? undefined : Number(body.result);
  } catch {
    return undefined;
  }
}

type Spawned = { proc: Bun.Subprocess<"ignore", "ignore", "pipe">; url: string };

/** `exitedEarly` holds anvil's complaint when it quit before answering (most likely the port was
 * taken between probing and binding). */
async function spawnOnce(chainId: number, deadline: number): Promise<Spawned | { exitedEarly: string }> {
  const port = freePort();
  const url = `http://127.0.0.1:${port}`;
  const proc = Bun.spawn(
    [ANVIL_BIN, "--host", "127.0.0.1", "--port", String(port), "--chain-id", String(chainId), "--mnemonic-random", "--silent"],
    { stdin: "ignore", stdout: "ignore", stderr: "pipe" },
  );
  let exited = false;
  void proc.exited.then(() => {
    exited = true;
  });
  while (Date.now() < deadline) {
    if (exited) return { exitedEarly: (await new Response(proc.stderr).text()).trim() };
    const id = await answersChainId(url);
    if (id !== undefined) {
      if (id !== chainId) {
        proc.kill();
        throw new Error(`anvil on ${url} answered chain id ${id}, wanted ${chainId}`);
      }
      return { proc, url };
    }
    await Bun.sleep(POLLING_MS);
  }
  proc.kill();
  throw new Error(`anvil did not answer eth_chainId on ${url} within ${READY_TIMEOUT_MS} ms`);
}

export async function startAnvil(opts: AnvilOptions = {}): Promise<Anvil> {
  const chainId = opts.chainId ?? 985;
  const deadline = Date.now() + READY_TIMEOUT_MS;
  // A probed port can be taken by someone else before anvil binds it; try another one then.
  let spawned = await spawnOnce(chainId, deadline);
  for (let attempt = 1; attempt < 3 && "exitedEarly" in spawned; attempt++) {
    spawned = await spawnOnce(chainId, deadline);
  }
  if ("exitedEarly" in spawned) throw new Error(`anvil exited before it was ready: ${spawned.exitedEarly}`);
  const { proc, url } = spawned;

  // A crashed test run must not leave an anvil behind.
  const killOnExit = () => proc.kill();
  process.on("exit", killOnExit);

  const chain = defineChain({
    id: chainId,
    name: "Stowage test chain",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [url] } },
  });
  const transport = http(url);
  const publicClient = createPublicClient({ chain, transport, pollingInterval: POLLING_MS });
  const testClient = createTestClient({ chain, mode: "anvil", transport, pollingInterval: POLLING_MS });

  const fund = (address: Address, wei: bigint) => testClient.setBalance({ address, value: wei });

  return {
    url,
    chainId,
    chain,
    publicClient,
    testClient,
    wallet: (account) => createWalletClient({ account, chain, transport, pollingInterval: POLLING_MS }),
    fund,
    async newAccount() {
      const account = privateKeyToAccount(generatePrivateKey());
      await fund(account.address, parseEther("1000"));
      return account;
    },
    async stop() {
      process.off("exit", killOnExit);
      proc.kill();
      await proc.exited;
    },
  };
}

export interface ContractAddresses {
  proxy: Address;
  didRegistry: Address;
  directory: Address;
}

async function deployed(publicClient: PublicClient<Transport, Chain>, hash: Hash, name: string): Promise<Address> {
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success" || !receipt.contractAddress) throw new Error(`deploying ${name} failed`);
  // Checksummed, like every address viem decodes from logs and return values.
  return getAddress(receipt.contractAddress);
}

/** Deploys Proxy (owned by the wallet's account, with `operator`), DIDRegistry and Directory. */
export async function deployContracts(
  walletClient: WalletClient<Transport, Chain, Account>,
  publicClient: PublicClient<Transport, Chain>,
  { operator }: { operator: Address },
): Promise<ContractAddresses> {
  // One after the other: parallel sends from one key would race for the same nonce.
  const proxy = await deployed(
    publicClient,
    await walletClient.deployContract({ abi: proxyAbi, bytecode: proxyBytecode, args: [operator] }),
    "Proxy",
  );
  const didRegistry = await deployed(
    publicClient,
    await walletClient.deployContract({ abi: didRegistryAbi, bytecode: didRegistryBytecode }),
    "DIDRegistry",
  );
  const directory = await deployed(
    publicClient,
    await walletClient.deployContract({ abi: directoryAbi, bytecode: directoryBytecode }),
    "Directory",
  );
  return { proxy, didRegistry, directory };
}

// ---- assertions ----

/** Waits for a sent transaction and fails unless it succeeded. */
export async function mined(publicClient: PublicClient<Transport, Chain>, hash: Promise<Hash> | Hash): Promise<TransactionReceipt> {
  const receipt = await publicClient.waitForTransactionReceipt({ hash: await hash });
  expect(receipt.status).toBe("success");
  return receipt;
}

/**
 * Fails unless `action` rejects with the contract's custom error `errorName` (decoded by viem from
 * the revert data, as a client of the contract would see it) and, when given, these arguments.
 */
export async function expectRevert(action: Promise<unknown>, errorName: string, args?: readonly unknown[]): Promise<void> {
  let failure: unknown;
  try {
    await action;
  } catch (error) {
    failure = error;
  }
  if (failure === undefined) throw new Error(`expected a revert with ${errorName}, but the call succeeded`);
  const reverted = failure instanceof BaseError ? failure.walk((e) => e instanceof ContractFunctionRevertedError) : null;
  if (!(reverted instanceof ContractFunctionRevertedError)) {
    throw new Error(`expected a revert with ${errorName}, got: ${String(failure)}`);
  }
  expect(reverted.data?.errorName).toBe(errorName);
  // viem leaves `args` undefined for errors without parameters.
  if (args !== undefined) expect(reverted.data?.args ?? []).toEqual(args);
}

/** The ETH spent on gas by a mined transaction, to compare balances exactly. */
export function gasCost(receipt: TransactionReceipt): bigint {
  return receipt.gasUsed * receipt.effectiveGasPrice;
}
