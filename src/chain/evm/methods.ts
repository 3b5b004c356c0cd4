/**
 * The JSON-RPC methods of the in-process chain: what viem and Stowage's own code call, answered in
 * the shapes geth and anvil use. Anything else is refused with -32601.
 */
import type { Block } from "@ethereumjs/block";
import { Capability, type TypedTransaction } from "@ethereumjs/tx";
import { Address, bigIntToHex, bytesToHex, hexToBytes, type PrefixedHexString, setLengthLeft } from "@ethereumjs/util";
import { Bloom } from "@ethereumjs/vm";
import { type CallArgs, type Chain, PRIORITY_FEE, type StoredReceipt } from "./chain.ts";
import { invalidParams, methodNotFound } from "./errors.ts";
import type { SimBlock } from "./simulate.ts";

type Hex = PrefixedHexString;
type Params = unknown[];

const isHex = (v: unknown, bytes?: number): v is Hex =>
  typeof v === "string" && /^0x[0-9a-fA-F]*$/.test(v) && (bytes === undefined || v.length === 2 + bytes * 2);

function address(v: unknown, what = "address"): Address {
  if (!isHex(v, 20)) throw invalidParams(`${what} must be a 20-byte hex string`);
  return new Address(hexToBytes(v));
}

function quantity(v: unknown, what: string): bigint {
  if (!isHex(v) || v.length < 3) throw invalidParams(`${what} must be a hex quantity`);
  return BigInt(v);
}

function hash32(v: unknown, what = "hash"): Hex {
  if (!isHex(v, 32)) throw invalidParams(`${what} must be a 32-byte hex string`);
  return v.toLowerCase() as Hex;
}

export function callArgs(v: unknown): CallArgs {
  if (typeof v !== "object" || v === null) throw invalidParams("the call must be an object");
  const args = v as CallArgs;
  if (args.from !== undefined) address(args.from, "from");
  if (args.to !== undefined && args.to !== null) address(args.to, "to");
  for (const k of ["gas", "value", "data", "input"] as const) {
    if (args[k] !== undefined && !isHex(args[k])) throw invalidParams(`${k} must be hex`);
  }
  return args;
}

// ---- shapes ----

function txJson(chain: Chain, tx: TypedTransaction, block: Block, index: number, receipt: StoredReceipt) {
  const json = tx.toJSON();
  const out: Record<string, unknown> = {
    hash: receipt.hash,
    type: bigIntToHex(BigInt(tx.type)),
    blockHash: chain.blockHash(block.header.number),
    blockNumber: bigIntToHex(block.header.number),
    transactionIndex: bigIntToHex(BigInt(index)),
    from: receipt.from,
    to: receipt.to,
    nonce: bigIntToHex(tx.nonce),
    gas: bigIntToHex(tx.gasLimit),
    value: bigIntToHex(tx.value),
    input: bytesToHex(tx.data),
    gasPrice: receipt.effectiveGasPrice,
    v: json.v,
    r: json.r,
    s: json.s,
  };
  if (tx.supports(Capability.EIP155ReplayProtection) || tx.type !== 0) out.chainId = bigIntToHex(BigInt(chain.chainId));
  if (tx.type !== 0) {
    out.accessList = json.accessList ?? [];
    out.yParity = json.v;
  }
  if (tx.supports(Capability.EIP1559FeeMarket)) {
    out.maxFeePerGas = json.maxFeePerGas;
    out.maxPriorityFeePerGas = json.maxPriorityFeePerGas;
  }
  return out;
}

function logsJson(chain: Chain, number: bigint, receipts: StoredReceipt[]) {
  const blockHash = chain.blockHash(number);
  let logIndex = 0;
  return receipts.map((r, i) =>
    r.logs.map(([address, topics, data]) => ({
      address,
      topics,
      data,
      blockHash,
      blockNumber: bigIntToHex(number),
      transactionHash: r.hash,
      transactionIndex: bigIntToHex(BigInt(i)),
      logIndex: bigIntToHex(BigInt(logIndex++)),
      removed: false,
    })),
  );
}

function receiptJson(chain: Chain, number: bigint, index: number) {
  const receipts = chain.receipts[Number(number)]!;
  const r = receipts[index]!;
  const bloom = new Bloom();
  for (const [a, topics] of r.logs) {
    bloom.add(hexToBytes(a));
    for (const t of topics) bloom.add(hexToBytes(t));
  }
  const tx = chain.block(number)!.transactions[index]!;
  return {
    transactionHash: r.hash,
    transactionIndex: bigIntToHex(BigInt(index)),
    blockHash: chain.blockHash(number),
    blockNumber: bigIntToHex(number),
    from: r.from,
    to: r.to,
    contractAddress: r.contractAddress,
    cumulativeGasUsed: r.cumulativeGasUsed,
    gasUsed: r.gasUsed,
    effectiveGasPrice: r.effectiveGasPrice,
    logs: logsJson(chain, number, receipts)[index],
    logsBloom: bytesToHex(bloom.bitvector),
    status: r.status === 1 ? "0x1" : "0x0",
    type: bigIntToHex(BigInt(tx.type)),
  };
}

function blockJson(chain: Chain, block: Block, full: boolean) {
  const h = block.header;
  const number = h.number;
  const receipts = chain.receipts[Number(number)]!;
  return {
    number: bigIntToHex(number),
    hash: chain.blockHash(number),
    parentHash: bytesToHex(h.parentHash),
    nonce: bytesToHex(h.nonce),
    mixHash: bytesToHex(h.mixHash),
    sha3Uncles: bytesToHex(h.uncleHash),
    logsBloom: bytesToHex(h.logsBloom),
    transactionsRoot: bytesToHex(h.transactionsTrie),
    stateRoot: bytesToHex(h.stateRoot),
    receiptsRoot: bytesToHex(h.receiptTrie),
    miner: h.coinbase.toString(),
    difficulty: bigIntToHex(h.difficulty),
    totalDifficulty: "0x0",
    extraData: bytesToHex(h.extraData),
    size: bigIntToHex(BigInt(block.serialize().length)),
    gasLimit: bigIntToHex(h.gasLimit),
    gasUsed: bigIntToHex(h.gasUsed),
    timestamp: bigIntToHex(h.timestamp),
    baseFeePerGas: bigIntToHex(h.baseFeePerGas ?? 0n),
    withdrawals: [],
    withdrawalsRoot: h.withdrawalsRoot ? bytesToHex(h.withdrawalsRoot) : undefined,
    blobGasUsed: bigIntToHex(h.blobGasUsed ?? 0n),
    excessBlobGas: bigIntToHex(h.excessBlobGas ?? 0n),
    parentBeaconBlockRoot: h.parentBeaconBlockRoot ? bytesToHex(h.parentBeaconBlockRoot) : undefined,
    transactions: full ? block.transactions.map((tx, i) => txJson(chain, tx, block, i, receipts[i]!)) : receipts.map((r) => r.hash),
    uncles: [],
  };
}

// ---- eth_getLogs ----

type TopicFilter = (Hex | null | (Hex | null)[])[];

function topicFilter(v: unknown): TopicFilter {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw invalidParams("topics must be an array");
  return v.map((t) => {
    if (t === null) return null;
    if (Array.isArray(t)) return t.map((x) => (x === null ? null : hash32(x, "topic")));
    return hash32(t, "topic");
  });
}

function matches(topics: Hex[], filter: TopicFilter): boolean {
  // As geth: a filter longer than the log's topics never matches.
  if (filter.length > topics.length) return false;
  return filter.every((want, i) => {
    if (want === null) return true;
    const have = topics[i]!.toLowerCase();
    if (Array.isArray(want)) return want.length === 0 || want.some((w) => w === null || w === have);
    return want === have;
  });
}

/** The logs a filter matches; past `max` of them the scan stops, and the answer holds `max + 1`
 * (enough for the caller to tell it is over its cap). */
function getLogs(chain: Chain, raw: unknown, max = Number.POSITIVE_INFINITY) {
  const f = (raw ?? {}) as { fromBlock?: unknown; toBlock?: unknown; blockHash?: unknown; address?: unknown; topics?: unknown };
  let from: bigint;
  let to: bigint;
  if (f.blockHash !== undefined) {
    if (f.fromBlock !== undefined || f.toBlock !== undefined) throw invalidParams("blockHash cannot be combined with fromBlock/toBlock");
    const block = chain.blockByHash(hash32(f.blockHash, "blockHash"));
    if (!block) throw invalidParams(`unknown block ${String(f.blockHash)}`);
    from = to = block.header.number;
  } else {
    from = chain.resolve(f.fromBlock ?? "latest");
    to = chain.resolve(f.toBlock ?? "latest");
  }
  const addresses =
    f.address === undefined || f.address === null
      ? undefined
      : new Set((Array.isArray(f.address) ? f.address : [f.address]).map((a) => address(a).toString()));
  const topics = topicFilter(f.topics);
  const out: unknown[] = [];
  for (let n = from; n <= to; n++) {
    const receipts = chain.receipts[Number(n)]!;
    if (receipts.every((r) => r.logs.length === 0)) continue;
    for (const logs of logsJson(chain, n, receipts)) {
      for (const log of logs) {
        if (addresses && !addresses.has(log.address)) continue;
        if (!matches(log.topics, topics)) continue;
        out.push(log);
        if (out.length > max) return out;
      }
    }
  }
  return out;
}

// ---- fees ----

function feeHistory(chain: Chain, params: Params) {
  const count = Number(typeof params[0] === "number" ? params[0] : quantity(params[0], "blockCount"));
  if (!Number.isInteger(count) || count < 1) throw invalidParams("blockCount must be at least 1");
  const newest = chain.resolve(params[1]);
  const percentiles = (params[2] ?? []) as number[];
  if (!Array.isArray(percentiles) || percentiles.some((p) => typeof p !== "number" || p < 0 || p > 100)) {
    throw invalidParams("rewardPercentiles must be numbers from 0 to 100");
  }
  const oldest = newest - BigInt(Math.min(count, 1024)) + 1n > 0n ? newest - BigInt(Math.min(count, 1024)) + 1n : 0n;
  const baseFees: Hex[] = [];
  const ratios: number[] = [];
  const rewards: Hex[][] = [];
  for (let n = oldest; n <= newest; n++) {
    const block = chain.block(n)!;
    const baseFee = block.header.baseFeePerGas ?? 0n;
    baseFees.push(bigIntToHex(baseFee));
    ratios.push(Number(block.header.gasUsed) / Number(block.header.gasLimit));
    const tips = chain.receipts[Number(n)]!.map((r) => BigInt(r.effectiveGasPrice) - baseFee).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    rewards.push(percentiles.map((p) => bigIntToHex(tips.length === 0 ? 0n : tips[Math.min(tips.length - 1, Math.floor((p / 100) * tips.length))]!)));
  }
  baseFees.push(bigIntToHex(newest === chain.height ? chain.nextBaseFee() : chain.block(newest + 1n)!.header.baseFeePerGas ?? 0n));
  return { oldestBlock: bigIntToHex(oldest), baseFeePerGas: baseFees, gasUsedRatio: ratios, ...(percentiles.length ? { reward: rewards } : {}) };
}

// ---- dispatch ----

/** What a caller bounds of a request's work: the public /rpc's cap on eth_getLogs' answer. */
export interface DispatchLimits {
  maxLogs?: number;
}

type Handler = (chain: Chain, params: Params, limits: DispatchLimits) => unknown;

const byNumber = (chain: Chain, tag: unknown) => chain.resolve(tag);

const handlers: Record<string, Handler> = {
  eth_chainId: (c) => bigIntToHex(BigInt(c.chainId)),
  net_version: (c) => String(c.chainId),
  web3_clientVersion: () => "stowage-inprocess-evm",
  eth_accounts: () => [],
  eth_syncing: () => false,
  eth_blockNumber: (c) => bigIntToHex(c.height),
  eth_gasPrice: (c) => bigIntToHex(c.nextBaseFee() + PRIORITY_FEE),
  eth_maxPriorityFeePerGas: () => bigIntToHex(PRIORITY_FEE),
  eth_feeHistory: feeHistory,
  eth_getBalance: async (c, [a, tag]) => bigIntToHex((await (await c.stateAt(byNumber(c, tag))).getAccount(address(a)))?.balance ?? 0n),
  eth_getTransactionCount: async (c, [a, tag]) => bigIntToHex((await (await c.stateAt(byNumber(c, tag))).getAccount(address(a)))?.nonce ?? 0n),
  eth_getCode: async (c, [a, tag]) => bytesToHex(await (await c.stateAt(byNumber(c, tag))).getCode(address(a))),
  eth_getStorageAt: async (c, [a, slot, tag]) => {
    const key = setLengthLeft(hexToBytes(bigIntToHex(quantity(slot, "slot"))), 32);
    const value = await (await c.stateAt(byNumber(c, tag))).getStorage(address(a), key);
    return bytesToHex(setLengthLeft(value, 32));
  },
  eth_call: (c, [args, tag]) => c.call(callArgs(args), byNumber(c, tag)),
  eth_estimateGas: async (c, [args, tag]) => bigIntToHex(await c.estimateGas(callArgs(args), byNumber(c, tag ?? "pending"))),
  eth_sendRawTransaction: (c, [raw]) => {
    if (!isHex(raw) || raw.length < 4) throw invalidParams("the raw transaction must be hex");
    return c.sendRaw(raw);
  },
  eth_getTransactionReceipt: (c, [h]) => {
    const at = c.locate(hash32(h));
    return at ? receiptJson(c, BigInt(at.block), at.index) : null;
  },
  eth_getTransactionByHash: (c, [h]) => {
    const at = c.locate(hash32(h));
    if (!at) return null;
    const block = c.block(BigInt(at.block))!;
    return txJson(c, block.transactions[at.index]!, block, at.index, c.receipts[at.block]![at.index]!);
  },
  eth_getBlockByNumber: (c, [tag, full]) => {
    let n: bigint;
    try {
      n = c.resolve(tag);
    } catch (err) {
      if (typeof tag === "string" && /^0x[0-9a-fA-F]+$/.test(tag)) return null; // beyond the head
      throw err;
    }
    return blockJson(c, c.block(n)!, full === true);
  },
  eth_getBlockByHash: (c, [h, full]) => {
    const block = c.blockByHash(hash32(h));
    return block ? blockJson(c, block, full === true) : null;
  },
  eth_getBlockTransactionCountByNumber: (c, [tag]) => bigIntToHex(BigInt(c.block(c.resolve(tag))!.transactions.length)),
  eth_getBlockTransactionCountByHash: (c, [h]) => {
    const block = c.blockByHash(hash32(h));
    return block ? bigIntToHex(BigInt(block.transactions.length)) : null;
  },
  eth_getLogs: (c, [filter], { maxLogs }) => getLogs(c, filter, maxLogs),
  evm_mine: async (c) => {
    await c.mineEmpty();
    return "0x0";
  },
  anvil_setBalance: async (c, [a, wei]) => {
    await c.setBalance(address(a), quantity(wei, "balance"));
    return null;
  },
};

/** The block a public simulation runs in, as the chain's own eth_call and eth_estimateGas pick it:
 * eth_call at `latest` by default, eth_estimateGas at `pending` (the next block on the head). */
export function simBlockFor(chain: Chain, method: string, tag: unknown): SimBlock {
  const estimate = method === "eth_estimateGas";
  const number = chain.resolve(tag ?? (estimate ? "pending" : "latest"));
  return chain.simBlock(number, estimate && number === chain.height);
}

/** Every method, read or write, runs in the chain's queue: a read never sees a half-mined block. */
export function dispatch(chain: Chain, method: string, params: Params, limits: DispatchLimits = {}): Promise<unknown> {
  const handler = handlers[method];
  if (!handler) return Promise.reject(methodNotFound(method));
  return chain.serial(() => handler(chain, params, limits));
}
