// The in-process chain (D14's fallback) run for real: our contracts deployed through viem on a
// `custom()` transport, flows on them, persistence across restarts and damaged journals, and the
// JSON-RPC Unix socket in front of it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, statSync, truncateSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import {
  type Address,
  BaseError,
  type Chain,
  ContractFunctionRevertedError,
  createPublicClient,
  createWalletClient,
  custom,
  defineChain,
  encodeErrorResult,
  encodeEventTopics,
  encodeFunctionData,
  getContract,
  type Hash,
  type Hex,
  pad,
  parseEther,
  parseEventLogs,
  parseGwei,
} from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { ipc } from "viem/node";
import { directoryAbi, proxyAbi, proxyDeployedBytecode } from "../../src/chain/artifacts/index.ts";
import { deployContracts } from "../../src/chain/deploy.ts";
import type { Deployment } from "../../src/chain/deployment.ts";
import { createInProcessChain, type InProcessChain, JOURNAL_FILE } from "../../src/chain/evm/index.ts";
import { JsonSplitter, serveJsonRpcSocket } from "../../src/chain/ipc-server.ts";
import { silentLogger } from "../../src/log.ts";
import { expectRevert, gasCost } from "../support/anvil.ts";
import { tempDir } from "../support/tmp.ts";

const CHAIN_ID = 985;
const solidityError = [{ type: "error", name: "Error", inputs: [{ name: "message", type: "string" }] }] as const;
const chainDef: Chain = defineChain({
  id: CHAIN_ID,
  name: "in-process test chain",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: ["http://unused.invalid"] } },
});

function clientsOf(chain: InProcessChain) {
  // No retries: a revert (code 3, unknown to viem's EIP-1193 error table) would be sent 4 times.
  const transport = custom(chain, { retryCount: 0 });
  const publicClient = createPublicClient({ chain: chainDef, transport, pollingInterval: 10 });
  const wallet = (account: PrivateKeyAccount) => createWalletClient({ account, chain: chainDef, transport, pollingInterval: 10 });
  const fund = (address: Address, wei: bigint) => chain.request({ method: "anvil_setBalance", params: [address, `0x${wei.toString(16)}`] });
  const newAccount = async (wei = parseEther("1000")) => {
    const account = privateKeyToAccount(generatePrivateKey());
    await fund(account.address, wei);
    return account;
  };
  const mined = async (hash: Promise<Hash> | Hash) => publicClient.waitForTransactionReceipt({ hash: await hash });
  return { publicClient, wallet, fund, newAccount, mined };
}

/** The JSON-RPC error a request was rejected with. */
async function rpcError(p: Promise<unknown>): Promise<{ code: number; message: string; data?: string }> {
  try {
    await p;
  } catch (err) {
    return err as { code: number; message: string; data?: string };
  }
  throw new Error("expected the request to fail");
}

let chain: InProcessChain;
let c: ReturnType<typeof clientsOf>;
let owner: PrivateKeyAccount;
let operator: PrivateKeyAccount;
let deployment: Deployment;

beforeAll(async () => {
  chain = await createInProcessChain({ dir: join(tempDir("evm"), "chain", "evm"), chainId: CHAIN_ID, log: silentLogger });
  c = clientsOf(chain);
  owner = await c.newAccount();
  operator = await c.newAccount();
  deployment = await deployContracts(c.wallet(owner), c.publicClient, operator.address);
});

afterAll(async () => {
  await chain.stop();
});

const proxyAs = (account: PrivateKeyAccount) =>
  getContract({ address: deployment.contracts.proxy, abi: proxyAbi, client: { public: c.publicClient, wallet: c.wallet(account) } });
const directoryAs = (account: PrivateKeyAccount) =>
  getContract({ address: deployment.contracts.directory, abi: directoryAbi, client: { public: c.publicClient, wallet: c.wallet(account) } });

describe("basics", () => {
  test("chain id, no pre-funded accounts, unknown methods refused with -32601", async () => {
    expect(await c.publicClient.getChainId()).toBe(CHAIN_ID);
    expect(await chain.request({ method: "net_version" })).toBe(String(CHAIN_ID));
    expect(await chain.request({ method: "eth_accounts" })).toEqual([]);
    expect((await rpcError(chain.request({ method: "anvil_impersonateAccount", params: [owner.address] }))).code).toBe(-32601);
    expect((await rpcError(chain.request({ method: "eth_sendTransaction", params: [{}] }))).code).toBe(-32601);
    // Bad input is a -32602 naming the parameter, or null for what does not exist.
    expect(await rpcError(chain.request({ method: "eth_getBalance", params: ["0x12", "latest"] }))).toMatchObject({ code: -32602, message: expect.stringMatching(/address/) });
    expect((await rpcError(chain.request({ method: "eth_sendRawTransaction", params: ["0x02zz"] }))).code).toBe(-32602);
    expect((await rpcError(chain.request({ method: "eth_sendRawTransaction", params: ["0x02c0"] }))).code).toBe(-32602);
    expect((await rpcError(chain.request({ method: "eth_getLogs", params: [{ topics: ["0x01"] }] }))).code).toBe(-32602);
    expect(await chain.request({ method: "eth_getBlockByNumber", params: ["0xffffff", false] })).toBeNull();
    expect(await chain.request({ method: "eth_getTransactionByHash", params: [pad("0x01")] })).toBeNull();
  });

  test("the deployed code is the committed runtime code; storage and fee quotes read", async () => {
    expect(await c.publicClient.getCode({ address: deployment.contracts.proxy })).toBe(proxyDeployedBytecode);
    // Slot 0 is `owner`; slot 1 packs `spacePrice` (1 gwei) above `operator`.
    expect(await c.publicClient.getStorageAt({ address: deployment.contracts.proxy, slot: "0x0" })).toBe(pad(owner.address.toLowerCase() as Hex));
    const slot1 = `0x${parseGwei("1").toString(16).padStart(16, "0")}${operator.address.slice(2).toLowerCase()}` as Hex;
    expect(await c.publicClient.getStorageAt({ address: deployment.contracts.proxy, slot: "0x1" })).toBe(pad(slot1));
    const fees = await c.publicClient.estimateFeesPerGas();
    expect(fees.maxPriorityFeePerGas).toBe(parseGwei("1"));
    expect(fees.maxFeePerGas).toBeGreaterThan(fees.maxPriorityFeePerGas);
    expect(await c.publicClient.getGasPrice()).toBeGreaterThan(parseGwei("1"));
    const history = await c.publicClient.getFeeHistory({ blockCount: 2, rewardPercentiles: [50] });
    expect(history.baseFeePerGas).toHaveLength(3);
    expect(history.reward).toHaveLength(2);
    const genesis = await c.publicClient.getBlock({ blockNumber: 0n });
    expect(await c.publicClient.getCode({ address: deployment.contracts.proxy, blockNumber: genesis.number })).toBeUndefined();
  });

  test("each transaction is mined at once in its own block, with wall-clock timestamps and a base fee", async () => {
    const user = await c.newAccount();
    const before = BigInt(Math.floor(Date.now() / 1000));
    const head = await c.publicClient.getBlockNumber();
    const r1 = await c.mined(c.wallet(user).sendTransaction({ to: owner.address, value: 1n }));
    const r2 = await c.mined(c.wallet(user).sendTransaction({ to: owner.address, value: 1n }));
    expect(r1.blockNumber).toBe(head + 1n);
    expect(r2.blockNumber).toBe(head + 2n);
    const b1 = await c.publicClient.getBlock({ blockNumber: r1.blockNumber, includeTransactions: true });
    const b2 = await c.publicClient.getBlock({ blockHash: r2.blockHash });
    expect(b1.timestamp).toBeGreaterThanOrEqual(before);
    expect(b2.timestamp).toBeGreaterThan(b1.timestamp);
    expect(b1.baseFeePerGas).toBeGreaterThan(0n);
    expect(b1.transactions.map((t) => t.hash)).toEqual([r1.transactionHash]);
    expect(b1.transactions[0]!.from).toBe(user.address.toLowerCase() as Address);
    expect(b2.transactions).toEqual([r2.transactionHash]);
    expect(b2.parentHash).toBe(b1.hash);
    expect(await c.publicClient.getBlockTransactionCount({ blockHash: b1.hash! })).toBe(1);
    expect(await c.publicClient.getBlockTransactionCount({ blockNumber: 0n })).toBe(0);

    // evm_mine adds an empty block, one second or more after its parent.
    await chain.request({ method: "evm_mine" });
    const empty = await c.publicClient.getBlock();
    expect(empty.number).toBe(r2.blockNumber + 1n);
    expect(empty.transactions).toEqual([]);
    expect(empty.timestamp).toBeGreaterThan(b2.timestamp);
  });

  test("legacy, EIP-2930 and EIP-1559 transactions; balances and nonces follow", async () => {
    const user = await c.newAccount(parseEther("1"));
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const wallet = c.wallet(user);
    const receipts = [];
    for (const type of ["legacy", "eip2930", "eip1559"] as const) {
      receipts.push(await c.mined(wallet.sendTransaction({ to, value: 10n, type })));
    }
    expect(receipts.map((r) => [r.type, r.status])).toEqual([
      ["legacy", "success"],
      ["eip2930", "success"],
      ["eip1559", "success"],
    ]);
    const spent = receipts.reduce((sum, r) => sum + gasCost(r), 0n);
    expect(await c.publicClient.getBalance({ address: to })).toBe(30n);
    expect(await c.publicClient.getBalance({ address: user.address })).toBe(parseEther("1") - 30n - spent);
    expect(await c.publicClient.getTransactionCount({ address: user.address })).toBe(3);
    expect(await c.publicClient.getTransactionCount({ address: user.address, blockTag: "pending" })).toBe(3);
    // Earlier blocks keep their own state.
    expect(await c.publicClient.getBalance({ address: to, blockNumber: receipts[0]!.blockNumber })).toBe(10n);
    const tx = await c.publicClient.getTransaction({ hash: receipts[2]!.transactionHash });
    expect(tx.from).toBe(user.address.toLowerCase() as Address);
    expect(tx.nonce).toBe(2);
    expect(tx.blockNumber).toBe(receipts[2]!.blockNumber);
  });

  test("a replayed nonce and a sender without funds are refused like anvil refuses them", async () => {
    const user = await c.newAccount(parseEther("1"));
    const to = owner.address;
    await c.mined(c.wallet(user).sendTransaction({ to, value: 1n }));
    const fees = { maxFeePerGas: parseGwei("10"), maxPriorityFeePerGas: parseGwei("1"), gas: 21_000n };
    const replay = await user.signTransaction({ chainId: CHAIN_ID, nonce: 0, to, value: 1n, type: "eip1559", ...fees });
    const low = await rpcError(chain.request({ method: "eth_sendRawTransaction", params: [replay] }));
    expect(low.code).toBe(-32003);
    expect(low.message).toMatch(/nonce too low/);

    const poor = privateKeyToAccount(generatePrivateKey());
    const broke = await poor.signTransaction({ chainId: CHAIN_ID, nonce: 0, to, value: 1n, type: "eip1559", ...fees });
    const funds = await rpcError(chain.request({ method: "eth_sendRawTransaction", params: [broke] }));
    expect(funds.code).toBe(-32003);
    expect(funds.message).toMatch(/insufficient funds/i);

    const otherChain = await user.signTransaction({ chainId: 1, nonce: 1, to, value: 1n, type: "eip1559", ...fees });
    expect((await rpcError(chain.request({ method: "eth_sendRawTransaction", params: [otherChain] }))).message).toMatch(/chain id/);
    expect(await c.publicClient.getTransactionCount({ address: user.address })).toBe(1);
  });
});

describe("the Proxy flow", () => {
  test("deposit, buySpace by the operator with the expected nonce, and reverts decoded as our custom errors", async () => {
    const user = await c.newAccount();
    const stranger = await c.newAccount();
    const proxy = deployment.contracts.proxy;
    const userBefore = await c.publicClient.getBalance({ address: user.address });
    const ownerBefore = await c.publicClient.getBalance({ address: owner.address });

    const dep = await c.mined(proxyAs(user).write.deposit({ value: parseGwei("1000") }));
    expect(parseEventLogs({ abi: proxyAbi, logs: dep.logs }).map(({ eventName, args }) => ({ eventName, args }))).toEqual([
      { eventName: "Deposited", args: { user: user.address, amount: parseGwei("1000"), newBalance: parseGwei("1000") } },
    ]);
    expect(await c.publicClient.getBalance({ address: user.address })).toBe(userBefore - parseGwei("1000") - gasCost(dep));
    expect(await c.publicClient.getBalance({ address: proxy })).toBe(parseGwei("1000"));
    // A read at the block before the deposit sees the state of then.
    expect(await proxyAs(user).read.depositOf([user.address], { blockNumber: dep.blockNumber - 1n })).toBe(0n);
    expect(await proxyAs(user).read.depositOf([user.address])).toBe(parseGwei("1000"));

    const [nonce] = await proxyAs(operator).read.spaceRecord([user.address]);
    expect(nonce).toBe(0n);
    const buy = await c.mined(proxyAs(operator).write.buySpace([user.address, 300n, nonce]));
    expect(buy.status).toBe("success");
    const [nonceAfter, depositAfter, purchased, , expire, periodStart] = await proxyAs(operator).read.spaceRecord([user.address]);
    const block = await c.publicClient.getBlock({ blockNumber: buy.blockNumber });
    expect([nonceAfter, depositAfter, purchased, periodStart]).toEqual([1n, parseGwei("1000") - 300n * parseGwei("1"), 300n, block.timestamp]);
    expect(expire).toBe(block.timestamp + 3n * 365n * 24n * 3600n);
    expect(await c.publicClient.getBalance({ address: owner.address })).toBe(ownerBefore + 300n * parseGwei("1"));

    // A call may come from an address with code (EIP-3607 binds transactions, not calls).
    expect(await c.publicClient.readContract({ address: proxy, abi: proxyAbi, functionName: "depositOf", args: [user.address], account: proxy })).toBe(parseGwei("700"));
    expect(await c.publicClient.estimateGas({ account: proxy, to: owner.address, value: 0n })).toBe(21_000n);
    expect(await c.publicClient.estimateGas({ account: user, to: owner.address, value: 1n })).toBe(21_000n);

    // Through eth_estimateGas (write) and eth_call (simulate): viem decodes our custom errors.
    await expectRevert(proxyAs(operator).write.buySpace([user.address, 1n, 0n]), "NonceMismatch", [0n, 1n]);
    await expectRevert(proxyAs(stranger).write.buySpace([user.address, 1n, 1n]), "NotOperator", [stranger.address]);
    await expectRevert(proxyAs(user).simulate.withdraw([parseGwei("1000")], { account: user }), "InsufficientDeposit", [parseGwei("700"), parseGwei("1000")]);
    const withdrawOne = encodeFunctionData({ abi: proxyAbi, functionName: "withdraw", args: [1n] });
    const raw = await rpcError(chain.request({ method: "eth_call", params: [{ from: stranger.address, to: proxy, data: withdrawOne }, "latest"] }));
    expect(raw).toMatchObject({ code: 3, message: "execution reverted", data: encodeErrorResult({ abi: proxyAbi, errorName: "InsufficientDeposit", args: [0n, 1n] }) });

    // A reverting transaction sent anyway (explicit gas, so nothing estimates it) is mined with status 0.
    const failed = await c.mined(c.wallet(stranger).writeContract({ address: proxy, abi: proxyAbi, functionName: "withdraw", args: [1n], gas: 100_000n }));
    expect(failed.status).toBe("reverted");
    expect(failed.logs).toEqual([]);
    expect(await c.publicClient.getTransactionCount({ address: stranger.address })).toBe(1);
  });

  test("a require message (Error(string)) reaches viem as the revert reason", async () => {
    const deployer = await c.newAccount();
    // Runtime code that reverts with Error("no way") whatever it is called with: CODECOPY the
    // revert data that follows the 14 bytes of code, then REVERT with it. The init code does the
    // same with the runtime code and RETURNs it.
    const revertData = encodeErrorResult({ abi: solidityError, errorName: "Error", args: ["no way"] }).slice(2);
    const copyThen = (tail: string, op: string) => {
      const n = (tail.length / 2).toString(16).padStart(4, "0");
      return `61${n}600e60003961${n}6000${op}${tail}`;
    };
    const init = copyThen(copyThen(revertData, "fd"), "f3");
    const deployed = await c.mined(c.wallet(deployer).sendTransaction({ data: `0x${init}` }));
    const address = deployed.contractAddress!;
    const abi = [{ type: "function", name: "f", inputs: [], outputs: [], stateMutability: "view" }] as const;
    let failure: unknown;
    await c.publicClient.readContract({ address, abi, functionName: "f" }).catch((e) => (failure = e));
    const reverted = (failure as BaseError).walk((e) => e instanceof ContractFunctionRevertedError) as ContractFunctionRevertedError;
    expect(reverted.reason).toBe("no way");
    const raw = await rpcError(chain.request({ method: "eth_estimateGas", params: [{ to: address, data: "0x" }] }));
    expect([raw.code, raw.message]).toEqual([3, "execution reverted: no way"]);
  });
});

describe("logs", () => {
  test("Directory publish events are found by topics (exact, null, OR), address lists, ranges and block hash", async () => {
    const [alice, bob] = [await c.newAccount(), await c.newAccount()];
    const directory = deployment.contracts.directory;
    const ra = await c.mined(directoryAs(alice).write.publish(["mid-a", "A", 1n, 0n, true, ["x"]]));
    const rb = await c.mined(directoryAs(bob).write.publish(["mid-b", "B", 2n, 0n, false, []]));
    const [published] = encodeEventTopics({ abi: directoryAbi, eventName: "Published" });
    const topicOf = (a: Address) => pad(a.toLowerCase() as Hex, { size: 32 });
    const getLogs = (filter: Record<string, unknown>) =>
      chain.request({ method: "eth_getLogs", params: [{ fromBlock: `0x${ra.blockNumber.toString(16)}`, ...filter }] }) as Promise<
        { transactionHash: Hash; address: string; logIndex: string }[]
      >;
    const hashes = async (filter: Record<string, unknown>) => (await getLogs(filter)).map((l) => l.transactionHash);

    expect(await hashes({ topics: [published, topicOf(alice.address)] })).toEqual([ra.transactionHash]);
    expect(await hashes({ topics: [published, [topicOf(alice.address), topicOf(bob.address)]] })).toEqual([ra.transactionHash, rb.transactionHash]);
    expect(await hashes({ topics: [null, topicOf(bob.address)] })).toEqual([rb.transactionHash]);
    expect(await hashes({ address: [deployment.contracts.proxy, directory], topics: [published] })).toEqual([ra.transactionHash, rb.transactionHash]);
    expect(await hashes({ address: deployment.contracts.proxy })).toEqual([]);
    expect(await hashes({ toBlock: `0x${ra.blockNumber.toString(16)}` })).toEqual([ra.transactionHash]);
    expect(await hashes({ fromBlock: undefined, blockHash: rb.blockHash })).toEqual([rb.transactionHash]);
    // More topic positions than the event has never match.
    expect(await hashes({ topics: [published, null, null, null] })).toEqual([]);

    // viem's own filter path decodes them.
    const viemLogs = await c.publicClient.getContractEvents({
      address: directory,
      abi: directoryAbi,
      eventName: "Published",
      args: { owner: bob.address },
      fromBlock: 0n,
    });
    expect(viemLogs.map((l) => [l.args.mid, l.args.name, l.transactionHash])).toEqual([["mid-b", "B", rb.transactionHash]]);
    const receipt = await c.publicClient.getTransactionReceipt({ hash: ra.transactionHash });
    expect(receipt.logs.map((l) => l.address)).toEqual([directory.toLowerCase() as Address]);
  });
});

describe("persistence", () => {
  async function populated(dir: string) {
    const ch = await createInProcessChain({ dir, chainId: CHAIN_ID, log: silentLogger });
    const k = clientsOf(ch);
    const admin = await k.newAccount();
    const d = await deployContracts(k.wallet(admin), k.publicClient, admin.address);
    await ch.request({ method: "evm_mine" }); // empty blocks are journalled in short
    const user = await k.newAccount();
    const dep = await k.mined(k.wallet(user).writeContract({ address: d.contracts.proxy, abi: proxyAbi, functionName: "deposit", value: 77n }));
    const pub = await k.mined(
      k.wallet(user).writeContract({ address: d.contracts.directory, abi: directoryAbi, functionName: "publish", args: ["m", "n", 1n, 0n, true, []] }),
    );
    return { ch, k, d, user, dep, pub };
  }

  test("one opener at a time; stop and open again on the same dir keeps state, code, logs, receipts and blocks; files are private", async () => {
    const dir = join(tempDir("evm-restart"), "evm");
    const { ch, k, d, user, dep, pub } = await populated(dir);
    await expect(createInProcessChain({ dir, chainId: CHAIN_ID, log: silentLogger })).rejects.toThrow(/another stowage .* is using/);
    const head = await k.publicClient.getBlock();
    const blocks = await Promise.all(Array.from({ length: Number(head.number) + 1 }, (_, n) => k.publicClient.getBlock({ blockNumber: BigInt(n) })));
    expect(blocks.filter((b) => b.transactions.length === 0).length).toBe(2); // genesis and one evm_mine
    await ch.stop();
    expect((await rpcError(ch.request({ method: "eth_blockNumber" }))).message).toMatch(/stopped/);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, JOURNAL_FILE)).mode & 0o777).toBe(0o600);

    const again = await createInProcessChain({ dir, chainId: CHAIN_ID, log: silentLogger });
    const k2 = clientsOf(again);
    try {
      expect(await k2.publicClient.getBlock()).toEqual(head);
      for (const b of blocks) expect(await k2.publicClient.getBlock({ blockNumber: b.number })).toEqual(b);
      expect(await k2.publicClient.getCode({ address: d.contracts.proxy })).toBe(proxyDeployedBytecode);
      expect(await k2.publicClient.readContract({ address: d.contracts.proxy, abi: proxyAbi, functionName: "depositOf", args: [user.address] })).toBe(77n);
      expect(await k2.publicClient.getTransactionReceipt({ hash: dep.transactionHash })).toEqual(dep);
      expect(await k2.publicClient.getTransactionReceipt({ hash: pub.transactionHash })).toEqual(pub);
      const logs = await k2.publicClient.getContractEvents({ address: d.contracts.directory, abi: directoryAbi, eventName: "Published", fromBlock: 0n });
      expect(logs.map((l) => l.transactionHash)).toEqual([pub.transactionHash]);
      expect(await k2.publicClient.getTransactionCount({ address: user.address })).toBe(2);
      // The chain goes on from there.
      const next = await k2.mined(k2.wallet(user).writeContract({ address: d.contracts.proxy, abi: proxyAbi, functionName: "deposit", value: 1n }));
      expect(next.blockNumber).toBe(head.number + 1n);
      expect((await k2.publicClient.getBlock({ blockNumber: next.blockNumber })).parentHash).toBe(head.hash);
    } finally {
      await again.stop();
    }
  });

  test("kill -9 of a process in the middle of mining loses at most the unacknowledged block", async () => {
    const dir = join(tempDir("evm-kill"), "evm");
    const key = generatePrivateKey();
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const writer = Bun.spawn([process.execPath, join(import.meta.dir, "fixtures", "evm-writer.ts"), dir, key, to], { stdout: "pipe", stderr: "inherit" });
    let acknowledged = 0n;
    let text = "";
    const reader = writer.stdout.getReader();
    while (acknowledged < 25n) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the writer exited early");
      text += Buffer.from(value).toString("utf8");
      const lines = text.split("\n").filter((l) => l.length > 0);
      acknowledged = BigInt(lines.at(-1) ?? "0");
    }
    writer.kill("SIGKILL");
    await writer.exited;

    const again = await createInProcessChain({ dir, chainId: CHAIN_ID, log: silentLogger });
    const k = clientsOf(again);
    try {
      const head = await k.publicClient.getBlockNumber();
      expect(head).toBeGreaterThanOrEqual(acknowledged);
      // Every block after genesis holds one 1-wei transfer: state, blocks and nonces agree.
      expect(await k.publicClient.getBalance({ address: to })).toBe(head);
      expect(BigInt(await k.publicClient.getTransactionCount({ address: privateKeyToAccount(key).address }))).toBe(head);
      const last = await k.publicClient.getBlock({ blockNumber: head, includeTransactions: true });
      expect(await k.publicClient.getTransactionReceipt({ hash: last.transactions[0]!.hash })).toMatchObject({ status: "success", blockNumber: head });
    } finally {
      await again.stop();
    }
  });

  test("another chain id on the same dir is refused", async () => {
    const dir = join(tempDir("evm-id"), "evm");
    const ch = await createInProcessChain({ dir, chainId: CHAIN_ID, log: silentLogger });
    await ch.stop();
    const size = statSync(join(dir, JOURNAL_FILE)).size;
    await expect(createInProcessChain({ dir, chainId: 1, log: silentLogger })).rejects.toThrow(/id 985, not 1/);
    // Refused, not taken for damage: the journal is as it was.
    expect(statSync(join(dir, JOURNAL_FILE)).size).toBe(size);
    expect(existsSync(join(dir, `${JOURNAL_FILE}.damaged`))).toBe(false);
  });

  for (const damage of ["cut short", "a flipped byte"] as const) {
    test(`a journal whose last record is ${damage} falls back to the last good state and goes on`, async () => {
      const dir = join(tempDir("evm-damage"), "evm");
      const { ch, k, d, user } = await populated(dir);
      const before = await k.publicClient.getBlock();
      const last = await k.mined(k.wallet(user).writeContract({ address: d.contracts.proxy, abi: proxyAbi, functionName: "deposit", value: 5n }));
      await ch.stop();
      const file = join(dir, JOURNAL_FILE);
      const size = statSync(file).size;
      if (damage === "cut short") truncateSync(file, size - 10);
      else {
        const bytes = readFileSync(file);
        bytes[size - 20] = bytes[size - 20]! ^ 0xff;
        writeFileSync(file, bytes);
      }

      const again = await createInProcessChain({ dir, chainId: CHAIN_ID, log: silentLogger });
      const k2 = clientsOf(again);
      try {
        expect(await k2.publicClient.getBlock()).toEqual(before);
        expect(await k2.publicClient.getTransactionReceipt({ hash: last.transactionHash }).catch(() => null)).toBeNull();
        expect(await k2.publicClient.readContract({ address: d.contracts.proxy, abi: proxyAbi, functionName: "depositOf", args: [user.address] })).toBe(77n);
        expect(existsSync(`${file}.damaged`)).toBe(true);
        // Appends after the cut are whole: the next restart sees them.
        const redo = await k2.mined(k2.wallet(user).writeContract({ address: d.contracts.proxy, abi: proxyAbi, functionName: "deposit", value: 6n }));
        await again.stop();
        const third = await createInProcessChain({ dir, chainId: CHAIN_ID, log: silentLogger });
        const k3 = clientsOf(third);
        expect(await k3.publicClient.getBlockNumber()).toBe(redo.blockNumber);
        expect(await k3.publicClient.readContract({ address: d.contracts.proxy, abi: proxyAbi, functionName: "depositOf", args: [user.address] })).toBe(83n);
        await third.stop();
      } finally {
        await again.stop();
      }
    });
  }
});

describe("the JSON-RPC socket", () => {
  /** Writes `parts` one after another on a fresh connection and collects `lines` answers. */
  async function exchange(path: string, parts: string[], lines: number): Promise<unknown[]> {
    const { promise, resolve, reject } = Promise.withResolvers<unknown[]>();
    let text = "";
    const socket = await Bun.connect({
      unix: path,
      socket: {
        data(_s, chunk) {
          text += Buffer.from(chunk).toString("utf8");
          const got = text.split("\n").filter((l) => l.length > 0);
          if (got.length >= lines && text.endsWith("\n")) resolve(got.map((l) => JSON.parse(l)));
        },
        error(_s, err) {
          reject(err);
        },
      },
    });
    for (const part of parts) {
      socket.write(part);
      socket.flush();
    }
    const out = await promise;
    socket.end();
    return out;
  }

  test("answers a request split over two writes, a batch, and requests without separators; the socket is 0600", async () => {
    const dir = tempDir("evm-ipc");
    const path = join(dir, "chain.ipc");
    writeFileSync(path, ""); // a regular file in the way is not removed
    await expect(serveJsonRpcSocket(path, chain.request)).rejects.toThrow(/not a socket/);
    const { unlinkSync } = await import("node:fs");
    unlinkSync(path);

    // A server killed with -9 leaves its socket file behind.
    const killed = Bun.spawn([process.execPath, "-e", `Bun.listen({ unix: ${JSON.stringify(path)}, socket: { data() {} } }); console.log("up"); setInterval(() => {}, 1000)`], {
      stdout: "pipe",
    });
    await killed.stdout.getReader().read();
    killed.kill("SIGKILL");
    await killed.exited;
    expect(statSync(path).isSocket()).toBe(true);
    const server = await serveJsonRpcSocket(path, chain.request);
    try {
      expect(statSync(path).isSocket()).toBe(true);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      const height = (await chain.request({ method: "eth_blockNumber" })) as string;

      const request = JSON.stringify({ jsonrpc: "2.0", id: 7, method: "eth_chainId", params: [] });
      expect(await exchange(path, [request.slice(0, 20), request.slice(20)], 1)).toEqual([{ jsonrpc: "2.0", id: 7, result: "0x3d9" }]);

      const batch = JSON.stringify([
        { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" },
        { jsonrpc: "2.0", id: 2, method: "anvil_impersonateAccount", params: [owner.address] },
        { jsonrpc: "2.0", method: "eth_chainId" },
      ]);
      const [answers] = (await exchange(path, [batch], 1)) as [{ id: number; result?: string; error?: { code: number } }[]];
      expect(answers.map((a) => [a.id, a.result ?? a.error?.code])).toEqual([
        [1, height],
        [2, -32601],
      ]);

      const a = JSON.stringify({ jsonrpc: "2.0", id: "a", method: "net_version" });
      const b = JSON.stringify({ jsonrpc: "2.0", id: "b", method: "eth_getBalance", params: [owner.address, "latest"] });
      const two = (await exchange(path, [a + b], 2)) as { id: string; result: unknown }[];
      expect(two.map((x) => x.id).sort()).toEqual(["a", "b"]);

      const broken = (await exchange(path, ["nonsense"], 1)) as { error: { code: number } }[];
      expect(broken[0]!.error.code).toBe(-32700);

      // viem's own IPC transport (what a command line would use): reads, a send, a decoded revert.
      const viaIpc = createPublicClient({ chain: chainDef, transport: ipc(path), pollingInterval: 10 });
      const ipcWallet = createWalletClient({ account: owner, chain: chainDef, transport: ipc(path), pollingInterval: 10 });
      expect(await viaIpc.getChainId()).toBe(CHAIN_ID);
      const sent = await viaIpc.waitForTransactionReceipt({ hash: await ipcWallet.sendTransaction({ to: operator.address, value: 1n }) });
      expect(sent.status).toBe("success");
      const proxy = getContract({ address: deployment.contracts.proxy, abi: proxyAbi, client: viaIpc });
      await expectRevert(proxy.simulate.withdraw([1n], { account: owner.address }), "InsufficientDeposit", [0n, 1n]);
    } finally {
      await server.close();
    }
    expect(existsSync(path)).toBe(false);
  });

  test("the splitter cuts values at any split point, strings with braces and escapes included", () => {
    const values = [{ a: "}{[\"]\\" }, [1, { b: [] }], { c: "é" }];
    const text = values.map((v) => JSON.stringify(v)).join("\n ");
    for (let cut = 0; cut <= text.length; cut++) {
      const splitter = new JsonSplitter();
      const out = [...splitter.push(text.slice(0, cut)), ...splitter.push(text.slice(cut))];
      expect(out.map((t) => JSON.parse(t))).toEqual(values);
    }
  });
});
