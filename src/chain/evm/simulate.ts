/**
 * Simulated transactions (eth_call, eth_estimateGas) on a throwaway view of the state: nothing
 * they do is kept. Shared by the chain's own thread (the server's calls) and the simulation
 * thread (the public's, which may be stopped at any moment), so both answer alike.
 */
import { createBlock } from "@ethereumjs/block";
import type { Common } from "@ethereumjs/common";
import { MerklePatriciaTrie } from "@ethereumjs/mpt";
import { MerkleStateManager } from "@ethereumjs/statemanager";
import { createAccessList2930Tx } from "@ethereumjs/tx";
import { Account, Address, bytesToHex, type DB, hexToBytes, type PrefixedHexString, ValueEncoding } from "@ethereumjs/util";
import { createVM, runTx, type RunTxResult } from "@ethereumjs/vm";
import { failed, rejected, RpcError } from "./errors.ts";

type Hex = PrefixedHexString;

/** The gas limit of every block of the in-process chain (anvil's default too). */
export const BLOCK_GAS_LIMIT = 30_000_000n;
export const ZERO_ROOT = new Uint8Array(32);

export interface CallArgs {
  from?: Hex;
  to?: Hex | null;
  gas?: Hex;
  value?: Hex;
  data?: Hex;
  input?: Hex;
  accessList?: { address: Hex; storageKeys: Hex[] }[];
}

/** The block a simulation runs in: an existing one, or the next one ("pending"). Plain values, so
 * the chain's thread can hand it to the simulation thread. */
export interface SimBlock {
  number: bigint;
  parentHash: Hex;
  timestamp: bigint;
  mixHash: Hex;
  /** The state the simulation starts from. */
  root: Hex;
}

/** What BLOCKHASH needs of the chain: a block's hash by number. */
export interface BlockSource {
  getBlock(id: Uint8Array | number | bigint): Promise<unknown>;
  putBlock(): Promise<void>;
  shallowCopy(): BlockSource;
}

/** What a simulated call tells: its outcome and the gas it took. */
type SimResult = Pick<RunTxResult, "execResult" | "totalGasSpent" | "gasRefund">;

export interface Simulation {
  sm: MerkleStateManager;
  run(args: CallArgs, gas: bigint): Promise<SimResult>;
}

/** The state trie over a store of nodes, as the chain keeps it (keys hashed, values as bytes). */
export function stateManagerOver(common: Common, db: DB<string, string | Uint8Array>): MerkleStateManager {
  const trie = new MerklePatriciaTrie({ useKeyHashing: true, common, db, valueEncoding: ValueEncoding.Bytes });
  return new MerkleStateManager({ common, trie });
}

/** Error(string)'s and Panic(uint256)'s selectors: Solidity's built-in revert reasons. */
const ERROR_SELECTOR = "0x08c379a0";
const PANIC_SELECTOR = "0x4e487b71";

/** The reason of a built-in revert, decoded by hand: viem's decoder would add ≈ 0.4 s to the start
 * of every thread that runs the EVM, for two fixed layouts. */
function builtInReason(data: Uint8Array): string {
  const selector = bytesToHex(data.subarray(0, 4));
  const word = (at: number) => (data.length >= at + 32 ? BigInt(bytesToHex(data.subarray(at, at + 32))) : undefined);
  if (selector === PANIC_SELECTOR && data.length === 36) return `: panic code ${word(4)}`;
  if (selector !== ERROR_SELECTOR) return "";
  const offset = word(4);
  if (offset === undefined || offset > BigInt(data.length)) return "";
  const length = word(4 + Number(offset));
  const start = 4 + Number(offset) + 32;
  if (length === undefined || BigInt(start) + length > BigInt(data.length)) return "";
  return `: ${new TextDecoder().decode(data.subarray(start, start + Number(length)))}`;
}

export function revertError(returnValue: Uint8Array): RpcError {
  // Custom errors are left to the caller's ABI: anvil says only "execution reverted" and hands
  // over the data.
  return new RpcError(3, `execution reverted${builtInReason(returnValue)}`, bytesToHex(returnValue));
}

/** Runs unsigned transactions from anyone on `sm` (already at `block.root`), in `block`. */
export async function simulation(common: Common, sm: MerkleStateManager, blockchain: BlockSource, block: SimBlock): Promise<Simulation> {
  // The stub is all the VM reads of a chain (BLOCKHASH); ethereumjs types it as its Blockchain.
  const vm = await createVM({ common, stateManager: sm, blockchain: blockchain as unknown as NonNullable<Parameters<typeof createVM>[0]>["blockchain"] });
  const header = createBlock(
    {
      header: {
        number: block.number,
        parentHash: hexToBytes(block.parentHash),
        timestamp: block.timestamp,
        gasLimit: BLOCK_GAS_LIMIT,
        // A call pays no fee, as on geth and anvil when it names no gas price.
        baseFeePerGas: 0n,
        excessBlobGas: 0n,
        parentBeaconBlockRoot: ZERO_ROOT,
        mixHash: hexToBytes(block.mixHash),
      },
    },
    { common },
  );
  return {
    sm,
    async run(args: CallArgs, gas: bigint): Promise<SimResult> {
      const from = args.from ? new Address(hexToBytes(args.from)) : new Address(new Uint8Array(20));
      const account = (await sm.getAccount(from)) ?? new Account();
      const value = args.value ? BigInt(args.value) : 0n;
      if (account.balance < value) throw rejected("Insufficient funds for gas * price + value");
      const tx = createAccessList2930Tx(
        {
          nonce: account.nonce,
          gasLimit: gas,
          gasPrice: 0n,
          to: args.to ?? undefined,
          value,
          data: args.data ?? args.input ?? "0x",
          accessList: args.accessList ?? [],
        },
        { common: vm.common, freeze: false },
      );
      // The caller is taken on its word, as eth_call does: the transaction is never signed.
      tx.getSenderAddress = () => from;
      await vm.evm.journal.checkpoint();
      try {
        if (!account.isContract()) {
          return await runTx(vm, { tx, block: header, skipBalance: true, skipNonce: true, skipBlockGasLimitValidation: true, skipHardForkValidation: true });
        }
        // EIP-3607 refuses transactions from an address with code; geth and anvil still answer
        // calls from one, so the message runs here without the transaction around it.
        const intrinsic = tx.getIntrinsicGas();
        if (gas < intrinsic) throw new Error(`intrinsic gas too low: ${gas} < ${intrinsic}`);
        const { execResult } = await vm.evm.runCall({ caller: from, origin: from, to: tx.to, value, data: tx.data, gasLimit: gas - intrinsic, block: header });
        const used = intrinsic + execResult.executionGasUsed;
        const refund = (execResult.gasRefund ?? 0n) < used / 5n ? (execResult.gasRefund ?? 0n) : used / 5n;
        return { execResult, totalGasSpent: used - refund, gasRefund: refund };
      } catch (err) {
        throw failed((err as Error).message.split("\n")[0]!);
      } finally {
        await vm.evm.journal.revert();
      }
    },
  };
}

/** eth_call: the return data, or the revert as anvil answers it. */
export async function call(sim: Simulation, args: CallArgs): Promise<Hex> {
  const gas = args.gas ? BigInt(args.gas) : BLOCK_GAS_LIMIT;
  const { execResult } = await sim.run(args, gas);
  const error = execResult.exceptionError;
  if (error === undefined) return bytesToHex(execResult.returnValue);
  if (error.error === "revert") throw revertError(execResult.returnValue);
  throw failed(`execution failed: ${error.error}`);
}

/** The smallest gas limit with which the transaction succeeds, found like geth: one run at the
 * cap, an optimistic guess, then a binary search to within 1.5 %. */
export async function estimateGas(sim: Simulation, args: CallArgs): Promise<bigint> {
  const cap = args.gas ? BigInt(args.gas) : BLOCK_GAS_LIMIT;
  const first = await sim.run(args, cap);
  const error = first.execResult.exceptionError;
  if (error?.error === "revert") throw revertError(first.execResult.returnValue);
  if (error) throw failed(error.error === "out of gas" ? `gas required exceeds allowance (${cap})` : `execution failed: ${error.error}`);
  // A plain transfer costs what it costs, as geth answers it: no search.
  const data = args.data ?? args.input ?? "0x";
  if (data === "0x" && args.to && (await sim.sm.getCode(new Address(hexToBytes(args.to)))).length === 0) return first.totalGasSpent;
  const succeeds = async (gas: bigint) => {
    try {
      return (await sim.run(args, gas)).execResult.exceptionError === undefined;
    } catch {
      return false; // below the intrinsic gas
    }
  };
  const used = first.totalGasSpent + first.gasRefund;
  let lo = used - 1n;
  let hi = cap;
  const optimistic = ((used + 2300n) * 64n) / 63n;
  if (optimistic < hi) {
    if (await succeeds(optimistic)) hi = optimistic;
    else lo = optimistic;
  }
  while (lo + 1n < hi) {
    if (((hi - lo) * 1000n) / hi < 15n) break;
    const mid = (lo + hi) / 2n;
    if (await succeeds(mid)) hi = mid;
    else lo = mid;
  }
  return hi;
}
