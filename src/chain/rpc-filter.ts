/**
 * The public JSON-RPC filter in front of the chain (`POST /rpc`): standard reads and
 * `eth_sendRawTransaction` pass; node-control calls (`anvil_*`, `evm_*`, `debug_*`, account
 * unlocking, `eth_sendTransaction`) and anything unknown are refused, alone or inside a batch.
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
export const MAX_BATCH = 100;

type Id = RpcId;

const fail = (id: Id, code: number, message: string): RpcResponse => ({ jsonrpc: "2.0", id, error: { code, message } });

function validId(v: unknown): v is Id {
  return v === null || typeof v === "string" || (typeof v === "number" && Number.isFinite(v));
}

/** A well-formed, allowed request, or the error to answer in its place. */
function check(entry: unknown): RpcRequest | RpcResponse {
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) return fail(null, -32600, "Invalid request");
  const { jsonrpc, id, method, params } = entry as Record<string, unknown>;
  const safeId = validId(id) ? id : null;
  if (jsonrpc !== "2.0" || typeof method !== "string" || !validId(id) || id === undefined) return fail(safeId, -32600, "Invalid request");
  if (params !== undefined && typeof params !== "object") return fail(safeId, -32602, "Invalid params");
  if (!ALLOWED_METHODS.has(method)) return fail(safeId, -32601, `Method not allowed: ${method.slice(0, 64)}`);
  return { jsonrpc: "2.0", id, method, params };
}

const isRequest = (r: RpcRequest | RpcResponse): r is RpcRequest => "method" in r;

/** Sends the allowed entries upstream as one batch and answers every entry in its order. */
export async function filterRpc(body: unknown, forward: (batch: RpcRequest[]) => Promise<RpcResponse[]>): Promise<RpcResponse | RpcResponse[]> {
  const batch = Array.isArray(body);
  const entries: unknown[] = batch ? body : [body];
  if (batch && entries.length === 0) return fail(null, -32600, "Empty batch");
  if (entries.length > MAX_BATCH) return fail(null, -32600, `Batch larger than ${MAX_BATCH}`);
  const checked = entries.map(check);
  const allowed = checked.filter(isRequest);
  // Upstream ids are ours (positions), so clients' duplicate or odd ids cannot confuse the match.
  const answers = allowed.length ? await forward(allowed.map((r, i) => ({ ...r, id: i }))) : [];
  const byPosition = new Map(answers.map((a) => [a.id, a]));
  let next = 0;
  const out = checked.map((r) => {
    if (!isRequest(r)) return r;
    const a = byPosition.get(next++);
    return a ? { ...a, id: r.id } : fail(r.id, -32603, "No answer from the chain");
  });
  return batch ? out : (out[0] as RpcResponse);
}

export const rpcError = fail;
