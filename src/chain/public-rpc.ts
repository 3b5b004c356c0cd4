/**
 * What one client can make the chain do through the public `POST /rpc`, whatever engine serves it
 * (anvil, the in-process EVM, an external RPC). A client (clientKey: an IPv4 address, an IPv6 /64)
 * has a budget of requests per minute, each batch entry counting one; a batch has a size cap; the
 * calls that run code (eth_call, eth_estimateGas) run with capped gas (rpc-filter.ts' allotGas),
 * at most `simulations` at once across all clients, taken client by client in turn, and each is
 * answered within the wall-clock limit, done or not: the in-process EVM's simulation threads are
 * stopped there, a call inside anvil or an external node keeps its slot until it ends. Everything
 * else the public sends goes to the chain a few requests at a time too, over its own connection
 * where the chain has one, so the server's own calls (purchases, the indexer, the resolver) never
 * wait behind the public's; none of these limits applies to them. Work waiting for a slot is
 * bounded per client as well as in all (fair-queue.ts), so nobody is turned away because others
 * keep the line full. eth_getLogs spans a bounded range of blocks, its tags resolved here first,
 * and the logs one request gets back are bounded: the in-process EVM stops scanning at the cap,
 * anvil and an external node are answered past it but their answer is not passed on.
 *
 * @example
 *   const rpc = createPublicRpc({ forward: endpoint.send, limits })
 *   const refused = rpc.admit(clientIp(request))   // before the body is read
 *   const { status, body, headers } = await rpc.handle(JSON.parse(text), clientIp(request))
 */
import type { Config } from "../config.ts";
import { clientKey } from "../http/client-key.ts";
import { createRateLimiter, type Limit, type RateLimiter } from "../http/rate-limit.ts";
import type { RpcErrorBody, RpcRequest, RpcResponse } from "./endpoint.ts";
import { FairQueue, type Outcome } from "./fair-queue.ts";
import { allotGas, check, isRequest, logFilter, rpcError, SIMULATIONS, type Tag } from "./rpc-filter.ts";

/** Runs one simulation (eth_call, eth_estimateGas) to its end, or stops it when `signal` aborts. */
export type Simulate = (request: RpcRequest, signal: AbortSignal) => Promise<RpcResponse>;

/** Runs one eth_getLogs that stops once it has found more than `max` logs (its answer then holds
 * `max + 1`): where the chain can be told so (the in-process EVM). */
export type ReadLogs = (request: RpcRequest, max: number) => Promise<RpcResponse>;

export interface RpcLimits {
  /** Requests per minute per client, a batch counting each entry; 0 = no limit. */
  perMinute: number;
  /** Entries of one batch at most. */
  maxBatch: number;
  /** Gas of one simulation at most. */
  gasPerCall: bigint;
  /** Gas of all the simulations of one request together at most. */
  gasPerBatch: bigint;
  /** Wall-clock time a request's simulations and reads have, from its arrival. */
  timeoutMs: number;
  /** Simulations running at once, all clients together. */
  simulations: number;
  /** Blocks one eth_getLogs may span. */
  logBlocks: number;
  /** Logs the eth_getLogs entries of one request may return together. */
  maxLogs: number;
}

/** The limits as the operator set them (src/config.ts), both gas caps within the block gas limit. */
export function rpcLimits(
  config: Pick<Config, "rpcRate" | "rpcMaxBatch" | "rpcGasCap" | "rpcBatchGas" | "rpcTimeout" | "rpcSimulations" | "rpcLogBlocks" | "rpcMaxLogs">,
  blockGasLimit?: bigint,
): RpcLimits {
  const within = (gas: number) => (blockGasLimit !== undefined && blockGasLimit < BigInt(gas) ? blockGasLimit : BigInt(gas));
  return {
    perMinute: config.rpcRate,
    maxBatch: config.rpcMaxBatch,
    gasPerCall: within(config.rpcGasCap),
    gasPerBatch: within(config.rpcBatchGas),
    timeoutMs: config.rpcTimeout,
    simulations: config.rpcSimulations,
    logBlocks: config.rpcLogBlocks,
    maxLogs: config.rpcMaxLogs,
  };
}

export interface PublicRpcDeps {
  /** Sends requests to the chain (its public connection). */
  forward: (batch: RpcRequest[]) => Promise<RpcResponse[]>;
  /** Runs simulations off the event loop where the chain runs in this process; else they are forwarded. */
  simulate?: Simulate;
  /** Runs eth_getLogs with its cap where the chain runs in this process; else they are forwarded. */
  readLogs?: ReadLogs;
  limits: RpcLimits;
  limiter?: RateLimiter;
}

export interface RpcAnswer {
  status: number;
  body: RpcResponse | RpcResponse[];
  headers?: Record<string, string>;
}

/** The chain failed to answer (a closed socket, an unreachable node): the route's 502. */
export class UpstreamFailed extends Error {
  override name = "UpstreamFailed";
}

/** Forwarded reads in flight at once; a read is cheap next to a simulation, but eth_getLogs is not. */
const READ_SLOTS = 4;
/** Work that may wait for a slot, per slot: past it the longest line gives way or a client is told
 * to come back. One client may have as many waiting as a batch has entries. */
const WAITING_PER_SLOT = 64;

/** EIP-1474's "limit exceeded". */
const LIMIT_EXCEEDED = -32005;

const quantity = (n: bigint) => `0x${n.toString(16)}`;

export function createPublicRpc(deps: PublicRpcDeps) {
  const { limits } = deps;
  const limiter = deps.limiter ?? createRateLimiter();
  const perClient: Limit = { name: "rpc", max: limits.perMinute, windowMs: 60_000 };
  const sims = new FairQueue({ slots: limits.simulations, maxWaiting: limits.simulations * WAITING_PER_SLOT, perClient: limits.maxBatch });
  const reads = new FairQueue({ slots: READ_SLOTS, maxWaiting: READ_SLOTS * WAITING_PER_SLOT, perClient: limits.maxBatch });
  const seconds = `${limits.timeoutMs / 1000}s`;

  const tooMany = (retryAfter: number): RpcAnswer => ({
    status: 429,
    headers: { "Retry-After": String(retryAfter) },
    body: rpcError(null, LIMIT_EXCEEDED, `Too many requests: this gateway answers ${limits.perMinute} calls a minute per client (a batch counts each call); try again in ${retryAfter} s`),
  });

  /** Counts `weight` calls for the client; the 429 answer when they are over its budget. */
  const charge = (ip: string, weight: number): RpcAnswer | null => {
    if (limits.perMinute <= 0 || weight <= 0) return null;
    const verdict = limiter.hit(perClient, clientKey(ip), weight);
    return verdict.ok ? null : tooMany(verdict.retryAfter);
  };

  // A simulation past the limit was stopped (or never started); a read or a sent transaction may
  // still be answered or mined by the chain after the client was told it took too long.
  const late = (r: RpcRequest) =>
    SIMULATIONS.has(r.method) ? rpcError(r.id, -32000, `execution aborted (timeout = ${seconds})`) : rpcError(r.id, -32000, `The chain did not answer within ${seconds}`);
  const busy = (r: RpcRequest) => rpcError(r.id, LIMIT_EXCEEDED, "The gateway is busy with other calls to the chain; try again");

  /** One outcome of a queue as the answers of its requests. */
  const answers = (requests: RpcRequest[], outcome: Outcome<RpcResponse[]>): RpcResponse[] => {
    if ("timedOut" in outcome) return requests.map(late);
    if ("full" in outcome) return requests.map(busy);
    return outcome.done;
  };

  const upstream = async <T>(work: Promise<T>): Promise<T> => {
    try {
      return await work;
    } catch (err) {
      throw new UpstreamFailed((err as Error).message);
    }
  };

  async function simulate(request: RpcRequest, client: string, deadline: number): Promise<RpcResponse> {
    // Forwarded with an id of ours, as reads are: a client's odd id (null, a duplicate) never reaches the chain.
    const forwarded = () => deps.forward([{ ...request, id: 0 }]).then((a) => (a[0] ? { ...a[0], id: request.id } : rpcError(request.id, -32603, "No answer from the chain")));
    const outcome = await sims.submit(client, deadline, async (signal) => [await upstream(deps.simulate ? deps.simulate(request, signal) : forwarded())]);
    return answers([request], outcome)[0]!;
  }

  /** Plain reads go up together, with our positions as ids, and come back in order. */
  async function forwardReads(requests: RpcRequest[]): Promise<RpcResponse[]> {
    if (requests.length === 0) return [];
    const got = await upstream(deps.forward(requests.map((r, i) => ({ ...r, id: i }))));
    const byPosition = new Map(got.map((a) => [a.id, a]));
    return requests.map((r, i) => {
      const a = byPosition.get(i);
      return a ? { ...a, id: r.id } : rpcError(r.id, -32603, "No answer from the chain");
    });
  }

  /** One eth_getLogs, told its cap where the chain takes one. */
  const readLogs = async (request: RpcRequest, max: number): Promise<RpcResponse> =>
    deps.readLogs ? upstream(deps.readLogs(request, max)) : (await forwardReads([request]))[0]!;

  /**
   * A request's eth_getLogs entries, in order: each range bounded (its tags resolved against the
   * chain and written into the filter as numbers, so the chain scans the range that was checked),
   * each run while the request's budget of logs lasts.
   */
  async function getLogs(requests: RpcRequest[], signal: AbortSignal): Promise<RpcResponse[]> {
    if (requests.length === 0) return [];
    const filters = requests.map(logFilter);
    const tags = new Set(filters.flatMap((f) => ("range" in f ? [f.range.from, f.range.to].filter((b): b is Tag => typeof b === "string") : [])));
    const blocks = tags.size > 0 ? await resolveTags(tags) : new Map<Tag, bigint | RpcErrorBody>();
    let left = limits.maxLogs;
    const out: RpcResponse[] = [];
    for (const [i, r] of requests.entries()) {
      const f = filters[i]!;
      if ("refused" in f) {
        out.push(f.refused);
        continue;
      }
      let call = r;
      if ("range" in f) {
        const [from, to] = [f.range.from, f.range.to].map((b) => (typeof b === "bigint" ? b : blocks.get(b)!));
        if (typeof from !== "bigint" || typeof to !== "bigint") {
          out.push({ jsonrpc: "2.0", id: r.id, error: [from, to].find((b): b is RpcErrorBody => typeof b === "object")! });
          continue;
        }
        const span = to - from + 1n;
        if (span > BigInt(limits.logBlocks)) {
          out.push(rpcError(r.id, LIMIT_EXCEEDED, `eth_getLogs over ${span} blocks is more than this gateway's cap of ${limits.logBlocks} blocks per call; ask for a smaller range`));
          continue;
        }
        call = { ...r, params: [{ ...f.filter, fromBlock: quantity(from), toBlock: quantity(to) }] };
      }
      // Past the deadline the caller has its answer already (late): the chain is spared the rest.
      if (signal.aborted) {
        out.push(late(r));
        continue;
      }
      const answer = await readLogs(call, left);
      const found = Array.isArray(answer.result) ? answer.result.length : 0;
      if (found > left) {
        const others = left < limits.maxLogs ? ` (${left} left after the request's other eth_getLogs)` : "";
        out.push(rpcError(r.id, LIMIT_EXCEEDED, `eth_getLogs found more logs than this gateway's cap of ${limits.maxLogs} per request${others}; ask for a smaller range`));
        continue;
      }
      left -= found;
      out.push(answer);
    }
    return out;
  }

  /** The block numbers of the tags filters name, asked of the chain in one go. */
  async function resolveTags(tags: Set<Tag>): Promise<Map<Tag, bigint | RpcErrorBody>> {
    const asked = [...tags].filter((t) => t !== "earliest");
    const questions = asked.map((t): RpcRequest => (t === "latest" || t === "pending" ? { jsonrpc: "2.0", id: 0, method: "eth_blockNumber", params: [] } : { jsonrpc: "2.0", id: 0, method: "eth_getBlockByNumber", params: [t, false] }));
    const answers = await forwardReads(questions);
    const blocks = new Map<Tag, bigint | RpcErrorBody>([["earliest", 0n]]);
    asked.forEach((t, i) => {
      const a = answers[i]!;
      const n = typeof a.result === "string" ? a.result : (a.result as { number?: unknown } | null)?.number;
      blocks.set(t, typeof n === "string" && /^0x[0-9a-fA-F]+$/.test(n) ? BigInt(n) : (a.error ?? { code: -32000, message: `The chain has no ${t} block` }));
    });
    return blocks;
  }

  /** A request's reads: plain ones in one batch, eth_getLogs by their own rules beside them. */
  async function read(requests: RpcRequest[], client: string, deadline: number): Promise<RpcResponse[]> {
    if (requests.length === 0) return [];
    const outcome = await reads.submit(client, deadline, async (signal) => {
      const isLogs = (r: RpcRequest) => r.method === "eth_getLogs";
      const [plain, logs] = await Promise.all([forwardReads(requests.filter((r) => !isLogs(r))), getLogs(requests.filter(isLogs), signal)]);
      return requests.map((r) => (isLogs(r) ? logs.shift()! : plain.shift()!));
    });
    return answers(requests, outcome);
  }

  return {
    /** Counts a request before its body is read: the 429 answer when its client is over budget. */
    admit: (ip: string): RpcAnswer | null => charge(ip, 1),

    /** Answers a parsed body; throws UpstreamFailed when the chain did not answer. */
    async handle(body: unknown, ip: string): Promise<RpcAnswer> {
      const deadline = Date.now() + limits.timeoutMs;
      const batch = Array.isArray(body);
      const entries: unknown[] = batch ? body : [body];
      if (batch && entries.length === 0) return { status: 200, body: rpcError(null, -32600, "Empty batch") };
      if (entries.length > limits.maxBatch) {
        return { status: 200, body: rpcError(null, -32600, `Batch of ${entries.length} calls is larger than this gateway's cap of ${limits.maxBatch}`) };
      }
      // The first call was counted by admit().
      const refused = charge(ip, entries.length - 1);
      if (refused) return refused;
      const client = clientKey(ip);
      const checked = allotGas(entries.map(check), { perCall: limits.gasPerCall, perBatch: limits.gasPerBatch });
      const plain = checked.filter((r): r is RpcRequest => isRequest(r) && !SIMULATIONS.has(r.method));
      const [readAnswers, simAnswers] = await Promise.all([
        read(plain, client, deadline),
        Promise.all(checked.map((r) => (isRequest(r) && SIMULATIONS.has(r.method) ? simulate(r, client, deadline) : undefined))),
      ]);
      let next = 0;
      const out = checked.map((r, i) => (!isRequest(r) ? r : (simAnswers[i] ?? readAnswers[next++]!)));
      return { status: 200, body: batch ? out : out[0]! };
    },
  };
}
