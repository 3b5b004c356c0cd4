/**
 * The in-process chain's core: a Cancun EVM (@ethereumjs/vm) that mines one block per transaction
 * at once, like anvil's automine, with blocks, receipts and state journalled to disk after every
 * change. Every operation runs in one queue, so a read never sees a half-built block; the whole
 * of it lives in a thread of its own (chain-worker.ts), off the server's event loop.
 */
import { type Block, createBlock, createBlockFromRLP } from "@ethereumjs/block";
import { type Common, createCustomCommon, Hardfork, Mainnet } from "@ethereumjs/common";
import type { MerkleStateManager } from "@ethereumjs/statemanager";
import { Capability, createTxFromRLP, type TypedTransaction } from "@ethereumjs/tx";
import {
  Account,
  Address,
  bigIntToHex,
  bytesToHex,
  createContractAddress,
  type DB,
  hexToBytes,
  KECCAK256_RLP,
  type PrefixedHexString,
} from "@ethereumjs/util";
import { buildBlock, createVM, type RunTxResult, type VM } from "@ethereumjs/vm";
import type { Logger } from "../../log.ts";
import { failed, invalidParams, rejected, RpcError } from "./errors.ts";
import { type Journal, openJournal } from "./journal.ts";
import { NodeStore, OverlayStore } from "./nodes.ts";
import { BLOCK_GAS_LIMIT, type CallArgs, call, estimateGas, type SimBlock, simulation, stateManagerOver, ZERO_ROOT } from "./simulate.ts";

export type { CallArgs };

const INITIAL_BASE_FEE = 1_000_000_000n;
/** What anvil suggests as a tip; the gas price it quotes is the next base fee plus this. */
export const PRIORITY_FEE = 1_000_000_000n;

type Hex = PrefixedHexString;
type JournalEntries = [string, string | null][];

/** One receipt as kept in memory and in the journal (hex strings, so it is its own JSON form). */
export interface StoredReceipt {
  hash: Hex;
  from: Hex;
  to: Hex | null;
  contractAddress: Hex | null;
  status: 0 | 1;
  gasUsed: Hex;
  cumulativeGasUsed: Hex;
  effectiveGasPrice: Hex;
  logs: [Hex, Hex[], Hex][];
}

interface BlockRecord {
  t: "block";
  chainId: number;
  hash: Hex;
  rlp: string;
  receipts: StoredReceipt[];
  nodes: JournalEntries;
  root: Hex;
}
/** An empty block (evm_mine, the idle clock) in ~150 bytes instead of ~1 KB: everything else
 * in its header follows from its parent, so replay rebuilds it with the function that made it. */
interface EmptyRecord {
  t: "empty";
  chainId: number;
  hash: Hex;
  timestamp: Hex;
  baseFee: Hex;
  root: Hex;
}
interface EmptyBlock {
  timestamp: bigint;
  baseFee: bigint;
  root: Uint8Array;
}
interface StateRecord {
  t: "state";
  nodes: JournalEntries;
  root: Hex;
}

const nowSeconds = () => BigInt(Math.floor(Date.now() / 1000));

export class Chain {
  readonly common: Common;
  private readonly nodes = new NodeStore();
  /** Blocks by number, raw or as the few fields of an empty one; rebuilt on demand, so a long
   * chain starts fast and stays small in memory. */
  private readonly rawBlocks: (Uint8Array | EmptyBlock)[] = [];
  private readonly hashes: Hex[] = [];
  private readonly byHash = new Map<Hex, number>();
  readonly receipts: StoredReceipt[][] = [];
  private readonly txIndex = new Map<Hex, { block: number; index: number }>();
  private headBlock: Block | undefined;
  /** The current state; differs from the head block's root after anvil_setBalance. */
  private headRoot: Uint8Array = KECCAK256_RLP;
  private journal: Journal | undefined;
  private vm!: VM;
  private queue: Promise<unknown> = Promise.resolve();
  private stopped = false;

  private constructor(
    readonly chainId: number,
    private readonly log: Logger,
  ) {
    this.common = createCustomCommon({ chainId, name: `stowage-${chainId}` }, Mainnet, { hardfork: Hardfork.Cancun });
  }

  static async open(file: string, chainId: number, log: Logger): Promise<Chain> {
    const chain = new Chain(chainId, log);
    chain.journal = openJournal(file, (r) => chain.replay(r), log);
    chain.vm = await createVM({ common: chain.common, stateManager: chain.stateManager(chain.nodes), blockchain: chain.blockchain() });
    if (chain.rawBlocks.length === 0) chain.genesis();
    await chain.vm.stateManager.setStateRoot(chain.headRoot);
    return chain;
  }

  // ---- queue and lifecycle ----

  /** Runs `work` after everything queued before it; one failure does not stop the queue. */
  serial<T>(work: () => Promise<T> | T): Promise<T> {
    if (this.stopped) return Promise.reject(failed("the in-process chain is stopped"));
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => {});
    return run;
  }

  async stop() {
    if (this.stopped) return;
    this.stopped = true;
    await this.queue;
    this.journal?.close();
  }

  // ---- blocks ----

  get head(): Block {
    if (!this.headBlock) throw new Error("the chain has no genesis block");
    return this.headBlock;
  }

  get height(): bigint {
    return this.head.header.number;
  }

  block(number: bigint): Block | undefined {
    if (number < 0n || number > this.height) return undefined;
    if (number === this.height) return this.head;
    const raw = this.rawBlocks[Number(number)]!;
    if (raw instanceof Uint8Array) return createBlockFromRLP(raw, { common: this.common });
    return this.emptyBlock(number, hexToBytes(this.hashes[Number(number) - 1]!), raw);
  }

  blockByHash(hash: Hex): Block | undefined {
    const n = this.byHash.get(hash.toLowerCase() as Hex);
    return n === undefined ? undefined : this.block(BigInt(n));
  }

  blockHash(number: bigint): Hex {
    return this.hashes[Number(number)]!;
  }

  locate(txHash: Hex) {
    return this.txIndex.get(txHash.toLowerCase() as Hex);
  }

  /** "latest", "pending", "earliest", "safe", "finalized" or a hex number → a block number. */
  resolve(tag: unknown = "latest"): bigint {
    if (tag === "latest" || tag === "pending" || tag === "safe" || tag === "finalized") return this.height;
    if (tag === "earliest") return 0n;
    if (typeof tag === "object" && tag !== null) {
      const { blockNumber, blockHash } = tag as { blockNumber?: string; blockHash?: Hex };
      if (blockHash !== undefined) {
        const n = this.byHash.get(blockHash.toLowerCase() as Hex);
        if (n === undefined) throw invalidParams(`unknown block ${blockHash}`);
        return BigInt(n);
      }
      return this.resolve(blockNumber);
    }
    if (typeof tag !== "string" || !/^0x[0-9a-fA-F]+$/.test(tag)) throw invalidParams(`bad block tag ${String(tag)}`);
    const n = BigInt(tag);
    if (n > this.height) throw new RpcError(-32000, `block number ${n} is beyond the chain head ${this.height}`);
    return n;
  }

  private blockchain() {
    // What the EVM needs for BLOCKHASH; the blocks themselves are kept here.
    const chain = this;
    const stub = {
      async getBlock(id: Uint8Array | number | bigint) {
        const block = id instanceof Uint8Array ? chain.blockByHash(bytesToHex(id)) : chain.block(BigInt(id));
        if (!block) throw new Error(`no block ${String(id)}`);
        return block;
      },
      async putBlock() {},
      shallowCopy() {
        return stub;
      },
    };
    return stub;
  }

  private stateManager(db: DB<string, string | Uint8Array>) {
    return stateManagerOver(this.common, db);
  }

  /** A throwaway view of the state at `number` (or the current state at the head). */
  async stateAt(number: bigint): Promise<MerkleStateManager> {
    const sm = this.stateManager(new OverlayStore(this.nodes));
    const root = number === this.height ? this.headRoot : this.block(number)!.header.stateRoot;
    await sm.setStateRoot(root);
    return sm;
  }

  // ---- journal ----

  private replay(raw: unknown) {
    const record = raw as BlockRecord | EmptyRecord | StateRecord;
    if ((record.t === "block" || record.t === "empty") && record.chainId !== this.chainId) {
      throw new Error(`the chain in this directory has id ${record.chainId}, not ${this.chainId}`);
    }
    if (record.t === "empty") {
      if (!this.headBlock) throw new Error("an empty block before genesis");
      const empty = { timestamp: BigInt(record.timestamp), baseFee: BigInt(record.baseFee), root: hexToBytes(record.root) };
      const block = this.emptyBlock(this.height + 1n, this.headBlock.hash(), empty);
      if (bytesToHex(block.hash()) !== record.hash) throw new Error(`empty block ${block.header.number} does not rebuild to its hash`);
      this.index(empty, record.hash, [], Number(block.header.number));
      this.headBlock = block;
      this.headRoot = empty.root;
    } else if (record.t === "block") {
      this.nodes.load(record.nodes);
      const rlp = new Uint8Array(Buffer.from(record.rlp, "base64"));
      const number = this.rawBlocks.length;
      this.index(rlp, record.hash, record.receipts, number);
      this.headBlock = createBlockFromRLP(rlp, { common: this.common });
      if (this.headBlock.header.number !== BigInt(number) || bytesToHex(this.headBlock.hash()) !== record.hash) {
        throw new Error(`block ${number} does not follow the chain`);
      }
      this.headRoot = hexToBytes(record.root);
    } else if (record.t === "state") {
      if (!this.headBlock) throw new Error("a state change before genesis");
      this.nodes.load(record.nodes);
      this.headRoot = hexToBytes(record.root);
    } else {
      throw new Error(`unknown record type ${String((record as { t?: unknown }).t)}`);
    }
  }

  private index(rlp: Uint8Array | EmptyBlock, hash: Hex, receipts: StoredReceipt[], number: number) {
    this.rawBlocks.push(rlp);
    this.hashes.push(hash);
    this.byHash.set(hash, number);
    this.receipts.push(receipts);
    receipts.forEach((r, index) => this.txIndex.set(r.hash, { block: number, index }));
  }

  private commitBlock(block: Block, receipts: StoredReceipt[]) {
    const rlp = block.serialize();
    const hash = bytesToHex(block.hash());
    const root = bytesToHex(block.header.stateRoot);
    this.journal!.append({
      t: "block",
      chainId: this.chainId,
      hash,
      rlp: Buffer.from(rlp).toString("base64"),
      receipts,
      nodes: this.nodes.takePending(),
      root,
    } satisfies BlockRecord);
    this.index(rlp, hash, receipts, Number(block.header.number));
    this.headBlock = block;
    this.headRoot = block.header.stateRoot;
  }

  /** An empty block's header: what BlockBuilder would make for no transactions on Cancun (no
   * rewards, no withdrawals, no beacon-root contract, so the state is the parent's). */
  private emptyBlock(number: bigint, parentHash: Uint8Array, e: EmptyBlock): Block {
    return createBlock(
      {
        header: {
          parentHash,
          number,
          gasLimit: BLOCK_GAS_LIMIT,
          timestamp: e.timestamp,
          baseFeePerGas: e.baseFee,
          stateRoot: e.root,
          excessBlobGas: 0n,
          blobGasUsed: 0n,
          parentBeaconBlockRoot: ZERO_ROOT,
        },
        withdrawals: [],
      },
      { common: this.common },
    );
  }

  /** evm_mine: an empty block, one second or more after its parent. */
  async mineEmpty(): Promise<Block> {
    const empty = { timestamp: this.nextTimestamp(), baseFee: this.nextBaseFee(), root: this.headRoot };
    const block = this.emptyBlock(this.height + 1n, this.head.hash(), empty);
    const hash = bytesToHex(block.hash());
    this.journal!.append({
      t: "empty",
      chainId: this.chainId,
      hash,
      timestamp: bigIntToHex(empty.timestamp),
      baseFee: bigIntToHex(empty.baseFee),
      root: bytesToHex(empty.root),
    } satisfies EmptyRecord);
    this.index(empty, hash, [], Number(block.header.number));
    this.headBlock = block;
    return block;
  }

  private genesis() {
    const block = this.emptyBlock(0n, ZERO_ROOT, { timestamp: nowSeconds(), baseFee: INITIAL_BASE_FEE, root: KECCAK256_RLP });
    this.commitBlock(block, []);
    this.log.info("in-process chain created", { chainId: this.chainId, genesis: this.hashes[0] });
  }

  // ---- mining ----

  private nextTimestamp(): bigint {
    const parent = this.head.header.timestamp;
    const now = nowSeconds();
    return now > parent ? now : parent + 1n;
  }

  nextBaseFee(): bigint {
    return this.head.header.calcNextBaseFee();
  }

  /** Mines one block holding `tx`, journals it and makes it the head. */
  async mine(tx: { tx: TypedTransaction; from: Address }): Promise<Block> {
    const builder = await buildBlock(this.vm, {
      parentBlock: this.head,
      headerData: { timestamp: this.nextTimestamp(), gasLimit: BLOCK_GAS_LIMIT, parentBeaconBlockRoot: ZERO_ROOT },
      withdrawals: [],
      blockOpts: { putBlockIntoBlockchain: false },
    });
    let result: RunTxResult;
    try {
      result = await builder.addTransaction(tx.tx);
    } catch (err) {
      await builder.revert();
      throw failed((err as Error).message);
    }
    const { block } = await builder.build();
    try {
      this.commitBlock(block, this.receiptsOf(block, tx, result));
    } catch (err) {
      // Not on disk, so not mined: the state goes back to the head's.
      await this.vm.stateManager.setStateRoot(this.headRoot);
      throw failed(`could not save the chain: ${(err as Error).message}`);
    }
    return block;
  }

  private receiptsOf(block: Block, { tx, from }: { tx: TypedTransaction; from: Address }, result: RunTxResult): StoredReceipt[] {
    const baseFee = block.header.baseFeePerGas ?? 0n;
    const price = tx.supports(Capability.EIP1559FeeMarket) ? tx.getEffectivePriorityFee(baseFee) + baseFee : (tx as { gasPrice: bigint }).gasPrice;
    const ok = result.execResult.exceptionError === undefined;
    return [
      {
        hash: bytesToHex(tx.hash()),
        from: from.toString(),
        to: tx.to === undefined ? null : tx.to.toString(),
        contractAddress: tx.to === undefined && ok ? createContractAddress(from, tx.nonce).toString() : null,
        status: ok ? 1 : 0,
        gasUsed: bigIntToHex(result.totalGasSpent),
        cumulativeGasUsed: bigIntToHex(result.receipt.cumulativeBlockGasUsed),
        effectiveGasPrice: bigIntToHex(price),
        logs: result.receipt.logs.map(([address, topics, data]) => [bytesToHex(address), topics.map(bytesToHex), bytesToHex(data)]),
      },
    ];
  }

  /** Validates a signed transaction the way a node's pool would, then mines it. */
  async sendRaw(raw: Hex): Promise<Hex> {
    let tx: TypedTransaction;
    try {
      tx = createTxFromRLP(hexToBytes(raw), { common: this.common }) as TypedTransaction;
    } catch (err) {
      const message = (err as Error).message;
      if (/chain ?id/i.test(message)) throw failed("invalid chain id for signer");
      throw invalidParams(`failed to decode signed transaction: ${message.split("\n")[0]}`);
    }
    if (!tx.isSigned()) throw invalidParams("the transaction is not signed");
    const hash = bytesToHex(tx.hash());
    if (this.txIndex.has(hash)) throw rejected("already known");
    let from: Address;
    try {
      from = tx.getSenderAddress();
    } catch {
      throw invalidParams("invalid transaction signature");
    }
    const account = (await this.vm.stateManager.getAccount(from)) ?? new Account();
    if (tx.nonce < account.nonce) throw rejected("nonce too low");
    if (tx.nonce > account.nonce) throw rejected(`nonce too high: the next nonce of ${from} is ${account.nonce}`);
    if (tx.gasLimit > BLOCK_GAS_LIMIT) throw failed("exceeds block gas limit");
    if (tx.gasLimit < tx.getIntrinsicGas()) throw failed("intrinsic gas too low");
    const baseFee = this.nextBaseFee();
    const feeCap = tx.supports(Capability.EIP1559FeeMarket) ? (tx as { maxFeePerGas: bigint }).maxFeePerGas : (tx as { gasPrice: bigint }).gasPrice;
    if (feeCap < baseFee) throw failed(`max fee per gas less than block base fee: maxFeePerGas ${feeCap}, baseFee ${baseFee}`);
    const cost = tx.gasLimit * feeCap + tx.value;
    if (account.balance < cost) throw rejected("Insufficient funds for gas * price + value");
    await this.mine({ tx, from });
    return hash;
  }

  /** anvil_setBalance: changes the current state without mining, journalled like a block. */
  async setBalance(address: Address, wei: bigint) {
    const sm = this.vm.stateManager;
    const account = (await sm.getAccount(address)) ?? new Account();
    account.balance = wei;
    await sm.checkpoint();
    await sm.putAccount(address, account);
    await sm.commit();
    const root = await sm.getStateRoot();
    try {
      this.journal!.append({ t: "state", nodes: this.nodes.takePending(), root: bytesToHex(root) } satisfies StateRecord);
    } catch (err) {
      await sm.setStateRoot(this.headRoot);
      throw failed(`could not save the chain: ${(err as Error).message}`);
    }
    this.headRoot = root;
  }

  // ---- calls ----

  /** The block a call at `number` runs in (the next one when `pending`), and its state. */
  simBlock(number: bigint, pending: boolean): SimBlock {
    const base = pending ? this.head.header : this.block(number)!.header;
    return {
      number: pending ? base.number + 1n : base.number,
      parentHash: bytesToHex(pending ? this.head.hash() : base.parentHash),
      timestamp: pending ? this.nextTimestamp() : base.timestamp,
      mixHash: bytesToHex(base.mixHash),
      root: bytesToHex(number === this.height ? this.headRoot : this.block(number)!.header.stateRoot),
    };
  }

  /** A stored trie node or contract code by its key (the simulation thread reads the state so). */
  node(key: string): Uint8Array | undefined {
    return this.nodes.entries.get(key);
  }

  private async simulation(number: bigint, pending: boolean) {
    const block = this.simBlock(number, pending);
    const sm = this.stateManager(new OverlayStore(this.nodes));
    await sm.setStateRoot(hexToBytes(block.root));
    return simulation(this.common, sm, this.blockchain(), block);
  }

  async call(args: CallArgs, number: bigint): Promise<Hex> {
    return call(await this.simulation(number, false), args);
  }

  async estimateGas(args: CallArgs, number: bigint): Promise<bigint> {
    return estimateGas(await this.simulation(number, number === this.height), args);
  }
}
