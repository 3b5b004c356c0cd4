/**
 * A thread that runs the public's eth_call and eth_estimateGas against the in-process chain's
 * state, so that code which loops runs neither on the server's event loop nor in the chain's own
 * thread (where the server's purchases and reads would wait behind it), and so that a call past
 * the wall-clock limit can be stopped the only way a running EVM can be: index.ts terminates this
 * thread and starts another. It asks the chain's thread, on its port, for the block a call runs
 * in, for state nodes (kept here: a node is stored by its hash and never changes) and for block
 * hashes (BLOCKHASH); it writes nothing back.
 *
 * Listed as an entrypoint of the compiled binary (scripts/build.ts), as Bun needs for a worker.
 */
import { type Common, createCustomCommon, Hardfork, Mainnet } from "@ethereumjs/common";
import { bigIntToHex, hexToBytes, type PrefixedHexString } from "@ethereumjs/util";
import type { RpcErrorBody } from "../endpoint.ts";
import type { StateQuestion, StateReply } from "./chain-worker.ts";
import { errorBody, RpcError } from "./errors.ts";
import { callArgs } from "./methods.ts";
import { type NodeSource, OverlayStore } from "./nodes.ts";
import { type BlockSource, call, estimateGas, type SimBlock, simulation, stateManagerOver } from "./simulate.ts";

export type SimRequest = { init: { chainId: number; port: MessagePort } } | { id: number; method: string; params: unknown[] };
/** `running` comes first, once the call's state is loaded and its EVM starts; then its answer. */
export type SimReply = { id: number; running: true } | { id: number; result: unknown } | { id: number; error: RpcErrorBody };

declare const self: Worker;

/** Nodes kept between calls, by size; dropped all at once past this (a call fetches what it needs again). */
const CACHE_BYTES = 64 * 1024 * 1024;

let port: MessagePort;
let common: Common;
let seq = 1;
const asked = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();

function ask(request: StateQuestion): Promise<unknown> {
  const id = seq++;
  return new Promise((resolve, reject) => {
    asked.set(id, { resolve, reject });
    port.postMessage({ ...request, id });
  });
}

function onState(reply: StateReply) {
  const waiting = asked.get(reply.id);
  if (!waiting) return;
  asked.delete(reply.id);
  if ("error" in reply) waiting.reject(new RpcError(reply.error.code, reply.error.message));
  else waiting.resolve(reply.value);
}

const cache = new Map<string, Uint8Array>();
let cached = 0;
const nodes: NodeSource = {
  async get(key) {
    const hit = cache.get(key);
    if (hit) return hit;
    const value = (await ask({ node: key })) as Uint8Array | undefined;
    if (value) {
      if (cached + value.length > CACHE_BYTES) {
        cache.clear();
        cached = 0;
      }
      cache.set(key, value);
      cached += value.length;
    }
    return value;
  },
};

/** Block hashes kept between calls: a mined block's hash never changes (the chain has one writer
 * and no reorgs), and a call that loops on BLOCKHASH would otherwise ask the chain's thread for one
 * every few dozen gas. BLOCKHASH reaches 256 blocks back, so a few times that is plenty. */
const hashes = new Map<number, PrefixedHexString>();
const HASHES_KEPT = 1024;

const blocks: BlockSource = {
  async getBlock(id) {
    const n = typeof id === "object" ? undefined : Number(id);
    let hash = n === undefined ? undefined : hashes.get(n);
    if (n !== undefined && !hash) {
      hash = (await ask({ hash: n })) as PrefixedHexString | undefined;
      if (hash) {
        if (hashes.size >= HASHES_KEPT) hashes.clear();
        hashes.set(n, hash);
      }
    }
    if (!hash) throw new Error(`no block ${String(id)}`);
    const found = hash;
    return { hash: () => hexToBytes(found) };
  },
  async putBlock() {},
  shallowCopy: () => blocks,
};

async function simulate(id: number, method: string, params: unknown[]): Promise<unknown> {
  const args = callArgs(params[0]);
  const block = (await ask({ block: { method, tag: params[1] } })) as SimBlock;
  const sm = stateManagerOver(common, new OverlayStore(nodes));
  await sm.setStateRoot(hexToBytes(block.root));
  const sim = await simulation(common, sm, blocks, block);
  self.postMessage({ id, running: true } satisfies SimReply);
  if (method === "eth_call") return call(sim, args);
  if (method === "eth_estimateGas") return bigIntToHex(await estimateGas(sim, args));
  throw new RpcError(-32601, `the method ${method} does not exist/is not available`);
}

self.onmessage = async (event: MessageEvent<SimRequest>) => {
  const request = event.data;
  if ("init" in request) {
    common = createCustomCommon({ chainId: request.init.chainId, name: `stowage-${request.init.chainId}` }, Mainnet, { hardfork: Hardfork.Cancun });
    port = request.init.port;
    port.addEventListener("message", (m) => onState((m as { data: StateReply }).data));
    port.start();
    return;
  }
  try {
    self.postMessage({ id: request.id, result: await simulate(request.id, request.method, request.params) } satisfies SimReply);
  } catch (err) {
    self.postMessage({ id: request.id, error: errorBody(err) } satisfies SimReply);
  }
};
