/**
 * The public JSON-RPC filter in front of the chain (`POST /rpc`): standard reads and
 * `eth_sendRawTransaction` pass; node-control calls (`anvil_*`, `evm_*`, `debug_*`, account
 * unlocking, `eth_sendTransaction`) and anything unknown are refused, alone or inside a batch.
 * The calls that run code (eth_call, eth_estimateGas) get their gas capped here; public-rpc.ts
 * bounds everything else one client can make the chain do.
 */
import type { RpcId, RpcRequest, RpcResponse } from "./endpoint.ts";

/** The only methods that reach the chain. Everything else is refused. */
export const ALLOWED_METHODS = new Set([
  "eth_blockNumber",
  "eth_call",
  "eth_chainId",
  "eth_estimateGas",
  "eth_feeHistory",
  "eth_gasPrice",
  "eth_getBalance",
  "eth_getBlockByHash",
  "eth_getBlockByNumber",
  "eth_getBlockTransactionCountByHash",
  "eth_getBlockTransactionCountByNumber",
  "eth_getCode",
  "eth_getLogs",
  "eth_getStorageAt",
  "eth_getTransactionByHash",
  "eth_getTransactionCount",
  "eth_getTransactionReceipt",
  "eth_maxPriorityFeePerGas",
  "eth_sendRawTransaction",
  "eth_syncing",
  "net_version",
  "web3_clientVersion",
]);

export const MAX_RPC_BODY = 512 * 1024;

/** The allowed methods that run code: each is a simulation, capped in gas and run with a deadline. */
export const SIMULATIONS = new Set(["eth_call", "eth_estimateGas"]);

type Id = RpcId;

const fail = (id: Id, code: number, message: string): RpcResponse => ({ jsonrpc: "2.0", id, error: { code, message } });

function validId(v: unknown): v is Id {
  return v === null || typeof v === "string" || (typeof v === "number" && Number.isFinite(v));
}

/** A well-formed, allowed request, or the error to answer in its place. */
export function check(entry: unknown): RpcRequest | RpcResponse {
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) return fail(null, -32600, "Invalid request");
  const { jsonrpc, id, method, params } = entry as Record<string, unknown>;
  const safeId = validId(id) ? id : null;
  if (jsonrpc !== "2.0" || typeof method !== "string" || !validId(id) || id === undefined) return fail(safeId, -32600, "Invalid request");
  if (params !== undefined && typeof params !== "object") return fail(safeId, -32602, "Invalid params");
  if (!ALLOWED_METHODS.has(method)) return fail(safeId, -32601, `Method not allowed: ${method.slice(0, 64)}`);
  return { jsonrpc: "2.0", id, method, params };
}

export const isRequest = (r: RpcRequest | RpcResponse): r is RpcRequest => "method" in r;

export interface GasCaps {
  /** Gas one simulation may run with. */
  perCall: bigint;
  /** Gas all the simulations of one request (a batch) may run with together. */
  perBatch: bigint;
}

/** The gas of the cheapest transaction: a share below it could run nothing. */
const INTRINSIC_GAS = 21_000n;

/**
 * The gas each simulation of a request runs with, written into its call object: a caller's own
 * `gas` is kept when it is within the per-call cap and the batch's budget, else that entry is
 * refused; entries that name no gas share what is left of the budget, each at most the per-call
 * cap (one call alone gets the whole cap). Other entries pass as they are.
 */
export function allotGas(entries: (RpcRequest | RpcResponse)[], caps: GasCaps): (RpcRequest | RpcResponse)[] {
  const call = (r: RpcRequest) => (Array.isArray(r.params) ? r.params[0] : undefined);
  const asked = new Map<RpcRequest, bigint | undefined>();
  const refused = new Map<RpcRequest, RpcResponse>();
  let spent = 0n;
  for (const r of entries) {
    if (!isRequest(r) || !SIMULATIONS.has(r.method)) continue;
    const args = call(r);
    if (typeof args !== "object" || args === null || Array.isArray(args)) {
      refused.set(r, fail(r.id, -32602, "Invalid params: the call must be an object"));
      continue;
    }
    const gas = (args as { gas?: unknown }).gas;
    if (gas === undefined || gas === null) {
      asked.set(r, undefined);
      continue;
    }
    if (typeof gas !== "string" || !/^0x[0-9a-fA-F]{1,64}$/.test(gas)) {
      refused.set(r, fail(r.id, -32602, "Invalid params: gas must be a hex quantity"));
      continue;
    }
    const wanted = BigInt(gas);
    if (wanted > caps.perCall) {
      refused.set(r, fail(r.id, -32602, `gas ${wanted} is over this gateway's cap of ${caps.perCall} gas per call`));
    } else if (spent + wanted > caps.perBatch) {
      refused.set(r, fail(r.id, -32005, `the batch's calls ask for more than this gateway's budget of ${caps.perBatch} gas per request`));
    } else {
      spent += wanted;
      asked.set(r, wanted);
    }
  }
  const open = [...asked.values()].filter((g) => g === undefined).length;
  const share = open === 0 ? 0n : (caps.perBatch - spent) / BigInt(open);
  const given = share < caps.perCall ? share : caps.perCall;
  return entries.map((r) => {
    if (!isRequest(r)) return r;
    const no = refused.get(r);
    if (no) return no;
    if (!asked.has(r)) return r;
    const own = asked.get(r);
    if (own === undefined && given < INTRINSIC_GAS) return fail(r.id, -32005, `the batch's other calls took this gateway's budget of ${caps.perBatch} gas per request`);
    const [args, ...rest] = r.params as unknown[];
    return { ...r, params: [{ ...(args as object), gas: `0x${(own ?? given).toString(16)}` }, ...rest] };
  });
}

/** The block tags eth_getLogs takes for fromBlock and toBlock. */
export type Tag = "earliest" | "latest" | "pending" | "safe" | "finalized";
const TAGS: ReadonlySet<string> = new Set<Tag>(["earliest", "latest", "pending", "safe", "finalized"]);

/** What an eth_getLogs asks for: a range of blocks (numbers, or tags the chain resolves), one block
 * by its hash (the chain answers it as it is), or nothing it could mean. */
export type LogQuery = { refused: RpcResponse } | { byHash: true } | { filter: Record<string, unknown>; range: { from: bigint | Tag; to: bigint | Tag } };

/** A block number (at most 64 bits, as every chain keeps them) or a tag; a missing one is "latest". */
function blockRef(v: unknown): bigint | Tag | undefined {
  if (v === undefined || v === null) return "latest";
  if (typeof v !== "string") return undefined;
  if (TAGS.has(v)) return v as Tag;
  return /^0x[0-9a-fA-F]{1,16}$/.test(v) ? BigInt(v) : undefined;
}

export function logFilter(r: RpcRequest): LogQuery {
  const filter = Array.isArray(r.params) ? r.params[0] : undefined;
  if (typeof filter !== "object" || filter === null || Array.isArray(filter)) return { refused: fail(r.id, -32602, "Invalid params: eth_getLogs takes a filter object") };
  const f = filter as Record<string, unknown>;
  if (f.blockHash !== undefined) return { byHash: true };
  const from = blockRef(f.fromBlock);
  const to = blockRef(f.toBlock);
  if (from === undefined || to === undefined) {
    return { refused: fail(r.id, -32602, `Invalid params: ${from === undefined ? "fromBlock" : "toBlock"} must be a hex block number or earliest, latest, pending, safe or finalized`) };
  }
  return { filter: f, range: { from, to } };
}

export const rpcError = fail;
