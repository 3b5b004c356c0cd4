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
 * wait behind the public's; none of these limits applies to them.
 *
 * @example
 *   const rpc = createPublicRpc({ forward: endpoint.send, limits })
 *   const refused = rpc.admit(clientIp(request))   // before the body is read
 *   const { status, body, headers } = await rpc.handle(JSON.parse(text), clientIp(request))
 */
import type { Config } from "../config.ts";
import { clientKey } from "../http/client-key.ts";
import { createRateLimiter, type Limit, type RateLimiter } from "../http/rate-limit.ts";
import type { RpcRequest, RpcResponse } from "./endpoint.ts";
import { FairQueue, type Outcome } from "./fair-queue.ts";
import { allotGas, check, isRequest, rpcError, SIMULATIONS } from "./rpc-filter.ts";

/** Runs one simulation (eth_call, eth_estimateGas) to its end, or stops it when `signal` aborts. */
export type Simulate = (request: RpcRequest, signal: AbortSignal) => Promise<RpcResponse>;

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
}

/** The limits as the operator set them (src/config.ts), both gas caps within the block gas limit. */
export function rpcLimits(config: Pick<Config, "rpcRate" | "rpcMaxBatch" | "rpcGasCap" | "rpcBatchGas" | "rpcTimeout" | "rpcSimulations">, blockGasLimit?: bigint): RpcLimits {
  const within = (gas: number) => (blockGasLimit !== undefined && blockGasLimit < BigInt(gas) ? blockGasLimit : BigInt(gas));
  return {
    perMinute: config.rpcRate,
    maxBatch: config.rpcMaxBatch,
    gasPerCall: within(config.rpcGasCap),
    gasPerBatch: within(config.rpcBatchGas),
    timeoutMs: config.rpcTimeout,
    simulations: config.rpcSimulations,
  };
}

export interface PublicRpcDeps {
  /** Sends requests to the chain (its public connection). */
  forward: (batch: RpcRequest[]) => Promise<RpcResponse[]>;
  /** Runs simulations off the event loop where the chain runs in this process; else they are forwarded. */
  simulate?: Simulate;
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
/** Work that may wait for a slot, per slot: past it a client is told to come back. */
const WAITING_PER_SLOT = 64;

/** EIP-1474's "limit exceeded". */
const LIMIT_EXCEEDED = -32005;

export function createPublicRpc(deps: PublicRpcDeps) {
  const { limits } = deps;
  const limiter = deps.limiter ?? createRateLimiter();
  const perClient: Limit = { name: "rpc", max: limits.perMinute, windowMs: 60_000 };
  const sims = new FairQueue({ slots: limits.simulations, maxWaiting: limits.simulations * WAITING_PER_SLOT });
  const reads = new FairQueue({ slots: READ_SLOTS, maxWaiting: READ_SLOTS * WAITING_PER_SLOT });
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

  /** The reads of a request go up together, with our positions as ids, and come back in order. */
  async function read(requests: RpcRequest[], client: string, deadline: number): Promise<RpcResponse[]> {
    if (requests.length === 0) return [];
    const outcome = await reads.submit(client, deadline, async () => {
      const got = await upstream(deps.forward(requests.map((r, i) => ({ ...r, id: i }))));
      const byPosition = new Map(got.map((a) => [a.id, a]));
      return requests.map((r, i) => {
        const a = byPosition.get(i);
        return a ? { ...a, id: r.id } : rpcError(r.id, -32603, "No answer from the chain");
      });
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
