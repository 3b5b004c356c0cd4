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
import type { Simulate } from "../public-rpc.ts";
import type { ChainReply, ChainRequest } from "./chain-worker.ts";
import { failed, methodNotFound, RpcError } from "./errors.ts";
import type { SimReply, SimRequest } from "./sim-worker.ts";
import { JOURNAL_FILE } from "./journal.ts";

export interface InProcessChain {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
  /** Runs one eth_call or eth_estimateGas in a simulation thread; an aborted `signal` stops it. */
  simulate: Simulate;
  stop(): Promise<void>;
}

export { JOURNAL_FILE };

/**
 * A worker's script. In the compiled binary every module's `import.meta.url` is the binary's own,
 * at the root of its embedded files, where each entrypoint keeps its path under src/.
 */
function workerScript(name: string): string {
  const compiled = import.meta.url.startsWith("file:///$bunfs/");
  return new URL(compiled ? `./chain/evm/${name}` : `./${name}`, import.meta.url).href;
}

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
  job?: { id: number; done(reply: SimReply | { crashed: string }): void };
}

export async function createInProcessChain({ dir, chainId, log }: { dir: string; chainId: number; log: Logger }): Promise<InProcessChain> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  // Two writers on one journal would interleave records; the kernel lock goes with a killed holder.
  const lock = acquireLock(dir);

  const worker = new Worker(workerScript("chain-worker.ts"));
  const hold = holdWhileBusy(worker);
  const send = (request: ChainRequest, transfer?: MessagePort[]) => worker.postMessage(request, transfer ?? []);
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  let seq = 1;
  let dead: Error | undefined;
  let opened: { resolve(block: string): void; reject(e: Error): void } | undefined;
  let stopped: (() => void) | undefined;

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
  worker.onerror = (event: ErrorEvent) => {
    dead = failed(`the in-process chain's thread failed: ${event.message}`);
    log.error("the in-process chain's thread failed", { err: event.message });
    opened?.reject(dead);
    stopped?.();
    for (const waiting of pending.values()) {
      hold.end();
      waiting.reject(dead);
    }
    pending.clear();
  };

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

  let closing = false;

  function request({ method, params }: { method: string; params?: unknown[] }): Promise<unknown> {
    if (typeof method !== "string") return Promise.reject(methodNotFound(String(method)));
    if (dead) return Promise.reject(dead);
    if (closing) return Promise.reject(failed("the in-process chain is stopped"));
    const id = seq++;
    hold.start();
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      send({ id, method, params: Array.isArray(params) ? params : [] });
    });
  }

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
    const sim = new Worker(workerScript("sim-worker.ts"));
    const thread: SimThread = { worker: sim, port: nextPort++, hold: holdWhileBusy(sim) };
    const channel = new MessageChannel();
    send({ attach: thread.port, port: channel.port1 }, [channel.port1]);
    sim.postMessage({ init: { chainId, port: channel.port2 } } satisfies SimRequest, [channel.port2]);
    sim.onmessage = (event: MessageEvent<SimReply>) => {
      if (thread.job?.id === event.data.id) thread.job.done(event.data);
    };
    sim.onerror = (event: ErrorEvent) => {
      log.warn("a simulation thread failed", { err: event.message });
      thread.job?.done({ crashed: event.message });
    };
    return thread;
  }

  const simulate: Simulate = (call: RpcRequest, signal: AbortSignal) =>
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
    request,
    simulate,
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
