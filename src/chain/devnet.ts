/**
 * The embedded chain: anvil as a child process bound to 127.0.0.1, chain id from config, a random
 * mnemonic (no well-known keys), state in `DATA_DIR/chain/state.json` dumped every 2 s and on exit.
 * A pid file lets the next start stop an anvil left behind by a killed server.
 *
 * @example
 *   const devnet = await startDevnet({ dataDir: "data", chainId: 985, log })
 *   devnet.url // http://127.0.0.1:41234
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../log.ts";
import { isAlive } from "../datadir/lock.ts";
import { anvilExecutable } from "./anvil-binary.ts";
import { rpcCall } from "./rpc.ts";

export interface Devnet {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** Where the CLI finds a running embedded chain. */
export interface DevnetRecord {
  pid: number;
  url: string;
}

const STATE_INTERVAL_S = 2;
const READY_TIMEOUT_MS = 20_000;

export const chainDir = (dataDir: string) => join(dataDir, "chain");
const recordFile = (dataDir: string) => join(chainDir(dataDir), "anvil.json");

export function readDevnetRecord(dataDir: string): DevnetRecord | undefined {
  try {
    return JSON.parse(readFileSync(recordFile(dataDir), "utf8")) as DevnetRecord;
  } catch {
    return undefined;
  }
}

function isAnvil(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("anvil");
  } catch {
    return false;
  }
}

/** Stops an anvil that a killed server left running on this data dir. */
async function stopLeftover(dataDir: string, log: Logger) {
  const record = readDevnetRecord(dataDir);
  if (!record || !isAlive(record.pid) || !isAnvil(record.pid)) return;
  log.warn("stopping an anvil left by an earlier run", { pid: record.pid });
  process.kill(record.pid, "SIGTERM");
  const deadline = Date.now() + 5000;
  while (isAlive(record.pid) && Date.now() < deadline) await Bun.sleep(50);
  if (isAlive(record.pid)) process.kill(record.pid, "SIGKILL");
}

function freePort(): number {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  return port;
}

async function waitReady(url: string, chainId: number, proc: Bun.Subprocess) {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) return false;
    const id = await rpcCall<string>(url, "eth_chainId").catch(() => undefined);
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

function startHeartbeat(url: string, log: Logger, idleSeconds: number) {
  const timer = setInterval(async () => {
    try {
      const block = await rpcCall<{ timestamp: string }>(url, "eth_getBlockByNumber", ["latest", false]);
      if (Date.now() / 1000 - Number(block.timestamp) >= idleSeconds) await rpcCall(url, "evm_mine");
    } catch (err) {
      log.debug("chain heartbeat failed", { err: (err as Error).message });
    }
  }, (idleSeconds * 1000) / 2);
  timer.unref();
  return timer;
}

export async function startDevnet({ dataDir, chainId, log, idleSeconds = IDLE_S }: { dataDir: string; chainId: number; log: Logger; idleSeconds?: number }): Promise<Devnet> {
  const dir = chainDir(dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  await stopLeftover(dataDir, log);
  const exe = await anvilExecutable(dataDir);
  const state = join(dir, "state.json");
  const resumed = existsSync(state);
  guardState(state, log);

  // A probed port can be taken before anvil binds it: try again with another.
  for (let attempt = 0; attempt < 3; attempt++) {
    const url = `http://127.0.0.1:${freePort()}`;
    const args = ["--host", "127.0.0.1", "--port", url.split(":")[2]!, "--chain-id", String(chainId), "--mnemonic-random", "--state", state, "--state-interval", String(STATE_INTERVAL_S), "--silent"];
    // Its own process group: a Ctrl-C in the terminal reaches the server, which stops the chain
    // after draining requests, instead of reaching both at once.
    const proc = Bun.spawn([exe, ...args], { stdin: "ignore", stdout: "ignore", stderr: "pipe", detached: true });
    writeFileSync(recordFile(dataDir), JSON.stringify({ pid: proc.pid, url } satisfies DevnetRecord), { mode: 0o600 });
    const ready = await waitReady(url, chainId, proc).catch((err) => {
      proc.kill("SIGKILL"); // detached: it would outlive a failed start
      throw err;
    });
    if (!ready) {
      log.warn("anvil exited at start; retrying", { stderr: (await new Response(proc.stderr).text()).slice(0, 500) });
      continue;
    }
    let stopping = false;
    void proc.exited.then((code) => {
      if (!stopping) log.error("the embedded chain exited unexpectedly", { exitCode: code });
    });
    log.info("embedded chain ready", { url, chainId, resumed });
    const heartbeat = startHeartbeat(url, log, idleSeconds);
    return {
      url,
      pid: proc.pid,
      async stop() {
        stopping = true;
        clearInterval(heartbeat);
        proc.kill("SIGTERM"); // anvil dumps its state on SIGTERM
        const killer = setTimeout(() => proc.kill("SIGKILL"), 5000);
        await proc.exited;
        clearTimeout(killer);
        rmSync(recordFile(dataDir), { force: true });
      },
    };
  }
  throw new Error("the embedded chain (anvil) would not start");
}
