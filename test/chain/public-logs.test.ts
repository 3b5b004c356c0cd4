// eth_getLogs through the public RPC, on anvil and on the in-process EVM alike: a range wider than
// the cap is refused (its tags resolved against the chain first), the logs one request gets back
// are capped, and the chain's own callers (the event indexer, over the server's own endpoint) get
// every log as before. The in-process EVM stops scanning at the cap instead of after it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { createPublicClient, createWalletClient, defineChain, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { httpEndpoint, providerEndpoint, rpcCall, type RpcEndpoint, type RpcRequest, type RpcResponse } from "../../src/chain/endpoint.ts";
import { createInProcessChain } from "../../src/chain/evm/index.ts";
import { createPublicRpc, type ReadLogs, type RpcLimits } from "../../src/chain/public-rpc.ts";
import { silentLogger } from "../../src/log.ts";
import { startAnvil } from "../support/anvil.ts";
import { tempDir } from "../support/tmp.ts";

const CHAIN_ID = 985;
const limits: RpcLimits = { perMinute: 0, maxBatch: 20, gasPerCall: 5_000_000n, gasPerBatch: 30_000_000n, timeoutMs: 5000, simulations: 1, logBlocks: 5, maxLogs: 4 };
const hex = (n: bigint) => `0x${n.toString(16)}`;
const getLogs = (filter: unknown, id = 1): RpcRequest => ({ jsonrpc: "2.0", id, method: "eth_getLogs", params: [filter] });

/** What each engine leaves running, stopped once every test is done. */
const stops: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const stop of stops) await stop();
});

interface Engine {
  /** The server's own way to the chain. */
  endpoint: RpcEndpoint;
  readLogs?: ReadLogs;
}

const engines: [string, () => Promise<Engine>][] = [
  [
    "anvil",
    async () => {
      const anvil = await startAnvil({ chainId: CHAIN_ID });
      stops.push(() => anvil.stop());
      return { endpoint: httpEndpoint(anvil.url) };
    },
  ],
  [
    "the in-process EVM",
    async () => {
      const chain = await createInProcessChain({ dir: join(tempDir("public-logs"), "evm"), chainId: CHAIN_ID, log: silentLogger });
      stops.push(() => chain.stop());
      return { endpoint: providerEndpoint("in-process EVM", (args) => chain.request(args)), readLogs: chain.readLogs };
    },
  ],
];

describe.each(engines)("eth_getLogs through the public RPC on %s", (_name, open) => {
  let engine: Engine;
  let rpc: ReturnType<typeof createPublicRpc>;
  /** Two blocks that hold three logs each, and the head, a few empty blocks later. */
  let first: { number: bigint; hash: Hex };
  let second: { number: bigint; hash: Hex };
  let head: bigint;

  /** What the chain itself answers, as the server's own callers get it. */
  const chainLogs = (filter: unknown) => rpcCall<unknown[]>(engine.endpoint, "eth_getLogs", [filter]);

  beforeAll(async () => {
    engine = await open();
    rpc = createPublicRpc({ forward: engine.endpoint.send, readLogs: engine.readLogs, limits });
    const account = privateKeyToAccount(generatePrivateKey());
    await rpcCall(engine.endpoint, "anvil_setBalance", [account.address, hex(10n ** 21n)]);
    const chain = defineChain({ id: CHAIN_ID, name: "logs", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: ["http://unused.invalid"] } } });
    const wallet = createWalletClient({ account, chain, transport: engine.endpoint.transport() });
    const client = createPublicClient({ chain, transport: engine.endpoint.transport(), pollingInterval: 10 });
    // A contract creation whose init code writes three empty logs and keeps no code.
    const threeLogs = async () => {
      const hash = await wallet.sendTransaction({ data: `0x${"60006000a0".repeat(3)}00` });
      const receipt = await client.waitForTransactionReceipt({ hash });
      return { number: receipt.blockNumber, hash: receipt.blockHash };
    };
    first = await threeLogs();
    second = await threeLogs();
    for (let i = 0; i < limits.logBlocks + 1; i++) await rpcCall(engine.endpoint, "evm_mine");
    head = BigInt(await rpcCall<Hex>(engine.endpoint, "eth_blockNumber"));
  });

  const answer = async (body: unknown) => (await rpc.handle(body, "192.0.2.1")).body as { result?: unknown[]; error?: { code: number; message: string } };

  test("a range wider than the cap is refused with -32005, tags and all; within it the answer is the chain's own", async () => {
    const whole = await answer(getLogs({ fromBlock: "earliest", toBlock: "latest" }));
    expect(whole.error).toEqual({ code: -32005, message: `eth_getLogs over ${head + 1n} blocks is more than this gateway's cap of 5 blocks per call; ask for a smaller range` });
    // "latest" is the default toBlock, and it is resolved: six blocks back is one too many.
    expect((await answer(getLogs({ fromBlock: hex(head - 5n) }))).error?.code).toBe(-32005);
    expect((await answer(getLogs({ fromBlock: hex(head - 4n) }))).result).toEqual([]);
    expect((await answer(getLogs({ fromBlock: "0x0", toBlock: "0xffffffffff" }))).error?.code).toBe(-32005);
    // A range within it, or one block by its hash, is answered as the chain answers it.
    const inRange = { fromBlock: hex(first.number), toBlock: hex(second.number) };
    const logs = await chainLogs(inRange);
    expect(logs).toHaveLength(6);
    expect((await answer(getLogs({ ...inRange, toBlock: hex(first.number) }))).result).toEqual(logs.slice(0, 3));
    expect((await answer(getLogs({ blockHash: second.hash }))).result).toEqual(logs.slice(3));
    expect((await answer(getLogs({ fromBlock: "latest", toBlock: "latest" }))).result).toEqual([]);
    // A block that is neither a number nor a tag is refused before it reaches the chain.
    expect((await answer(getLogs({ fromBlock: 5 }))).error).toEqual({ code: -32602, message: "Invalid params: fromBlock must be a hex block number or earliest, latest, pending, safe or finalized" });
    expect((await answer(getLogs("everything"))).error).toEqual({ code: -32602, message: "Invalid params: eth_getLogs takes a filter object" });
  });

  test("the logs one request gets back are capped: an entry that would pass the cap is refused, the rest answered", async () => {
    const both = await answer(getLogs({ fromBlock: hex(first.number), toBlock: hex(second.number) }));
    expect(both.error).toEqual({ code: -32005, message: "eth_getLogs found more logs than this gateway's cap of 4 per request; ask for a smaller range" });
    const batch = (await rpc.handle([getLogs({ blockHash: first.hash }, 1), getLogs({ blockHash: second.hash }, 2), { jsonrpc: "2.0", id: 3, method: "eth_chainId", params: [] }], "192.0.2.1")).body as RpcResponse[];
    expect((batch[0]!.result as unknown[]).length).toBe(3);
    expect(batch[1]!.error).toEqual({ code: -32005, message: "eth_getLogs found more logs than this gateway's cap of 4 per request (1 left after the request's other eth_getLogs); ask for a smaller range" });
    expect(batch[2]).toEqual({ jsonrpc: "2.0", id: 3, result: hex(BigInt(CHAIN_ID)) });
  });

  test("the chain's own callers are not capped; the in-process EVM stops scanning at the public's cap", async () => {
    // The event indexer reads through the server's own endpoint: whole ranges, every log.
    expect(await chainLogs({ fromBlock: "earliest", toBlock: "latest" })).toHaveLength(6);
    if (!engine.readLogs) return;
    const cut = await engine.readLogs(getLogs({ fromBlock: "earliest", toBlock: "latest" }), 2);
    expect(cut.result).toHaveLength(3);
  });
});
