/**
 * An EVM chain inside the server's own process, with no network port: the embedded chain on hosts
 * where anvil cannot be shut in a private network namespace (D14). It speaks EIP-1193 `request`,
 * so viem's `custom()` transport and the JSON-RPC socket (../ipc-server.ts) sit on it directly.
 *
 * The chain itself runs in a thread of its own (chain-worker.ts): a transaction or a call that
 * loops would otherwise stop every listener of the server while it runs (≈ 70 ms per million gas).
 * The public's eth_call and eth_estimateGas run in simulation threads (sim-worker.ts) beside it,
 * started when first needed and kept while they finish in time; `simulate` stops one at its
 * caller's signal (the public RPC's wall-clock limit) by terminating it.
 *
 * @example
 *   const chain = await createInProcessChain({ dir: "data/chain/evm", chainId: 985, log })
 *   // retryCount 0: viem retries errors it does not know (a revert's code 3) from custom transports
 *   const client = createPublicClient({ transport: custom(chain, { retryCount: 0 }) })
 */
import { chmodSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { acquireLock } from "../../datadir/lock.ts";
import type { Logger } from "../../log.ts";
import type { RpcRequest, RpcResponse } from "../endpoint.ts";
import type { ReadLogs, Simulate } from "../public-rpc.ts";
import type { ChainReply, ChainRequest } from "./chain-worker.ts";
import { failed, methodNotFound, RpcError } from "./errors.ts";
import type { SimReply, SimRequest } from "./sim-worker.ts";
import { JOURNAL_FILE } from "./journal.ts";
import { workerScript } from "../../worker-script.ts";

export interface InProcessChain {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
  /**
   * Runs one eth_call or eth_estimateGas in a simulation thread; an aborted `signal` stops it.
   * `onRunning` is told when the thread has the call's state and starts its EVM (a thread loads
   * for a while first): for callers that time the call itself.
   */
  simulate(request: RpcRequest, signal: AbortSignal, onRunning?: () => void): ReturnType<Simulate>;
  /** Runs one eth_getLogs in the chain's queue that stops once it has found more than `max` logs. */
  readLogs: ReadLogs;
  stop(): Promise<void>;
}

export { JOURNAL_FILE };

/** A thread that holds the process open only while something waits on it. */
function holdWhileBusy(worker: Worker) {
  let busy = 0;
  worker.unref();
  return {
    start() {
      if (busy++ === 0) worker.ref();
    },
    end() {
      if (--busy === 0) worker.unref();
    },
  };
}

interface SimThread {
  worker: Worker;
  port: number;
  hold: ReturnType<typeof holdWhileBusy>;
  /** The job it runs now. */
  job?: { id: number; running?: () => void; done(reply: Exclude<SimReply, { running: true }> | { crashed: string }): void };
}

export interface InProcessChainOptions {
  dir: string;
  chainId: number;
  log: Logger;
  /** The chain thread's script: chain-worker.ts unless a test names another. */
  script?: string;
}

export async function createInProcessChain({ dir, chainId, log, script }: InProcessChainOptions): Promise<InProcessChain> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  // Two writers on one journal would interleave records; the kernel lock goes with a killed holder.
  const lock = acquireLock(dir);

  const worker = new Worker(script ?? workerScript("chain/evm/chain-worker.ts"));
  const hold = holdWhileBusy(worker);
  const send = (request: ChainRequest, transfer?: MessagePort[]) => worker.postMessage(request, transfer ?? []);
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  let seq = 1;
  let dead: Error | undefined;
  let closing = false;
  let opened: { resolve(block: string): void; reject(e: Error): void } | undefined;
  let stopped: (() => void) | undefined;
  /** Ends the simulation threads' jobs: they ask the chain's thread for their state, in vain now. */
  let endSimulations = () => {};

  worker.onmessage = (event: MessageEvent<ChainReply>) => {
    const m = event.data;
    if ("log" in m) log[m.log.level](m.log.msg, m.log.fields);
    else if ("ready" in m) opened?.resolve(m.ready.block);
    else if ("failed" in m) opened?.reject(new Error(m.failed));
    else if ("stopped" in m) stopped?.();
    else {
      const waiting = pending.get(m.id);
      if (!waiting) return;
      pending.delete(m.id);
      hold.end();
      if ("error" in m) waiting.reject(new RpcError(m.error.code, m.error.message, m.error.data as string | undefined));
      else waiting.resolve(m.result);
    }
  };
  /** The thread is gone: whatever waits on it fails now, and so does every later request. */
  const lost = (err: Error) => {
    dead ??= err;
    opened?.reject(dead);
    stopped?.();
    for (const waiting of pending.values()) {
      hold.end();
      waiting.reject(dead);
    }
    pending.clear();
    endSimulations();
  };
  worker.onerror = (event: ErrorEvent) => {
    log.error("the in-process chain's thread failed", { err: event.message });
    lost(failed(`the in-process chain's thread failed: ${event.message}`));
  };
  // A thread can also end with no error event (process.exit, the runtime giving up on it).
  worker.addEventListener("close", (event: CloseEvent) => {
    if (closing || dead) return lost(failed("the in-process chain is stopped"));
    log.error("the in-process chain's thread exited", { code: event.code });
    lost(failed(`the in-process chain's thread exited (code ${event.code})`));
  });

  hold.start();
  try {
    const block = await new Promise<string>((resolve, reject) => {
      opened = { resolve, reject };
      send({ open: { file: join(dir, JOURNAL_FILE), chainId } });
    });
    log.info("in-process chain ready", { chainId, block: Number(block) });
  } catch (err) {
    worker.terminate();
    lock.release();
    throw err;
  } finally {
    hold.end();
    opened = undefined;
  }

  function request({ method, params }: { method: string; params?: unknown[] }, maxLogs?: number): Promise<unknown> {
    if (typeof method !== "string") return Promise.reject(methodNotFound(String(method)));
    if (closing) return Promise.reject(failed("the in-process chain is stopped"));
    if (dead) return Promise.reject(dead);
    const id = seq++;
    hold.start();
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      send({ id, method, params: Array.isArray(params) ? params : [], ...(maxLogs !== undefined ? { maxLogs } : {}) });
    });
  }

  const readLogs: ReadLogs = async (call, max) => {
    try {
      return { jsonrpc: "2.0", id: call.id, result: await request({ method: "eth_getLogs", params: Array.isArray(call.params) ? call.params : [] }, max) };
    } catch (err) {
      const { code, message } = err as Partial<RpcError> & Error;
      return { jsonrpc: "2.0", id: call.id, error: { code: typeof code === "number" ? code : -32603, message } };
    }
  };

  // ---- simulation threads ----

  const idle: SimThread[] = [];
  const busy = new Set<SimThread>();
  let nextPort = 1;
  let nextJob = 1;

  const discard = (thread: SimThread) => {
    busy.delete(thread);
    thread.worker.terminate();
    if (!closing && !dead) send({ detach: thread.port });
  };

  function startThread(): SimThread {
    const sim = new Worker(workerScript("chain/evm/sim-worker.ts"));
    const thread: SimThread = { worker: sim, port: nextPort++, hold: holdWhileBusy(sim) };
    const channel = new MessageChannel();
    send({ attach: thread.port, port: channel.port1 }, [channel.port1]);
    sim.postMessage({ init: { chainId, port: channel.port2 } } satisfies SimRequest, [channel.port2]);
    sim.onmessage = (event: MessageEvent<SimReply>) => {
      const reply = event.data;
      if (thread.job?.id !== reply.id) return;
      if ("running" in reply) thread.job.running?.();
      else thread.job.done(reply);
    };
    sim.onerror = (event: ErrorEvent) => {
      log.warn("a simulation thread failed", { err: event.message });
      thread.job?.done({ crashed: event.message });
    };
    // One that ends with no error event: its job fails now, and no later job is handed to it.
    sim.addEventListener("close", () => {
      thread.job?.done({ crashed: "the simulation thread exited" });
      const at = idle.indexOf(thread);
      if (at >= 0) idle.splice(at, 1);
    });
    return thread;
  }

  endSimulations = () => {
    for (const thread of [...busy]) thread.job?.done({ crashed: "the in-process chain's thread is gone" });
  };

  const simulate = (call: RpcRequest, signal: AbortSignal, onRunning?: () => void) =>
    new Promise<RpcResponse>((resolve) => {
      const answer = (error: { code: number; message: string; data?: unknown }) => resolve({ jsonrpc: "2.0", id: call.id, error });
      if (dead || closing) return answer({ code: -32603, message: "the in-process chain is stopped" });
      const thread = idle.pop() ?? startThread();
      busy.add(thread);
      const id = nextJob++;
      const finish = (keep: boolean) => {
        signal.removeEventListener("abort", onAbort);
        thread.job = undefined;
        thread.hold.end();
        if (keep && !closing) {
          busy.delete(thread);
          idle.push(thread);
        } else discard(thread);
      };
      // The EVM cannot be interrupted from outside its thread: the thread goes, and a new one
      // starts loading now rather than on the next call.
      const onAbort = () => {
        finish(false);
        if (!closing && !dead) idle.push(startThread());
        answer({ code: -32000, message: "execution aborted" });
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      thread.job = {
        id,
        running: onRunning,
        done(reply) {
          finish(!("crashed" in reply));
          if ("crashed" in reply) answer({ code: -32603, message: "the simulation failed" });
          else resolve("error" in reply ? { jsonrpc: "2.0", id: call.id, error: reply.error } : { jsonrpc: "2.0", id: call.id, result: reply.result });
        },
      };
      thread.hold.start();
      thread.worker.postMessage({ id, method: call.method, params: Array.isArray(call.params) ? call.params : [] } satisfies SimRequest);
    });

  return {
    request: (args) => request(args),
    simulate,
    readLogs,
    async stop() {
      if (closing) return;
      closing = true;
      for (const thread of [...idle, ...busy]) {
        thread.job?.done({ crashed: "the in-process chain is stopped" });
        thread.worker.terminate();
      }
      idle.length = 0;
      busy.clear();
      if (!dead) {
        hold.start();
        // The chain's queue drains and its journal closes before the thread goes.
        await new Promise<void>((resolve) => {
          stopped = resolve;
          send({ stop: true });
        });
        hold.end();
      }
      worker.terminate();
      lock.release();
    },
  };
}
