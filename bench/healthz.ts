/**
 * GET /healthz: Stowage against a bare Elysia app, requests/s and latency, in alternation.
 *
 * Stowage, the baseline and the load generator each run in their own process, so none of the
 * three shares an event loop with another (the harness only orchestrates and sleeps).
 *
 * Run: bun bench/healthz.ts [--rounds 5] [--seconds 5] [--connections 32] [--log-level error] [--binary]
 *      (--help: every option)
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { benchArgs, compareMany, HTTP_METRICS, httpMeasure, intOption, loadAverage, positiveOption, usageError, startServer, type RunningServer } from "./harness.ts";

const ROOT = join(import.meta.dir, "..");
const BINARY = join(ROOT, "dist", "stowage");
const values = benchArgs("GET /healthz: Stowage against a bare Elysia app, side by side.", {
  rounds: { default: "5", help: "measured rounds" },
  seconds: { default: "5", help: "seconds per measurement" },
  // 32 in flight gave the highest throughput against the baseline here (8: ≈ 43k req/s, 32: ≈ 60k,
  // 128: ≈ 42k, as the generator's own bookkeeping grows); see bench/README.md.
  connections: { default: "32", help: "keep-alive connections of the load generator" },
  "log-level": { default: "error", help: "Stowage's log level: debug, info, warn or error (info, the server's default, writes a log line per request)" },
  binary: { boolean: true, help: "measure the compiled dist/stowage (`bun run build` first) instead of src/ under Bun" },
});
const rounds = intOption(values, "rounds");
const seconds = positiveOption(values, "seconds");
const connections = intOption(values, "connections");
const useBinary = values.binary === true;
const logLevel = values["log-level"];
if (!["debug", "info", "warn", "error"].includes(logLevel)) usageError(`--log-level must be debug, info, warn or error (got ${logLevel})`);
if (useBinary && !existsSync(BINARY)) usageError(`--binary: ${BINARY} is missing; run \`bun run build\` first`);

/** Starts the subject: src/ under Bun (default) or the compiled binary. */
async function startStowage(): Promise<{ server: RunningServer; cleanup: () => void }> {
  if (!useBinary) {
    const server = await startServer([process.execPath, join(import.meta.dir, "servers", "stowage.ts"), "--log-level", logLevel]);
    return { server, cleanup: () => {} };
  }
  const dataDir = mkdtempSync(join(tmpdir(), "stowage-bench-"));
  try {
    const server = await startServer(
      [BINARY, "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir, "--log-level", logLevel, "--ipfs-listen", "/ip4/127.0.0.1/tcp/0", "--metrics-listen", "off", "--s3-api-port", "0"],
      // A clean environment, as an operator's service would have: nothing from this shell leaks in.
      { env: { HOME: tmpdir() } },
    );
    return { server, cleanup: () => rmSync(dataDir, { recursive: true, force: true }) };
  } catch (err) {
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
}

const servers: RunningServer[] = [];
const cleanups: (() => void)[] = [];
let exitCode = 0;
try {
  const stowage = await startStowage();
  servers.push(stowage.server);
  cleanups.push(stowage.cleanup);
  const baseline = await startServer([process.execPath, join(import.meta.dir, "servers", "elysia.ts")]);
  servers.push(baseline);

  const subjectLabel = useBinary ? "stowage-bin" : "stowage";
  console.log(
    `GET /healthz, ${connections} keep-alive connections, ${seconds} s per measurement, ` +
      `${rounds} rounds + 1 warm-up; ${subjectLabel} ${stowage.server.url} (log level ${logLevel}), elysia ${baseline.url}; ` +
      `${navigator.hardwareConcurrency} cores, Bun ${Bun.version}, ${new Date().toISOString()}, ` +
      `load average ${loadAverage()}`,
  );
  const measure = (server: RunningServer) => httpMeasure(server, "/healthz", { durationMs: seconds * 1000, connections });
  const result = await compareMany({
    name: "healthz",
    rounds,
    labels: { subject: subjectLabel, baseline: "elysia" },
    metrics: HTTP_METRICS,
    subject: measure(stowage.server),
    baseline: measure(baseline),
  });
  // Server and generator together use ≈ 1.5 of the 2 cores when the machine is otherwise quiet
  // (the rest is loopback networking in the kernel and ping-pong gaps). Well below that, other
  // work took the CPU, and that round's req/s says more about the neighbours than the server;
  // CPU per request stays meaningful either way.
  const BUSY_BELOW_CORES = 1.3;
  const { rps, cpu, gen } = result.metrics;
  const starved: string[] = [];
  for (const [side, label] of [["subject", subjectLabel], ["baseline", "elysia"]] as const) {
    rps[side].samples.forEach((r, i) => {
      const serverCores = (r * (cpu[side].samples[i] ?? 0)) / 1e6;
      const genCores = gen[side].samples[i] ?? 0;
      if (serverCores + genCores < BUSY_BELOW_CORES) starved.push(`round ${i + 1} ${label} (${(serverCores + genCores).toFixed(2)} cores)`);
    });
  }
  console.log(`load average at the end: ${loadAverage()}`);
  if (starved.length > 0) {
    console.log(`note: the machine was busy in ${starved.length} measurement(s), server + generator got < ${BUSY_BELOW_CORES} cores: ${starved.join("; ")}.`);
    console.log("      Trust the CPU-per-request ratio over the req/s one for this run, or run again when the machine is quieter.");
  }
} catch (err) {
  console.error(`healthz benchmark failed: ${(err as Error).stack ?? err}`);
  for (const s of servers) console.error(`--- output of ${s.proc.pid}:\n${s.output()}`);
  exitCode = 1;
} finally {
  // Stop both servers (they drain, then exit) before removing the binary's data dir.
  const codes = await Promise.all(servers.map((s) => s.stop()));
  for (const cleanup of cleanups) cleanup();
  if (codes.some((c) => c !== 0)) {
    console.error(`a server exited uncleanly: ${codes.join(", ")}`);
    for (const s of servers) console.error(`--- output of ${s.proc.pid}:\n${s.output()}`);
  }
}
process.exit(exitCode);
