/**
 * The embedded chain, reachable by nobody but the server and the data dir's owner (D14). anvil
 * cannot switch off its HTTP listener nor its `anvil_*` methods (impersonation, setBalance), so it
 * runs in a private network namespace where that listener is unreachable, and the server talks
 * to it over its IPC socket `DATA_DIR/chain/rpc.ipc` inside the 0700 data dir. Where the host
 * allows no namespace (containers with Docker's seccomp profile, AppArmor's userns rule, macOS)
 * an in-process EVM with no port takes its place, and the server itself serves the same socket
 * so `stowage admin …` works alike. A data dir keeps the engine it started with.
 *
 * anvil keeps its state in `chain/state.json`, dumped every 2 s and on exit; a record of the
 * running engine lets the next start stop an anvil left behind by a killed server.
 *
 * @example
 *   const devnet = await startDevnet({ dataDir: "data", chainId: 985, log })
 *   await rpcCall(devnet.endpoint, "eth_chainId")
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../log.ts";
import { isAlive } from "../datadir/lock.ts";
import { anvilExecutable } from "./anvil-binary.ts";
import { checkSocketPath, ipcEndpoint, providerEndpoint, rpcCall, type RpcEndpoint } from "./endpoint.ts";
import type { ReadLogs, Simulate } from "./public-rpc.ts";

/** `auto` picks anvil where a private network namespace can be made, else the in-process EVM. */
export type EngineChoice = "auto" | "anvil" | "evm";
export type Engine = Exclude<EngineChoice, "auto">;

export interface Devnet {
  engine: Engine;
  endpoint: RpcEndpoint;
  /** The public `/rpc`'s way in, apart from the server's own (anvil: a second socket connection). */
  publicEndpoint?: RpcEndpoint;
  /** Runs the public's simulations off the event loop (the in-process EVM's threads). */
  simulate?: Simulate;
  /** Runs the public's eth_getLogs with its cap on logs (the in-process EVM stops scanning there). */
  readLogs?: ReadLogs;
  /** Resolves once everything mined before `since` (ms) is on disk. */
  saved(since: number): Promise<void>;
  stop(): Promise<void>;
}

/** What the CLI and the next start know of a running embedded chain. */
export interface DevnetRecord {
  engine: Engine;
  pid: number;
  ipc: string;
}

const STATE_INTERVAL_S = 2;
const READY_TIMEOUT_MS = 20_000;

export const chainDir = (dataDir: string) => join(dataDir, "chain");
export const socketPath = (dataDir: string) => join(chainDir(dataDir), "rpc.ipc");
const recordFile = (dataDir: string) => join(chainDir(dataDir), "running.json");
/** anvil's state file, and the in-process EVM's folder (its journal: evm/index.ts JOURNAL_FILE). */
export const anvilState = (dataDir: string) => join(chainDir(dataDir), "state.json");
export const evmDir = (dataDir: string) => join(chainDir(dataDir), "evm");

/** A JSON record file, or undefined when it is missing or unreadable (a kill mid-write). */
function readRecord<T>(file: string): T | undefined {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as T;
  } catch {
    return undefined;
  }
}

export const readDevnetRecord = (dataDir: string) => readRecord<DevnetRecord>(recordFile(dataDir));

function isAnvil(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0]!.endsWith("anvil");
  } catch {
    return false;
  }
}

/** Stops an anvil that a killed server left running on this data dir (also one recorded by a
 * release before D14, in `anvil.json`). */
async function stopLeftover(dataDir: string, log: Logger) {
  const legacy = join(chainDir(dataDir), "anvil.json");
  const pids = [readDevnetRecord(dataDir), readRecord<{ pid: number }>(legacy)].flatMap((r) => (r ? [r.pid] : []));
  for (const pid of pids) {
    if (!isAlive(pid) || !isAnvil(pid)) continue;
    log.warn("stopping an anvil left by an earlier run", { pid });
    process.kill(pid, "SIGTERM");
    const deadline = Date.now() + 5000;
    while (isAlive(pid) && Date.now() < deadline) await Bun.sleep(50);
    if (isAlive(pid)) process.kill(pid, "SIGKILL");
  }
  rmSync(legacy, { force: true });
}

let wrapperProbe: string[] | null | undefined;

/** The command that runs a program in a new, empty network namespace here, or null when the
 * host allows none. `unshare --net` needs CAP_SYS_ADMIN (root); `-rn` adds a user namespace,
 * which unprivileged users may make where the kernel and its security modules allow it. */
export function namespaceWrapper(): string[] | null {
  if (wrapperProbe !== undefined) return wrapperProbe;
  wrapperProbe = null;
  for (const wrapper of [["unshare", "--net"], ["unshare", "--map-root-user", "--net"]]) {
    try {
      if (Bun.spawnSync([...wrapper, "true"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0) {
        wrapperProbe = wrapper;
        break;
      }
    } catch {
      // no unshare on this host
    }
  }
  return wrapperProbe;
}

/** A data dir keeps its engine: another one would start an empty chain without its contracts. */
function chooseEngine(dataDir: string, choice: EngineChoice): Engine {
  const existing: Engine | undefined = existsSync(anvilState(dataDir)) ? "anvil" : existsSync(evmDir(dataDir)) ? "evm" : undefined;
  if (existing && choice !== "auto" && choice !== existing) {
    throw new Error(`the embedded chain of ${dataDir} runs on ${existing}; STOWAGE_EMBEDDED_CHAIN=${choice} would start an empty chain without its contracts`);
  }
  const engine = existing ?? (choice === "auto" ? (namespaceWrapper() ? "anvil" : "evm") : choice);
  if (engine === "anvil" && !namespaceWrapper()) {
    throw new Error(
      "anvil must run in a private network namespace (its RPC would otherwise be open to every local process), and this host allows none (`unshare --net` and `unshare -rn` failed)" +
        (existing ? `: this data dir's chain is anvil's, so start it on a host that allows namespaces` : ": set STOWAGE_EMBEDDED_CHAIN=evm or auto"),
    );
  }
  return engine;
}

async function waitReady(endpoint: RpcEndpoint, chainId: number, proc: Bun.Subprocess) {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) return false;
    const id = await rpcCall<string>(endpoint, "eth_chainId").catch(() => undefined);
    if (id !== undefined) {
      if (Number(id) !== chainId) throw new Error(`the embedded chain answered chain id ${Number(id)}, expected ${chainId}`);
      return true;
    }
    await Bun.sleep(50);
  }
  throw new Error(`the embedded chain did not answer within ${READY_TIMEOUT_MS / 1000} s`);
}

const parses = (file: string) => {
  try {
    JSON.parse(readFileSync(file, "utf8"));
    return true;
  } catch {
    return false;
  }
};

/** anvil rewrites its state file in place, so a kill during a dump can leave it cut short. Keep
 * the last good copy beside it and fall back to that (losing seconds, not the chain). */
function guardState(state: string, log: Logger) {
  if (!existsSync(state)) return;
  const previous = `${state}.prev`;
  if (parses(state)) {
    copyFileSync(state, previous);
    return;
  }
  if (!existsSync(previous) || !parses(previous)) throw new Error(`${state} is damaged and there is no good copy to fall back to`);
  log.warn("the chain state file is damaged; using the last good copy", { state });
  copyFileSync(previous, state);
}

/** The embedded chain mines only when a transaction comes, so its clock stops while it idles, and
 * expiry is judged by the chain's clock (D7). An empty block now and then keeps it within
 * `IDLE_S` of real time. */
export const IDLE_S = 30;

function startHeartbeat(endpoint: RpcEndpoint, log: Logger, idleSeconds: number) {
  const timer = setInterval(async () => {
    try {
      const block = await rpcCall<{ timestamp: string }>(endpoint, "eth_getBlockByNumber", ["latest", false]);
      if (Date.now() / 1000 - Number(block.timestamp) >= idleSeconds) await rpcCall(endpoint, "evm_mine");
    } catch (err) {
      log.debug("chain heartbeat failed", { err: (err as Error).message });
    }
  }, (idleSeconds * 1000) / 2);
  timer.unref();
  return timer;
}

function writeRecord(dataDir: string, record: DevnetRecord) {
  writeFileSync(recordFile(dataDir), JSON.stringify(record), { mode: 0o600 });
}

async function startAnvil(dataDir: string, chainId: number, log: Logger): Promise<Omit<Devnet, "engine">> {
  const exe = await anvilExecutable(dataDir);
  const state = anvilState(dataDir);
  const ipc = socketPath(dataDir);
  // Before the spawn: a path anvil cannot bind would otherwise be found only after it started.
  checkSocketPath(ipc);
  const resumed = existsSync(state);
  guardState(state, log);
  const wrapper = namespaceWrapper() as string[];
  for (let attempt = 0; attempt < 3; attempt++) {
    rmSync(ipc, { force: true });
    // Port 0 inside an empty namespace: the listener exists, but nothing outside can reach it.
    const args = ["--host", "127.0.0.1", "--port", "0", "--ipc", ipc, "--chain-id", String(chainId), "--mnemonic-random", "--state", state, "--state-interval", String(STATE_INTERVAL_S), "--silent"];
    // Its own process group: a Ctrl-C in the terminal reaches the server, which stops the chain
    // after draining requests, instead of reaching both at once. `unshare` execs anvil, so the
    // pid is anvil's.
    const proc = Bun.spawn([...wrapper, exe, ...args], { stdin: "ignore", stdout: "ignore", stderr: "pipe", detached: true });
    writeRecord(dataDir, { engine: "anvil", pid: proc.pid, ipc });
    const endpoint = ipcEndpoint(ipc);
    const ready = await waitReady(endpoint, chainId, proc).catch((err) => {
      proc.kill("SIGKILL"); // detached: it would outlive a failed start
      throw err;
    });
    if (!ready) {
      endpoint.close();
      log.warn("anvil exited at start; retrying", { stderr: (await new Response(proc.stderr).text()).slice(0, 500) });
      continue;
    }
    let stopping = false;
    void proc.exited.then((code) => {
      if (!stopping) log.error("the embedded chain exited unexpectedly", { exitCode: code });
    });
    log.info("embedded chain ready", { engine: "anvil", ipc, chainId, resumed, namespace: wrapper.join(" ") });
    // The public's calls on a connection of their own: anvil answers each connection's requests
    // as they come, and the server's own reads must not wait behind a public flood.
    const publicEndpoint = ipcEndpoint(ipc);
    return {
      endpoint,
      publicEndpoint,
      async saved(since) {
        const deadline = Date.now() + 10_000;
        while (Date.now() < deadline) {
          if ((statSync(state, { throwIfNoEntry: false })?.mtimeMs ?? 0) > since) return;
          await Bun.sleep(100);
        }
        throw new Error("the embedded chain did not save its state within 10 s");
      },
      async stop() {
        stopping = true;
        endpoint.close();
        publicEndpoint.close();
        proc.kill("SIGTERM"); // anvil dumps its state on SIGTERM
        const killer = setTimeout(() => proc.kill("SIGKILL"), 5000);
        await proc.exited;
        clearTimeout(killer);
      },
    };
  }
  throw new Error("the embedded chain (anvil) would not start");
}

async function startEvm(dataDir: string, chainId: number, log: Logger): Promise<Omit<Devnet, "engine">> {
  // Loaded only when used: anvil hosts never pay for the EVM's modules.
  const { createInProcessChain } = await import("./evm/index.ts");
  const { serveJsonRpcSocket } = await import("./ipc-server.ts");
  const dir = evmDir(dataDir);
  const resumed = existsSync(dir);
  const chain = await createInProcessChain({ dir, chainId, log });
  const ipc = socketPath(dataDir);
  const server = await serveJsonRpcSocket(ipc, (args) => chain.request(args)).catch(async (err) => {
    await chain.stop();
    throw err;
  });
  writeRecord(dataDir, { engine: "evm", pid: process.pid, ipc });
  log.info("embedded chain ready", { engine: "evm", ipc, chainId, resumed });
  return {
    endpoint: providerEndpoint("in-process EVM", (args) => chain.request(args)),
    simulate: chain.simulate,
    readLogs: chain.readLogs,
    saved: async () => {}, // every block is on disk before its transaction is answered
    async stop() {
      await server.close();
      await chain.stop();
    },
  };
}

export async function startDevnet({ dataDir, chainId, log, engine: choice = "auto", idleSeconds = IDLE_S }: { dataDir: string; chainId: number; log: Logger; engine?: EngineChoice; idleSeconds?: number }): Promise<Devnet> {
  mkdirSync(chainDir(dataDir), { recursive: true, mode: 0o700 });
  await stopLeftover(dataDir, log);
  const engine = chooseEngine(dataDir, choice);
  const running = engine === "anvil" ? await startAnvil(dataDir, chainId, log) : await startEvm(dataDir, chainId, log);
  const heartbeat = startHeartbeat(running.endpoint, log, idleSeconds);
  return {
    ...running,
    engine,
    async stop() {
      clearInterval(heartbeat);
      await running.stop();
      rmSync(recordFile(dataDir), { force: true });
      rmSync(socketPath(dataDir), { force: true });
    },
  };
}
