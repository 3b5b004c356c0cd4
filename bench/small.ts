/**
 * Small authenticated requests: `GET /v2/auth/me`, `GET /dfs/space`,
 * `GET /dfs/listobjects` (10 files) and `GET /healthz` on Stowage against a bare Elysia app that
 * verifies the same Bearer token and answers the same JSON bodies (bench/servers/elysia.ts FILE),
 * in alternation, with the server's CPU time per request from /proc: what Stowage's layers cost
 * on top of Elysia's minimum, per request.
 *
 * Stowage is `bun src/main.ts serve` over a temporary data dir (embedded chain and IPFS node, the
 * metrics listener on a free port as a deployment has it, log level `error` unless told); one
 * user logs in through the SDK (DID login, EIP-712), gets free space from `stowage admin grant`,
 * uploads 10 small dfs files. The JWT key is given to both servers (STOWAGE_JWT_KEY), so one
 * access token opens both; the baseline's bodies are Stowage's own answers to that user.
 *
 * Run: bun bench/small.ts [--rounds 3] [--seconds 3] [--connections 32] [--paths me,space,list,healthz]
 *                         [--log-level error] [--cpu-prof DIR]   (--help: every option)
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { connectStorage } from "../src/sdk/storage.ts";
import { alignColumns, benchArgs, commandDuration, compareMany, CPU_PROF_OPTION, fmt, HTTP_METRICS, httpMeasure, intOption, loadAverage, positiveOption, processCpuSeconds, startServer, stowageCommand, usageError, type ComparisonResult, type HttpMetric, type RunningServer } from "./harness.ts";

const ROOT = join(import.meta.dir, "..");
const PATHS = { me: "/v2/auth/me", space: "/dfs/space", list: "/dfs/listobjects", healthz: "/healthz" } as const;
type PathKey = keyof typeof PATHS;
const LISTED_FILES = 10;

const values = benchArgs("Small authenticated requests and /healthz: Stowage against a bare Elysia app, side by side.", {
  rounds: { default: "3", help: "measured rounds" },
  seconds: { default: "3", help: "seconds per measurement, at most 60" },
  connections: { default: "32", help: "keep-alive connections of the load generator" },
  paths: { default: Object.keys(PATHS).join(","), help: "paths to measure, comma-separated" },
  "log-level": { default: "error", help: "Stowage's log level: debug, info, warn or error" },
  "cpu-prof": CPU_PROF_OPTION,
});
const rounds = intOption(values, "rounds");
const connections = intOption(values, "connections");
const seconds = positiveOption(values, "seconds", 60);
const paths = values.paths.split(",") as PathKey[];
if (paths.some((p) => !(p in PATHS))) usageError(`--paths takes some of ${Object.keys(PATHS).join(",")}`);
const logLevel = values["log-level"];
if (!["debug", "info", "warn", "error"].includes(logLevel)) usageError(`--log-level must be debug, info, warn or error (got ${logLevel})`);

const work = mkdtempSync(join(tmpdir(), "stowage-bench-small-"));
const dataDir = join(work, "data");
const jwtKey = `0x${randomBytes(32).toString("hex")}`;
// A clean environment, as an operator's service would have (PATH for `bun src/main.ts`).
const env: Record<string, string | undefined> = { HOME: tmpdir(), PATH: process.env.PATH, STOWAGE_JWT_KEY: jwtKey };
const stowageCmd = stowageCommand({ cpuProf: values["cpu-prof"] });

const servers: RunningServer[] = [];
let exitCode = 0;
try {
  const stowage = await startServer(
    [...stowageCmd, "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir, "--log-level", logLevel, "--ipfs-listen", "/ip4/127.0.0.1/tcp/0", "--access-token-ttl", "12h", "--s3-api-port", "0", "--metrics-listen", "127.0.0.1:0"],
    { env, cwd: ROOT, timeoutMs: 60_000 },
  );
  servers.push(stowage);

  // ── the user: DID login through the SDK, free space, 10 files to list ──
  const account = privateKeyToAccount(generatePrivateKey());
  const store = await connectStorage({ baseUrl: stowage.url, account });
  const adminEnv = { ...env };
  delete adminEnv.STOWAGE_JWT_KEY;
  // An upload spends traffic as well as space.
  for (const quota of [["--space", "1GiB"], ["--traffic", "1GiB"]]) {
    await commandDuration([process.execPath, join(ROOT, "src", "main.ts"), "admin", "grant", "--did", store.did, ...quota, "--data-dir", dataDir], { env: adminEnv, cwd: ROOT })();
  }
  await store.login();
  const token = store.accessToken;
  if (!token) throw new Error("the login gave no access token");
  for (let i = 0; i < LISTED_FILES; i++) await store.upload("dfs", new Uint8Array(randomBytes(1000)), { name: `listed-${i}.bin` });
  const headers = { authorization: `Bearer ${token}` };

  // ── the baseline answers Stowage's own bodies for this user ──
  const bodies: Record<string, unknown> = {};
  for (const path of Object.values(PATHS)) {
    const res = await fetch(`${stowage.url}${path}`, { headers });
    if (!res.ok) throw new Error(`${path}: HTTP ${res.status} ${await res.text()}`);
    bodies[path] = await res.json();
  }
  const listed = (bodies[PATHS.list] as { Files?: unknown[] } | unknown[]);
  const count = Array.isArray(listed) ? listed.length : (Object.values(listed as object).find(Array.isArray) as unknown[] | undefined)?.length;
  if (count !== LISTED_FILES) throw new Error(`listobjects gave ${count} entries, expected ${LISTED_FILES}: ${JSON.stringify(listed).slice(0, 300)}`);
  const specFile = join(work, "baseline.json");
  writeFileSync(specFile, JSON.stringify({ jwtKey, bodies }));
  const baseline = await startServer([process.execPath, join(import.meta.dir, "servers", "elysia.ts"), specFile], { cwd: ROOT });
  servers.push(baseline);
  for (const path of Object.values(PATHS)) {
    const res = await fetch(`${baseline.url}${path}`, { headers });
    if (!res.ok || JSON.stringify(await res.json()) !== JSON.stringify(bodies[path])) throw new Error(`the baseline's ${path} differs from Stowage's`);
  }

  // Background work (chain indexer, lease renewals, the embedded chain and IPFS node) runs with
  // or without requests and lands in the CPU per request too: measured idle first, for reading it.
  const idleCores = async (server: RunningServer) => {
    const before = processCpuSeconds(server.proc.pid);
    await Bun.sleep(3000);
    return (processCpuSeconds(server.proc.pid) - before) / 3;
  };
  const [idleStowage, idleBaseline] = [await idleCores(stowage), await idleCores(baseline)];
  console.log(
    `small requests, ${connections} keep-alive connections, ${seconds} s per measurement, ${rounds} rounds + 1 warm-up; ` +
      `stowage ${stowage.url} (log level ${logLevel}), elysia ${baseline.url}; ${navigator.hardwareConcurrency} cores, Bun ${Bun.version}, ` +
      `${new Date().toISOString()}, load average ${loadAverage()}; idle CPU (cores, process tree): stowage ${idleStowage.toFixed(3)}, elysia ${idleBaseline.toFixed(3)}`,
  );
  const measure = (server: RunningServer, path: string) => httpMeasure(server, path, { durationMs: seconds * 1000, connections, headers });
  const results: [string, ComparisonResult<HttpMetric>][] = [];
  for (const key of paths) {
    const path = PATHS[key];
    results.push([
      path,
      await compareMany({
        name: `GET ${path}`,
        rounds,
        labels: { subject: "stowage", baseline: "elysia" },
        metrics: HTTP_METRICS,
        subject: measure(stowage, path),
        baseline: measure(baseline, path),
      }),
    ]);
  }

  // ── summary: one line per path ──
  const rows = [["path", "req/s stowage", "req/s elysia", "ratio (paired)", "p50 ms s/e", "p99 ms s/e", "CPU µs/req s/e", "CPU ratio"]];
  for (const [path, r] of results) {
    const { rps, p50, p99, cpu } = r.metrics;
    rows.push([
      path,
      fmt(rps.subject.median),
      fmt(rps.baseline.median),
      `${rps.ratio.toFixed(2)} (${rps.paired.min.toFixed(2)}–${rps.paired.max.toFixed(2)})`,
      `${fmt(p50.subject.median)} / ${fmt(p50.baseline.median)}`,
      `${fmt(p99.subject.median)} / ${fmt(p99.baseline.median)}`,
      `${fmt(cpu.subject.median)} / ${fmt(cpu.baseline.median)}`,
      cpu.ratio.toFixed(2),
    ]);
  }
  console.log(`\nsummary (medians of the rounds; load average at the end ${loadAverage()})`);
  for (const line of alignColumns(rows)) console.log(line);
} catch (err) {
  exitCode = 1;
  console.error(`small-requests benchmark failed: ${(err as Error).stack ?? err}`);
  for (const s of servers) console.error(`--- output of ${s.proc.pid}:\n${s.output()}`);
} finally {
  // Stowage stops (and writes its profile) before its data dir goes.
  await Promise.all(servers.map((s) => s.stop().catch(() => undefined)));
  rmSync(work, { recursive: true, force: true });
}
process.exit(exitCode);
