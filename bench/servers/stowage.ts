/**
 * Stowage as a benchmark subject: the real `startServer` (the same app, handler and components
 * that `stowage serve` runs) in its own process, on 127.0.0.1 and a free port, over a fresh
 * temporary data dir that is removed on exit. Prints "data dir PATH" and then "listening on URL"
 * once ready (bench/chain.ts reads the embedded chain's address from DATA_DIR/chain/anvil.json).
 *
 * Stops on SIGTERM/SIGINT and on EOF of stdin (servers/lifetime.ts): the harness holds stdin
 * open, so the server goes away even when the harness is killed without a chance to clean up.
 *
 * Run: bun bench/servers/stowage.ts [--log-level error|warn|info|debug] [--rpc-rate N]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { parseConfig } from "../../src/config.ts";
import { createLogger, type Level } from "../../src/log.ts";
import { startServer } from "../../src/server.ts";
import { runUntilStopped } from "./lifetime.ts";

const { values } = parseArgs({ options: { "log-level": { type: "string", default: "error" }, "rpc-rate": { type: "string" } }, strict: true });
const dataDir = mkdtempSync(join(tmpdir(), "stowage-bench-"));
const config = parseConfig([], {
  STOWAGE_DATA_DIR: dataDir,
  STOWAGE_HOST: "127.0.0.1",
  STOWAGE_PORT: "0",
  // "error" by default, so the benchmark measures the request path rather than log writing
  // (at "info" each request also writes one JSON line: see bench/README.md for its cost).
  STOWAGE_LOG_LEVEL: values["log-level"],
  // Once the embedded IPFS node exists it must not listen on every interface (or on 4001, which
  // a second run would find taken): loopback and a free port.
  STOWAGE_IPFS_LISTEN: "/ip4/127.0.0.1/tcp/0",
  // The public /rpc's calls a minute per client (bench/chain.ts: one client on loopback makes
  // thousands, and measures the filter's cost, not its limit).
  ...(values["rpc-rate"] !== undefined && { STOWAGE_RPC_RATE: values["rpc-rate"] }),
});

let server: Awaited<ReturnType<typeof startServer>> | undefined;
const stopped = runUntilStopped(async () => {
  try {
    await server?.stop();
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

try {
  server = await startServer(config, createLogger(config.logLevel as Level));
} catch (err) {
  console.error(`stowage did not start: ${(err as Error).message}`);
  rmSync(dataDir, { recursive: true, force: true });
  process.exit(1);
}
console.log(`data dir ${dataDir}`);
console.log(`listening on ${server?.url}`);
await stopped;
