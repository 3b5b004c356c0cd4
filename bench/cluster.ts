/**
 * Many gateways as one service (DESIGN.md D16): how requests/s scale from one gateway
 * to three over one PostgreSQL and one Ceph RGW on this 2-core machine, and where the CPU of a
 * request goes (the gateways, postgres, the Ceph daemons, the chain, the load generator).
 *
 * One run starts what test/e2e/cluster.test.ts starts: an external anvil with the contracts
 * deployed, a real PostgreSQL, a one-node Ceph RGW and three compiled gateways (`dist/stowage`,
 * built first when older than the sources) sharing database URL, bucket prefix, chain, JWT key and
 * operator key; plus, for reference, one gateway on the embedded default (SQLite and local files)
 * on the same external chain, so the table also shows what PostgreSQL + RGW cost one gateway.
 * Three sides are measured in alternation, round by round, each kind of load in turn:
 *
 *   sqlite ×1  the SQLite gateway alone
 *   pg ×1      gateway A of the cluster alone (B and C idle: lease renewals, indexer polls)
 *   pg ×3      A, B and C, the load spread over them round-robin
 *
 * Loads: GET /dfs/space and GET /dfs/listobjects with a Bearer token (one session at the
 * cluster is valid at every gateway: the JWT key is shared), in the load generator process of
 * harness.ts; and 1 MiB uploads through the SDK, `--clients` users in parallel, each logged in
 * at its own gateway (its own session; pg ×3: client i at gateway i mod 3), each upload fresh
 * bytes, a signed restricted call with a voucher (one HTTP request, the POST: the SDK asks
 * /traffichash for its voucher counter before its first upload only, src/sdk/traffic-counter.ts);
 * `replace`: the same, each client uploading under one name of its own, so every upload replaces
 * a file (the old content released, its chunk deleted).
 *
 * Commits per request on PostgreSQL come from pg_stat_database (`xact_commit` of the cluster's
 * database): each snapshot waits for every backend's pending counts to be flushed (PostgreSQL
 * flushes an idle backend's at most ~11 s late), so a side's count covers its own requests and
 * the idle gateways' background (lease renewals, indexer polls) over the same span; the reading
 * connection's own commits are taken out. The SQLite side's count is that background alone (every
 * PostgreSQL gateway idle): at its rate per second, it is taken out of the PostgreSQL sides' count
 * over their own span for the row of the uploads' own commits.
 *
 * CPU per request comes from /proc: each component's user + system time over the measurement,
 * divided by the requests it served. PostgreSQL and Ceph are found by the pid files of this
 * process's own servers (others may run their own on the same machine). "rest of the machine" is
 * its busy CPU (/proc/stat) minus all of our processes': other sessions' work, and kernel threads
 * (some of them doing our I/O: loopback softirqs, writeback), so never quite zero.
 *
 * Run: bun bench/cluster.ts [--rounds 3] [--warmup 1] [--seconds 5] [--connections 16] [--clients 6] [--loads space,list,upload,replace]
 *      (--help: every option)
 */
import { readdirSync, readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { readDeployment } from "../src/chain/deployment.ts";
import { runAdmin } from "../src/cli/admin.ts";
import { runChain } from "../src/cli/chain.ts";
import { canonicalDid } from "../src/identity/did.ts";
import { connectStorage, type StorageClient } from "../src/sdk/storage.ts";
import { ANVIL_BIN, startAnvil } from "../test/support/anvil.ts";
import { cephRgw, stowageS3Env } from "../test/support/ceph.ts";
import { ensureFresh, STOWAGE_BUILD } from "../test/support/fresh-build.ts";
import { postgres } from "../test/support/postgres.ts";
import { openPostgres } from "../src/db/postgres.ts";
import { tempDir } from "../test/support/tmp.ts";
import { benchArgs, fmt, intOption, loadAverage, loadTest, percentile, positiveOption, processCpuSeconds, startServer, stats, usageError, type RunningServer, type Stats } from "./harness.ts";

const MiB = 2 ** 20;
const progress = (line: string) => process.stderr.write(`${line}\n`);

// ───────────────────────────── options ─────────────────────────────

const LOADS = ["space", "list", "upload", "replace"] as const;
type Load = (typeof LOADS)[number];

const args = benchArgs("Small requests and 1 MiB uploads through 1 and 3 gateways on PostgreSQL + Ceph RGW, and 1 on SQLite.", {
  rounds: { default: "3", help: "measured rounds" },
  warmup: { default: "1", help: "warm-up rounds, discarded" },
  seconds: { default: "5", help: "seconds per load and side, at most 600" },
  connections: { default: "16", help: "keep-alive connections for the small requests" },
  clients: { default: "6", help: "upload clients in parallel" },
  loads: { default: LOADS.join(","), help: "loads to measure, comma-separated" },
});
const rounds = intOption(args, "rounds");
const warmup = intOption(args, "warmup", 0);
const seconds = positiveOption(args, "seconds", 600);
const connections = intOption(args, "connections");
const clientCount = intOption(args, "clients");
const loads = args.loads.split(",") as Load[];
if (loads.some((l) => !LOADS.includes(l))) usageError(`--loads takes some of ${LOADS.join(",")}`);

// ───────────────────────────── CPU from /proc ─────────────────────────────

const CLK_TCK = Number(Bun.spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim()) || 100;

/** Busy CPU seconds of the whole machine so far (all cores; idle and iowait excluded). */
function machineBusySeconds(): number {
  const fields = (readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "").trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already in user).
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
  return (total - (fields[3] ?? 0) - (fields[4] ?? 0)) / CLK_TCK;
}

const cpuOf = (pids: number[]) => pids.reduce((sum, pid) => sum + processCpuSeconds(pid), 0);

/** Pids named in pid files under the folders this process's servers made (`prefix` + our pid). */
function pidsFromFiles(parent: string, prefix: string, files: string[]): number[] {
  const dirs = readdirSync(parent).filter((d) => d.startsWith(`${prefix}${process.pid}-`));
  const pids: number[] = [];
  for (const d of dirs) {
    for (const f of files) {
      try {
        const pid = Number(readFileSync(join(parent, d, f), "utf8").split("\n")[0]);
        if (pid > 0) pids.push(pid);
      } catch {
        // not written (yet), or gone
      }
    }
  }
  return pids;
}

/** The anvil listening on `port` (startAnvil does not hand out its pid). */
function anvilPid(port: string): number {
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const argv = readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0");
      if (argv[0] === ANVIL_BIN && argv[argv.indexOf("--port") + 1] === port) return Number(p);
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no anvil process on port ${port}`);
}

// ───────────────────────────── the shared parts ─────────────────────────────

const hex32 = () => `0x${randomBytes(32).toString("hex")}`;
const servers: RunningServer[] = [];
const stops: (() => Promise<unknown>)[] = [];
let exitCode = 0;

try {
  // Built first when older than the sources, as the e2e tests do.
  await ensureFresh(STOWAGE_BUILD, progress);
  progress(`binary: ${STOWAGE_BUILD.binary}`);

  const anvil = await startAnvil();
  stops.push(() => anvil.stop());
  const adminKey = generatePrivateKey();
  const operatorKey = generatePrivateKey();
  await anvil.fund(privateKeyToAccount(adminKey).address, parseEther("100"));
  await anvil.fund(privateKeyToAccount(operatorKey).address, parseEther("100"));
  const deployDir = tempDir("bench-cluster-deploy");
  const chainEnv: Record<string, string> = { STOWAGE_DATA_DIR: deployDir, STOWAGE_CHAIN_RPC: anvil.url, STOWAGE_ADMIN_KEY: adminKey, STOWAGE_OPERATOR_KEY: operatorKey };
  if ((await runChain(["deploy"], chainEnv, () => {}, () => {})) !== 0) throw new Error("stowage chain deploy failed");
  const deployment = readDeployment(deployDir);
  if (!deployment) throw new Error("the deploy wrote no deployment");
  const contracts = {
    STOWAGE_PROXY_ADDRESS: deployment.contracts.proxy,
    STOWAGE_DID_REGISTRY_ADDRESS: deployment.contracts.didRegistry,
    STOWAGE_DIRECTORY_ADDRESS: deployment.contracts.directory,
    STOWAGE_CONTRACTS_BLOCK: String(deployment.block),
  };
  Object.assign(chainEnv, contracts);
  const anvilPids = [anvilPid(new URL(anvil.url).port)];
  progress(`chain: ${anvil.url}, contracts deployed`);

  // PostgreSQL and Ceph start side by side: each takes seconds, mostly waiting.
  const [pg, rgw] = await Promise.all([postgres(), cephRgw()]);
  stops.push(() => rgw.stop(), () => pg.stop(), () => stats.close());
  const databaseUrl = await pg.createDatabase();
  const stats = (await openPostgres(databaseUrl, { max: 1 })).sql;
  /** Commits of the cluster's database so far, after every backend has flushed its counts. */
  let ownReads = 0;
  const commits = async () => {
    await Bun.sleep(11_500);
    ownReads++;
    const row = await stats.get<{ n: string | number }>("SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()");
    // Each read is a commit of its own (autocommit), counted from the next read on.
    return Number(row?.n ?? 0) - (ownReads - 1);
  };
  const pgPids = () => pidsFromFiles("/tmp", "stowage-pg-", ["data/postmaster.pid"]);
  const cephPids = () => pidsFromFiles(tmpdir(), "stowage-ceph-", ["run/mon.pid", "run/osd.pid", "run/rgw.pid"]);
  if (pgPids().length !== 1 || cephPids().length !== 3) throw new Error(`found ${pgPids().length} postmaster(s) and ${cephPids().length} Ceph daemon(s) of ours, expected 1 and 3`);
  progress(`postgres (${pg.startMs} ms) and ceph rgw (${rgw.startMs} ms) up`);

  // What every gateway shares (README "Running many gateways"); the SQLite one differs only in
  // having no database URL and no S3 settings.
  const shared: Record<string, string> = {
    HOME: tmpdir(),
    STOWAGE_CHAIN_RPC: anvil.url,
    ...contracts,
    STOWAGE_CHAIN_CONFIRMATIONS: "0",
    // Three gateways on one machine: the default metrics and S3 API ports fit one.
    STOWAGE_METRICS_LISTEN: "off",
    STOWAGE_S3_API_PORT: "0",
    STOWAGE_JWT_KEY: hex32(),
    STOWAGE_OPERATOR_KEY: operatorKey,
    STOWAGE_ACCESS_TOKEN_TTL: "12h",
  };
  const cluster = { ...shared, STOWAGE_DATABASE_URL: databaseUrl, ...stowageS3Env(rgw, rgw.prefix()) };
  const startGateway = async (name: string, env: Record<string, string>) => {
    const dataDir = join(tempDir(`bench-cluster-${name}`), "data");
    const cmd = [STOWAGE_BUILD.binary, "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir, "--log-level", "error", "--ipfs-listen", "/ip4/127.0.0.1/tcp/0"];
    const server = await startServer(cmd, { env, timeoutMs: 60_000 });
    servers.push(server);
    progress(`gateway ${name}: ${server.url} (pid ${server.proc.pid})`);
    return server;
  };
  const S = await startGateway("sqlite", shared);
  // A first: it migrates; B and C then find the schema in place.
  const A = await startGateway("A", cluster);
  const [B, C] = await Promise.all([startGateway("B", cluster), startGateway("C", cluster)]);

  // ── users: space and traffic granted on the shared chain, as an operator would ──
  const grant = async (account: PrivateKeyAccount) => {
    const did = canonicalDid(account.address, anvil.chainId);
    for (const quota of [["--space", "1024GiB"], ["--traffic", "1024GiB"]]) {
      const log: string[] = [];
      const code = await runAdmin(["grant", "--did", did, ...(quota as [string, string])], chainEnv, () => {}, (l) => log.push(l));
      if (code !== 0) throw new Error(`stowage admin grant ${quota.join(" ")} failed:\n${log.join("\n")}`);
    }
  };
  const login = async (server: RunningServer, account: PrivateKeyAccount) => {
    const store = await connectStorage({ baseUrl: server.url, account });
    await store.login();
    return store;
  };
  // The small requests' user: a session at each store, and a listing of 10 files.
  const reader = privateKeyToAccount(generatePrivateKey());
  await grant(reader);
  const readers = { sqlite: await login(S, reader), pg: await login(A, reader) };
  for (const store of Object.values(readers)) {
    for (let i = 0; i < 10; i++) await store.upload("dfs", new Uint8Array(randomBytes(1000)), { name: `listed-${i}.bin` });
  }
  const uploaders = Array.from({ length: clientCount }, () => privateKeyToAccount(generatePrivateKey()));
  for (const account of uploaders) await grant(account);
  progress(`${1 + clientCount} users granted 1 TiB of space and traffic`);

  // ── the three sides ──
  interface Side {
    name: string;
    gateways: RunningServer[];
    token: string;
    clients: StorageClient[];
  }
  const tokenOf = (s: StorageClient) => s.accessToken as string;
  const sides: Side[] = [
    { name: "sqlite ×1", gateways: [S], token: tokenOf(readers.sqlite), clients: await Promise.all(uploaders.map((a) => login(S, a))) },
    { name: "pg ×1", gateways: [A], token: tokenOf(readers.pg), clients: await Promise.all(uploaders.map((a) => login(A, a))) },
    { name: "pg ×3", gateways: [A, B, C], token: tokenOf(readers.pg), clients: await Promise.all(uploaders.map((a, i) => login([A, B, C][i % 3] as RunningServer, a))) },
  ];
  const allGateways = [S, A, B, C].map((g) => g.proc.pid);

  // ── one measurement ──
  type Metrics = Record<MetricKey, number>;
  /** CPU seconds of each component now, and of the machine. */
  const snapshot = () => {
    const gateways = new Map(allGateways.map((pid) => [pid, processCpuSeconds(pid)]));
    return { gateways, postgres: cpuOf(pgPids()), ceph: cpuOf(cephPids()), chain: cpuOf(anvilPids), machine: machineBusySeconds(), at: performance.now() };
  };
  /** CPU per request (µs) by component, from two snapshots and what the generator used. */
  const attribute = (side: Side, before: ReturnType<typeof snapshot>, after: ReturnType<typeof snapshot>, requests: number, generatorSeconds: number) => {
    const d = (k: "postgres" | "ceph" | "chain") => after[k] - before[k];
    const gw = (pids: number[]) => pids.reduce((sum, pid) => sum + ((after.gateways.get(pid) ?? 0) - (before.gateways.get(pid) ?? 0)), 0);
    const ours = gw(allGateways) + d("postgres") + d("ceph") + d("chain") + generatorSeconds;
    const wall = (after.at - before.at) / 1000;
    const per = (s: number) => (s / requests) * 1e6;
    const cpuGateways = per(gw(side.gateways.map((g) => g.proc.pid)));
    const parts = { cpuGateways, cpuPostgres: per(d("postgres")), cpuCeph: per(d("ceph")), cpuChain: per(d("chain")), cpuGenerator: per(generatorSeconds) };
    const total = Object.values(parts).reduce((a, b) => a + b, 0);
    return { ...parts, cpuTotal: total, rest: Math.max(0, (after.machine - before.machine - ours) / wall) };
  };

  async function small(side: Side, path: string): Promise<Metrics> {
    const before = snapshot();
    const r = await loadTest({ url: side.gateways.map((g) => `${g.url}${path}`), durationMs: seconds * 1000, connections, headers: { authorization: `Bearer ${side.token}` } });
    const after = snapshot();
    return { rate: r.rps, p50: r.p50Ms, p99: r.p99Ms, ...attribute(side, before, after, r.requests, r.generatorCpu * r.seconds), commitsPostgres: Number.NaN, commitsUploads: Number.NaN };
  }

  let serial = 0;
  /** Commits per second of the idle cluster, as the latest SQLite side counted them. */
  let background = 0;
  /** `replace`: each client uploads under one name of its own, each upload replacing the last. */
  async function uploads(side: Side, replace: boolean): Promise<Metrics> {
    const latencies: number[] = [];
    const commitsBefore = await commits();
    const readBefore = performance.now();
    const before = snapshot();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const deadline = t0 + seconds * 1000;
    await Promise.all(
      side.clients.map(async (store, client) => {
        // Fresh bytes each time (no store finds content it already has): a random MiB with a
        // serial number in front, cheaper than drawing a new MiB per upload.
        const base = new Uint8Array(randomBytes(MiB));
        while (performance.now() < deadline) {
          const bytes = base.slice();
          new DataView(bytes.buffer).setFloat64(0, ++serial);
          const started = performance.now();
          await store.upload("dfs", bytes, { name: replace ? `r${client}.bin` : `u${serial}.bin` });
          latencies.push(performance.now() - started);
        }
      }),
    );
    const wall = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const after = snapshot();
    const committed = (await commits()) - commitsBefore;
    const span = (performance.now() - readBefore) / 1000;
    // The SQLite side's commits are the cluster's background alone (every PostgreSQL gateway is
    // idle then: indexer, pins and denylist polls): at its rate per second, taken out of the
    // PostgreSQL sides' count over their own span, what is left is the uploads'.
    if (side.gateways.every((g) => g === S)) background = committed / span;
    const sorted = Float64Array.from(latencies).sort();
    const per = attribute(side, before, after, latencies.length, (cpu.user + cpu.system) / 1e6);
    // Per upload in ms, not µs.
    const ms = Object.fromEntries(Object.entries(per).map(([k, v]) => [k, k === "rest" ? v : v / 1000])) as typeof per;
    return { rate: latencies.length / wall, p50: percentile(sorted, 50), p99: percentile(sorted, 99), ...ms, commitsPostgres: committed / latencies.length, commitsUploads: (committed - background * span) / latencies.length };
  }

  const measure: Record<Load, (side: Side) => Promise<Metrics>> = {
    space: (side) => small(side, "/dfs/space"),
    list: (side) => small(side, "/dfs/listobjects"),
    upload: (side) => uploads(side, false),
    replace: (side) => uploads(side, true),
  };

  // ── alternating rounds: every load, every side in turn, so pairs see the same machine ──
  const samples = new Map<string, Metrics[]>();
  for (let i = 0; i < warmup + rounds; i++) {
    // The planner's statistics before the first measured round, as autovacuum takes them within a
    // minute of a new database's first writes (test/support/postgres.ts's analyze).
    if (i === warmup) await pg.analyze(databaseUrl);
    const tag = i < warmup ? `warm-up ${i + 1}/${warmup}` : `round ${i - warmup + 1}/${rounds}`;
    for (const load of loads) {
      for (const side of sides) {
        const m = await measure[load](side);
        const unit = load === "upload" || load === "replace" ? "ms" : "µs";
        progress(
          `${load.padEnd(6)} ${tag} ${side.name.padEnd(9)} ${fmt(m.rate)}/s p99 ${fmt(m.p99)} ms; CPU ${unit}/req: gateways ${fmt(m.cpuGateways)} postgres ${fmt(m.cpuPostgres)}${Number.isNaN(m.commitsPostgres) ? "" : ` (${fmt(m.commitsPostgres)} commits, ${fmt(m.commitsUploads)} the uploads')`} ceph ${fmt(m.cpuCeph)} generator ${fmt(m.cpuGenerator)}; rest of machine ${fmt(m.rest)} cores${i < warmup ? " (discarded)" : ""}`,
        );
        if (i >= warmup) samples.set(`${load}/${side.name}`, [...(samples.get(`${load}/${side.name}`) ?? []), m]);
      }
    }
  }

  // ── the table ──
  const startedAt = new Date().toISOString().slice(0, 16).replace("T", " ");
  console.log(`cluster: ${rounds} rounds (+${warmup} warm-up) × ${seconds} s per load and side, in alternation; ${connections} connections for small requests, ${clientCount} upload clients; ${startedAt} UTC, load average ${loadAverage()}`);
  for (const load of loads) console.log(`\n${table(load, sides.map((s) => s.name), (side) => samples.get(`${load}/${side}`) ?? [])}`);
  console.log("\nside columns: median (min–max) of the rounds; ratio columns: ratio of the medians (min–max of the per-round paired ratios)");
} catch (err) {
  exitCode = 1;
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  for (const s of servers) if (s.proc.exitCode !== null) console.error(`--- ${s.url} exited ${s.proc.exitCode}:\n${s.output()}`);
} finally {
  progress("stopping gateways, ceph, postgres, anvil");
  await Promise.all(servers.map((s) => s.stop().catch(() => undefined)));
  for (const stop of stops.reverse()) await stop().catch((e: unknown) => progress(`stop failed: ${(e as Error).message}`));
}
process.exit(exitCode);

// ───────────────────────────── formatting ─────────────────────────────

type MetricKey = "rate" | "p50" | "p99" | "cpuGateways" | "cpuPostgres" | "commitsPostgres" | "commitsUploads" | "cpuCeph" | "cpuChain" | "cpuGenerator" | "cpuTotal" | "rest";

function table(load: Load, sideNames: string[], of: (side: string) => Record<MetricKey, number>[]): string {
  const up = load === "upload" || load === "replace";
  const title = { space: "GET /dfs/space (Bearer)", list: "GET /dfs/listobjects (Bearer, 10 files)", upload: "1 MiB uploads (SDK: signed POST with a voucher)", replace: "1 MiB uploads, each replacing its client's one file" }[load];
  const cpu = up ? "CPU ms/upload" : "CPU µs/request";
  const rows: [MetricKey, string, boolean][] = [
    ["rate", up ? "uploads/s (= MiB/s)" : "requests/s", true],
    ["p50", "p50 latency (ms)", true],
    ["p99", "p99 latency (ms)", true],
    ["cpuGateways", `${cpu}: gateways`, true],
    ["cpuPostgres", `${cpu}: postgres`, true],
    ...(up
      ? ([
          ["commitsPostgres", "postgres commits/upload (idle gateways' included)", true],
          ["commitsUploads", "postgres commits/upload, the uploads' (background out)", true],
        ] as [MetricKey, string, boolean][])
      : []),
    ["cpuCeph", `${cpu}: ceph (rgw, osd, mon)`, true],
    ["cpuChain", `${cpu}: anvil`, true],
    ["cpuGenerator", `${cpu}: ${up ? "client (SDK)" : "load generator"}`, true],
    ["cpuTotal", `${cpu}: total`, true],
    ["rest", "rest of the machine (cores, information)", false],
  ];
  const ratios: [string, string, string][] = [
    ["pg ×3/pg ×1", "pg ×3", "pg ×1"],
    ["pg ×1/sqlite ×1", "pg ×1", "sqlite ×1"],
  ].filter(([, a, b]) => sideNames.includes(a as string) && sideNames.includes(b as string)) as [string, string, string][];
  const out: string[][] = [[title, ...sideNames, ...ratios.map((r) => r[0])]];
  const range = (s: Stats) => `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`;
  for (const [key, label, withRatio] of rows) {
    const st = new Map(sideNames.map((n) => [n, of(n).map((m) => m[key])]));
    const row = [label, ...sideNames.map((n) => range(stats(st.get(n) as number[])))];
    for (const [, a, b] of ratios) {
      const xs = st.get(a) as number[];
      const ys = st.get(b) as number[];
      const paired = xs.map((x, i) => x / (ys[i] as number));
      const ratio = stats(xs).median / stats(ys).median;
      // A component that is mere background on the other side (postgres beside the SQLite
      // gateway: the idle cluster's lease renewals) gives a ratio of noise: none is shown.
      const background = key.startsWith("cpu") && key !== "cpuTotal" && stats(ys).median < 0.02 * stats(of(b).map((m) => m.cpuTotal)).median;
      const shown = withRatio && !background && Number.isFinite(ratio) && paired.every(Number.isFinite);
      row.push(shown ? `${ratio.toFixed(2)} (${stats(paired).min.toFixed(2)}–${stats(paired).max.toFixed(2)})` : "—");
    }
    out.push(row);
  }
  const widths = (out[0] as string[]).map((_, c) => Math.max(...out.map((r) => (r[c] ?? "").length)));
  return out.map((r) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join("  ").trimEnd()).join("\n");
}
