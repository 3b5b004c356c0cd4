/**
 * The thread the in-process chain lives in: its EVM runs every transaction mined and every call the
 * server makes, and its journal fsyncs each block, none of it on the server's event loop (a call
 * that loops runs ≈ 70 ms per million gas). index.ts starts it and sends it JSON-RPC requests;
 * each simulation thread (sim-worker.ts) gets a port of its own on which it asks for the block a
 * call runs in, state nodes and block hashes, answered here at once, outside the chain's queue:
 * nodes are stored by their hash and never change, and a block is there once it is the head.
 *
 * Listed as an entrypoint of the compiled binary (scripts/build.ts), as Bun needs for a worker.
 */
import type { Fields, Level, Logger } from "../../log.ts";
import type { RpcErrorBody } from "../endpoint.ts";
import { Chain } from "./chain.ts";
import { errorBody } from "./errors.ts";
import { dispatch, simBlockFor } from "./methods.ts";

export type ChainRequest =
  | { open: { file: string; chainId: number } }
  | { id: number; method: string; params: unknown[]; maxLogs?: number }
  | { attach: number; port: MessagePort }
  | { detach: number }
  | { stop: true };

export type ChainReply =
  | { ready: { block: string } }
  | { failed: string }
  | { id: number; result: unknown }
  | { id: number; error: RpcErrorBody }
  | { log: { level: Level; msg: string; fields?: Fields } }
  | { stopped: true };

/** What a simulation thread asks of the chain, and its answers. */
export type StateQuestion = { block: { method: string; tag: unknown } } | { node: string } | { hash: number };
export type StateRequest = StateQuestion & { id: number };
export type StateReply = { id: number; value: unknown } | { id: number; error: RpcErrorBody };

declare const self: Worker;

const post = (reply: ChainReply) => self.postMessage(reply);

/** The chain's log lines go to the server's logger. */
const log: Logger = {
  debug: (msg, fields) => post({ log: { level: "debug", msg, fields } }),
  info: (msg, fields) => post({ log: { level: "info", msg, fields } }),
  warn: (msg, fields) => post({ log: { level: "warn", msg, fields } }),
  error: (msg, fields) => post({ log: { level: "error", msg, fields } }),
};

let chain: Chain | undefined;
const ports = new Map<number, MessagePort>();

function answerState(request: StateRequest): StateReply {
  try {
    if (!chain) throw new Error("the in-process chain is not open");
    if ("block" in request) return { id: request.id, value: simBlockFor(chain, request.block.method, request.block.tag) };
    if ("node" in request) return { id: request.id, value: chain.node(request.node) };
    return { id: request.id, value: request.hash >= 0 && BigInt(request.hash) <= chain.height ? chain.blockHash(BigInt(request.hash)) : undefined };
  } catch (err) {
    return { id: request.id, error: errorBody(err) };
  }
}

self.onmessage = async (event: MessageEvent<ChainRequest>) => {
  const request = event.data;
  if ("open" in request) {
    try {
      chain = await Chain.open(request.open.file, request.open.chainId, log);
      post({ ready: { block: chain.height.toString() } });
    } catch (err) {
      post({ failed: (err as Error).message });
    }
  } else if ("method" in request) {
    if (!chain) return post({ id: request.id, error: { code: -32603, message: "the in-process chain is not open" } });
    try {
      post({ id: request.id, result: (await dispatch(chain, request.method, request.params, { maxLogs: request.maxLogs })) ?? null });
    } catch (err) {
      post({ id: request.id, error: errorBody(err) });
    }
  } else if ("attach" in request) {
    const port = request.port;
    ports.set(request.attach, port);
    port.addEventListener("message", (m) => port.postMessage(answerState((m as { data: StateRequest }).data)));
    port.start();
  } else if ("detach" in request) {
    ports.get(request.detach)?.close();
    ports.delete(request.detach);
  } else if ("stop" in request) {
    for (const port of ports.values()) port.close();
    ports.clear();
    await chain?.stop();
    post({ stopped: true });
  }
};
