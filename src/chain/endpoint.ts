/**
 * How Stowage talks JSON-RPC to a chain, whatever carries it: HTTP for an external RPC, a Unix
 * socket for the embedded anvil (D14: its only reachable door is a socket inside the 0700 data
 * dir), or a function call for the in-process EVM. The server, the public `/rpc` filter, the CLI
 * and viem clients all go through one `RpcEndpoint`, so none of them knows which it is.
 *
 * @example
 *   const chain = ipcEndpoint("data/chain/rpc.ipc")
 *   await rpcCall(chain, "eth_chainId")   // "0x3d9"
 *   createPublicClient({ transport: endpointTransport(chain) })
 */
import { createConnection, type Socket } from "node:net";
import { custom, http, type Transport } from "viem";

export type RpcId = string | number | null;

export interface RpcRequest {
  jsonrpc: "2.0";
  id: RpcId;
  method: string;
  params?: unknown;
}

export interface RpcErrorBody {
  code: number;
  message: string;
  data?: unknown;
}

export interface RpcResponse {
  jsonrpc: "2.0";
  id: RpcId;
  result?: unknown;
  error?: RpcErrorBody;
}

export interface RpcEndpoint {
  /** Where it goes, for logs and errors ("ipc:/…/rpc.ipc", an URL without credentials, "in-process"). */
  readonly label: string;
  /** Sends requests (answered in any order, matched by id) and resolves with their answers. */
  send(batch: RpcRequest[]): Promise<RpcResponse[]>;
  /** A viem transport over this endpoint. */
  transport(): Transport;
  close(): void;
}

/** A JSON-RPC error answer thrown as an Error that viem maps by its `code` (reverts keep `data`). */
export class RpcCallError extends Error {
  override name = "RpcCallError";
  constructor(
    readonly method: string,
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

let nextId = 1;

/** One call; throws RpcCallError for an error answer. */
export async function rpcCall<T>(endpoint: RpcEndpoint, method: string, params: unknown[] = []): Promise<T> {
  const [answer] = await endpoint.send([{ jsonrpc: "2.0", id: nextId++, method, params }]);
  if (!answer) throw new RpcCallError(method, -32603, `${method}: no answer from ${endpoint.label}`);
  if (answer.error) throw new RpcCallError(method, answer.error.code, `${method}: ${answer.error.message}`, answer.error.data);
  return answer.result as T;
}

/** viem's `custom` transport over `send`, so errors keep their JSON-RPC code and revert data.
 * No retries: viem takes a revert (code 3) from a custom transport for an unknown error and
 * would run it again, and a local socket or function call does not drop requests as HTTP may. */
function customTransport(endpoint: RpcEndpoint): Transport {
  return custom(
    {
      async request({ method, params }: { method: string; params?: unknown }) {
        const [answer] = await endpoint.send([{ jsonrpc: "2.0", id: nextId++, method, params: params ?? [] }]);
        if (!answer) throw Object.assign(new Error(`no answer from ${endpoint.label}`), { code: -32603 });
        if (answer.error) throw Object.assign(new Error(answer.error.message), answer.error);
        return answer.result;
      },
    },
    { retryCount: 0 },
  );
}

/** An endpoint that answers a batch one request at a time (a socket or a function has no batch
 * of its own), with viem going through `send` like every other caller. */
function perRequest(label: string, one: (request: RpcRequest) => Promise<RpcResponse>, close: () => void): RpcEndpoint {
  const endpoint: RpcEndpoint = {
    label,
    send: (batch) => Promise.all(batch.map(one)),
    transport: () => customTransport(endpoint),
    close,
  };
  return endpoint;
}

export function httpEndpoint(url: string, timeoutMs = 20_000): RpcEndpoint {
  const label = (() => {
    const u = new URL(url);
    u.username = u.password = "";
    return u.toString();
  })();
  return {
    label,
    async send(batch) {
      const res = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(batch),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const answer = (await res.json()) as RpcResponse | RpcResponse[];
      return Array.isArray(answer) ? answer : [answer];
    },
    transport: () => http(url, { retryCount: 2, timeout: 15_000 }),
    close() {},
  };
}

/** Unix socket paths are limited by the kernel (108 bytes with the NUL on Linux). */
const MAX_SOCKET_PATH = 107;

export class SocketPathTooLong extends Error {
  override name = "SocketPathTooLong";
}

export function checkSocketPath(path: string) {
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
    throw new SocketPathTooLong(`${path} is longer than a Unix socket path may be (${MAX_SOCKET_PATH} bytes): use a shorter data dir path`);
  }
}

/**
 * JSON-RPC over a Unix socket, as anvil's and geth's IPC speak it: JSON values on one stream,
 * one per line. One connection, opened on first use and again after it drops; requests in
 * flight when it drops fail (the caller retries, as it would over HTTP).
 */
export function ipcEndpoint(path: string, timeoutMs = 20_000): RpcEndpoint {
  checkSocketPath(path);
  const label = `ipc:${path}`;
  const pending = new Map<number, { resolve(r: RpcResponse): void; reject(e: Error): void; timer: ReturnType<typeof setTimeout> }>();
  let socket: Socket | undefined;
  let buffered = "";
  let seq = 1;

  const failAll = (err: Error) => {
    for (const [id, p] of pending) {
      clearTimeout(p.timer);
      p.reject(err);
      pending.delete(id);
    }
  };

  const deliver = (value: RpcResponse | RpcResponse[]) => {
    for (const answer of Array.isArray(value) ? value : [value]) {
      const p = pending.get(answer.id as number);
      if (!p) continue;
      pending.delete(answer.id as number);
      clearTimeout(p.timer);
      p.resolve(answer);
    }
  };

  const connect = () =>
    new Promise<Socket>((resolve, reject) => {
      const s = createConnection(path);
      s.setEncoding("utf8");
      s.once("connect", () => resolve(s));
      s.once("error", (err) => {
        reject(err);
        failAll(err);
      });
      s.on("data", (text: string) => {
        buffered += text;
        let nl: number;
        while ((nl = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (line) deliver(JSON.parse(line) as RpcResponse | RpcResponse[]);
        }
      });
      s.on("close", () => {
        if (socket === s) socket = undefined;
        buffered = "";
        failAll(new Error(`${label}: connection closed`));
      });
      s.unref();
    });

  let connecting: Promise<Socket> | undefined;
  const open = async () => {
    if (socket && !socket.destroyed) return socket;
    connecting ??= connect().finally(() => (connecting = undefined));
    socket = await connecting;
    return socket;
  };

  const one = async (request: RpcRequest): Promise<RpcResponse> => {
    const s = await open();
    // Our own ids on the wire, so callers' ids (duplicates, strings) never collide.
    const id = seq++;
    const answer = new Promise<RpcResponse>((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`${label}: ${request.method} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      pending.set(id, { resolve, reject, timer });
    });
    s.write(`${JSON.stringify({ ...request, id })}\n`);
    return { ...(await answer), id: request.id };
  };

  return perRequest(label, one, () => {
    socket?.destroy();
    socket = undefined;
  });
}

/** An EIP-1193 `request` (the in-process EVM) as an endpoint; its thrown errors become answers. */
export function providerEndpoint(label: string, request: (args: { method: string; params?: unknown[] }) => Promise<unknown>): RpcEndpoint {
  const one = async (r: RpcRequest): Promise<RpcResponse> => {
    try {
      return { jsonrpc: "2.0", id: r.id, result: await request({ method: r.method, params: (r.params as unknown[] | undefined) ?? [] }) };
    } catch (err) {
      const e = err as Partial<RpcErrorBody> & Error;
      return { jsonrpc: "2.0", id: r.id, error: { code: typeof e.code === "number" ? e.code : -32603, message: e.message, ...(e.data !== undefined ? { data: e.data } : {}) } };
    }
  };
  return perRequest(label, one, () => {});
}
