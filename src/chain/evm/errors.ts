/**
 * JSON-RPC errors of the in-process chain, shaped like anvil's so that viem maps them to the same
 * typed errors (a revert carries `code: 3` and the revert data, which viem decodes into the
 * contract's custom error or require message).
 */
import type { RpcErrorBody } from "../endpoint.ts";
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: string,
  ) {
    super(message);
    this.name = "RpcError";
  }
}

export const methodNotFound = (method: string) => new RpcError(-32601, `the method ${method} does not exist/is not available`);
export const invalidParams = (why: string) => new RpcError(-32602, `invalid params: ${why}`);
/** anvil answers transaction-pool refusals (nonce, funds) with -32003. */
export const rejected = (message: string) => new RpcError(-32003, message);
export const failed = (message: string) => new RpcError(-32000, message);

/** A thrown error as a JSON-RPC error, to cross a thread: RpcErrors keep their code and revert data. */
export function errorBody(err: unknown): RpcErrorBody {
  const e = err as { code?: unknown; message?: unknown; data?: unknown };
  const code = typeof e?.code === "number" && Number.isInteger(e.code) ? e.code : -32603;
  return { code, message: String(e?.message ?? err), ...(e?.data !== undefined ? { data: e.data } : {}) };
}
