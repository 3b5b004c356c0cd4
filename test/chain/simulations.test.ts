// The in-process chain's public simulations: eth_call and eth_estimateGas run in a thread beside
// the chain's, answer exactly as the chain does, never stop this thread's event loop, and end at
// their caller's signal. The chain (the server's own calls) answers while one loops. A chain
// thread that goes ends whatever waits on it, simulations included.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { createPublicClient, createWalletClient, custom, defineChain, encodeFunctionData, type Hex, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { proxyAbi } from "../../src/chain/artifacts/index.ts";
import { deployContracts } from "../../src/chain/deploy.ts";
import type { Deployment } from "../../src/chain/deployment.ts";
import type { RpcRequest, RpcResponse } from "../../src/chain/endpoint.ts";
import { createInProcessChain, type InProcessChain } from "../../src/chain/evm/index.ts";
import { silentLogger } from "../../src/log.ts";
import { tempDir } from "../support/tmp.ts";

const LOOP = "0x5b600056";
/** A loop of 200 JUMPDESTs (1 gas each) and a jump back: about four times the EVM's time per gas of LOOP. */
const SLED = `0x${"5b".repeat(200)}600056`;
/** Init code that returns BLOCKHASH(NUMBER - 1). */
const PARENT_HASH = "0x43600190034060005260206000f3";
const GAS_30M = "0x1c9c380";

let chain: InProcessChain;
let deployment: Deployment;
const user = privateKeyToAccount(generatePrivateKey());

beforeAll(async () => {
  chain = await createInProcessChain({ dir: join(tempDir("evm-sim"), "evm"), chainId: 985, log: silentLogger });
  const def = defineChain({ id: 985, name: "sim", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: ["http://unused.invalid"] } } });
  const transport = custom(chain, { retryCount: 0 });
  const admin = privateKeyToAccount(generatePrivateKey());
  await chain.request({ method: "anvil_setBalance", params: [admin.address, `0x${parseEther("100").toString(16)}`] });
  await chain.request({ method: "anvil_setBalance", params: [user.address, `0x${parseEther("100").toString(16)}`] });
  deployment = await deployContracts(createWalletClient({ account: admin, chain: def, transport, pollingInterval: 10 }), createPublicClient({ chain: def, transport, pollingInterval: 10 }), admin.address);
});

afterAll(async () => {
  await chain.stop();
});

const request = (method: string, params: unknown[]): RpcRequest => ({ jsonrpc: "2.0", id: 7, method, params });
const never = () => new AbortController().signal;

/** What the chain itself answers, in the simulation's shape. */
async function direct(method: string, params: unknown[]): Promise<RpcResponse> {
  try {
    return { jsonrpc: "2.0", id: 7, result: await chain.request({ method, params }) };
  } catch (err) {
    const { code, message, data } = err as { code: number; message: string; data?: string };
    return { jsonrpc: "2.0", id: 7, error: { code, message, ...(data !== undefined ? { data } : {}) } };
  }
}

/** The longest stall of this thread's event loop while `work` runs, in ms. */
async function longestStall<T>(work: Promise<T>): Promise<{ value: T; stall: number }> {
  let last = performance.now();
  let stall = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    stall = Math.max(stall, now - last);
    last = now;
  }, 5);
  try {
    const value = await work;
    stall = Math.max(stall, performance.now() - last);
    return { value, stall };
  } finally {
    clearInterval(timer);
  }
}

describe("public simulations on the in-process chain", () => {
  test("answer as the chain's own calls do: results, reverts with their data, estimates, block tags and BLOCKHASH", async () => {
    const proxy = deployment.contracts.proxy;
    const cases: [string, unknown[]][] = [
      ["eth_call", [{ to: proxy, data: encodeFunctionData({ abi: proxyAbi, functionName: "spacePrice" }) }, "latest"]],
      ["eth_call", [{ from: user.address, to: proxy, data: encodeFunctionData({ abi: proxyAbi, functionName: "withdraw", args: [1n] }) }, "latest"]],
      ["eth_call", [{ to: proxy, data: encodeFunctionData({ abi: proxyAbi, functionName: "spacePrice" }) }, "0x1"]],
      ["eth_call", [{ data: PARENT_HASH }, "latest"]],
      ["eth_call", [{ data: PARENT_HASH }]],
      ["eth_estimateGas", [{ from: user.address, to: proxy, value: "0x5", data: encodeFunctionData({ abi: proxyAbi, functionName: "deposit" }) }]],
      ["eth_estimateGas", [{ from: user.address, to: proxy, data: encodeFunctionData({ abi: proxyAbi, functionName: "withdraw", args: [1n] }) }]],
      ["eth_estimateGas", [{ data: LOOP, gas: "0x100000" }]],
      ["eth_call", [{ to: proxy }, "0xffffff"]],
      ["eth_call", ["not a call", "latest"]],
    ];
    for (const [method, params] of cases) {
      const simulated = await chain.simulate(request(method, params), never());
      expect({ method, params, answer: simulated }).toEqual({ method, params, answer: await direct(method, params) });
    }
    // The revert keeps the contract's custom error data; BLOCKHASH is the parent's real hash.
    const withdraw = await chain.simulate(request(...cases[1]!), never());
    expect(withdraw.error).toMatchObject({ code: 3, message: "execution reverted", data: expect.stringMatching(/^0x[0-9a-f]{8}/) });
    const head = (await chain.request({ method: "eth_getBlockByNumber", params: ["latest", false] })) as { parentHash: Hex };
    expect((await chain.simulate(request(...cases[3]!), never())).result).toBe(head.parentHash);
  });

  test("a call that loops never stalls this thread; the chain answers meanwhile; the signal ends it, and the next call runs", async () => {
    const abort = new AbortController();
    let running!: () => void;
    const started = new Promise<void>((resolve) => (running = resolve));
    // 30 M gas of the sled takes many seconds in the EVM on any CPU: it can only end by the signal.
    const loop = chain.simulate(request("eth_call", [{ data: SLED, gas: GAS_30M }, "latest"]), abort.signal, running);
    let chainAnswered = Number.POSITIVE_INFINITY;
    let abortedAt = 0;
    const during = (async () => {
      // Once the loop runs (its thread loaded, its EVM started), the chain's own reads and calls go on.
      await started;
      const t = performance.now();
      await chain.request({ method: "eth_blockNumber", params: [] });
      await chain.request({ method: "eth_call", params: [{ to: deployment.contracts.proxy, data: encodeFunctionData({ abi: proxyAbi, functionName: "spacePrice" }) }, "latest"] });
      chainAnswered = performance.now() - t;
      abortedAt = performance.now();
      abort.abort();
    })();
    const { value, stall } = await longestStall(loop);
    const answeredAfterAbort = performance.now() - abortedAt;
    await during;
    // Stopped, not finished: a loop that ran out of gas would say so instead.
    expect(value).toEqual({ jsonrpc: "2.0", id: 7, error: { code: -32000, message: "execution aborted" } });
    expect(answeredAfterAbort).toBeLessThan(100);
    expect(stall).toBeLessThan(100);
    expect(chainAnswered).toBeLessThan(100);
    const next = await chain.simulate(request("eth_call", [{ to: deployment.contracts.proxy, data: encodeFunctionData({ abi: proxyAbi, functionName: "spacePrice" }) }, "latest"]), never());
    expect(BigInt(next.result as string)).toBeGreaterThan(0n);
  });

  test("a loop left alone runs out of its gas in its thread and answers as the chain does", async () => {
    const params = [{ data: LOOP, gas: "0x200000" }, "latest"];
    expect(await chain.simulate(request("eth_call", params), never())).toEqual(await direct("eth_call", params));
  });
});

describe("a chain thread that exits with no error", () => {
  test("fails the requests waiting on it, the simulations in flight and every later request", async () => {
    const script = new URL("./fixtures/exiting-chain-worker.ts", import.meta.url).href;
    const gone = await createInProcessChain({ dir: join(tempDir("evm-exit"), "evm"), chainId: 985, log: silentLogger, script });
    try {
      let running!: () => void;
      const started = new Promise<void>((resolve) => (running = resolve));
      const loop = gone.simulate(request("eth_call", [{ data: SLED, gas: GAS_30M }, "latest"]), never(), running);
      await started;
      const exited = "the in-process chain's thread exited (code 0)";
      await expect(gone.request({ method: "test_exit", params: [] })).rejects.toThrow(exited);
      expect(await loop).toEqual({ jsonrpc: "2.0", id: 7, error: { code: -32603, message: "the simulation failed" } });
      await expect(gone.request({ method: "eth_blockNumber", params: [] })).rejects.toThrow(exited);
    } finally {
      await gone.stop();
    }
  });
});
