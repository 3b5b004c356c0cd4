/**
 * Runs the compiled `dist/stowage` the way an operator would: a data dir, a port, signals.
 * Importing this module makes sure the binary is built from the sources as they are: a binary
 * older than any of them is rebuilt first (once, whatever the number of test processes), so a
 * plain `bun test` never tests a stale build. This happens at load time, outside any test's timeout.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { ensureFresh, STOWAGE_BUILD } from "./fresh-build.ts";
import { blobEnv, setsBlobs } from "./blobs.ts";

export const BINARY = STOWAGE_BUILD.binary;

let fresh: Promise<void> | undefined;
/** Resolves once `dist/stowage` is newer than every source it is built from (building it if not). */
export const requireBinary = (): Promise<void> => (fresh ??= ensureFresh(STOWAGE_BUILD));
await requireBinary();

/** A clean environment: nothing from this shell (not even a PATH to Bun) reaches the binary; the
 * IPFS node takes a free loopback port so servers of parallel tests don't collide, and the
 * metrics listener (default 127.0.0.1:9464, one per machine) and the S3 API (default port 9000) are
 * off unless a test turns them on. */
const BASE_ENV = { HOME: "/tmp", STOWAGE_IPFS_LISTEN: "/ip4/127.0.0.1/tcp/0", STOWAGE_METRICS_LISTEN: "", STOWAGE_S3_API_PORT: "0" };

export interface RunningBinary {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  url: string;
  output: () => string;
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number>;
}

/**
 * The environment of one run: the clean base, then (on the S3 pass, blobs.ts) the blob-store
 * settings of the run's data dir, the same prefix every time for the same dir so a restart finds
 * its objects, then the test's own. A test that sets STOWAGE_S3_* itself gets only those.
 */
function envOf(args: string[], env: Record<string, string>): Record<string, string> {
  const flag = args.indexOf("--data-dir");
  const dataDir = flag >= 0 ? args[flag + 1] : env.STOWAGE_DATA_DIR;
  const blobs = dataDir && !setsBlobs(env) ? blobEnv(dataDir) : {};
  return { ...BASE_ENV, ...blobs, ...env };
}

/** Starts the binary and resolves once it prints its listening line (or rejects with its output). */
export async function startBinary(args: string[], env: Record<string, string> = {}, timeoutMs = 30_000): Promise<RunningBinary> {
  await requireBinary();
  const proc = Bun.spawn([BINARY, ...args], { env: envOf(args, env), stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  let out = "";
  const collect = async (stream: ReadableStream<Uint8Array>) => {
    for await (const chunk of stream) out += new TextDecoder().decode(chunk);
  };
  const done = Promise.all([collect(proc.stdout), collect(proc.stderr)]);
  const deadline = Date.now() + timeoutMs;
  let url: string | undefined;
  while (!url) {
    url = /stowage listening on (http:\/\/\S+)/.exec(out)?.[1];
    if (url) break;
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill("SIGKILL");
      await done;
      throw new Error(`stowage did not start (exit ${proc.exitCode}):\n${out}`);
    }
    await Bun.sleep(20);
  }
  return {
    proc,
    url: url.replace("0.0.0.0", "127.0.0.1"),
    output: () => out,
    async stop(signal = "SIGTERM") {
      proc.kill(signal);
      const code = await proc.exited;
      await done;
      return code;
    },
  };
}

/** Runs the binary to completion (for commands such as --help). */
export async function runBinary(args: string[], env: Record<string, string> = {}) {
  await requireBinary();
  const proc = Bun.spawn([BINARY, ...args], { env: envOf(args, env), stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { stdout, stderr, code };
}

/** Processes running an anvil over this data dir's chain state (a killed server leaves its own). */
export function anvilsOf(dataDir: string): number[] {
  const state = join(dataDir, "chain", "state.json");
  return readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, "utf8").includes(state);
      } catch {
        return false;
      }
    })
    .map(Number);
}
