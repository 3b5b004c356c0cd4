/**
 * A tiny side-by-side benchmark harness.
 *
 * The machine is small (2 cores) and shared, so absolute numbers drift from minute to minute.
 * What holds up is a ratio taken within one run, with the subject and the baseline measured in
 * alternation (A B A B …) so that both see the same drift. Hence `compare`: one discarded warm-up
 * round each, then N alternating rounds, then medians (robust to one noisy round), min/max (to
 * show the spread) and the ratio subject/baseline.
 *
 * @example
 *   await compare({
 *     name: "cli start", unit: "ms", higherIsBetter: false,
 *     subject: commandDuration(["./dist/stowage", "--help"]),
 *     baseline: commandDuration(["bun", "-e", ""]),
 *   })
 *   // or a command that prints its own number on its last line:
 *   subject: commandMeasurement(["./my-bench.sh"])
 *
 *   const r = await loadTest({ url: "http://127.0.0.1:8080/healthz", durationMs: 5000, connections: 32 })
 *   r.rps; r.p99Ms
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { constants } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { Subprocess } from "bun";

// ───────────────────────────── statistics ─────────────────────────────

export interface Stats {
  median: number;
  min: number;
  max: number;
  samples: number[];
}

export function stats(samples: readonly number[]): Stats {
  if (samples.length === 0) throw new Error("stats of no samples");
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  // Even counts take the mean of the two middle values, the usual definition of a median.
  const median = sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  return { median, min: sorted[0] as number, max: sorted[sorted.length - 1] as number, samples: [...samples] };
}

/** Nearest-rank percentile of an ascending array (p in 0..100). */
export function percentile(ascending: ArrayLike<number>, p: number): number {
  if (ascending.length === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * ascending.length));
  return ascending[Math.min(rank, ascending.length) - 1] as number;
}

// ───────────────────────────── comparisons ─────────────────────────────

/** One measurement: returns a number (requests/s, ms, bytes …). */
export type Measure = () => Promise<number>;
/** One measurement that yields several metrics at once (e.g. requests/s and p99 of one load test). */
export type MultiMeasure<K extends string> = () => Promise<Record<K, number>>;

export interface MetricSpec {
  /** Shown in the table, e.g. "req/s" or "ms". */
  unit: string;
  /** null: shown for information (e.g. the load generator's own CPU), neither better nor worse. */
  higherIsBetter: boolean | null;
  /** Row title; the metric's key when absent. */
  label?: string;
}

export interface MetricResult extends Required<MetricSpec> {
  subject: Stats;
  baseline: Stats;
  /** median(subject) / median(baseline): the number we report. */
  ratio: number;
  /** subject/baseline of each round's adjacent pair: its spread shows how far to trust `ratio`. */
  paired: Stats;
}

export interface ComparisonResult<K extends string> {
  name: string;
  rounds: number;
  labels: { subject: string; baseline: string };
  metrics: Record<K, MetricResult>;
}

interface CommonOptions {
  name: string;
  /** Measured rounds after the warm-up (default 5). */
  rounds?: number;
  /** Warm-up rounds each, discarded (default 1): JIT, caches and connection pools settle there. */
  warmup?: number;
  labels?: { subject: string; baseline: string };
  /** Progress lines go here (default stderr, so stdout stays the table alone). */
  progress?: (line: string) => void;
  /** Print the table on stdout when done (default true). */
  print?: boolean;
}

export interface CompareOptions extends CommonOptions, MetricSpec {
  subject: Measure;
  baseline: Measure;
}

export interface CompareManyOptions<K extends string> extends CommonOptions {
  metrics: Record<K, MetricSpec>;
  subject: MultiMeasure<K>;
  baseline: MultiMeasure<K>;
}

const defaultProgress = (line: string) => process.stderr.write(`${line}\n`);

/** Compares one number: the usual case. */
export async function compare(opts: CompareOptions): Promise<MetricResult> {
  const { subject, baseline, unit, higherIsBetter, label, ...common } = opts;
  const result = await compareMany({
    ...common,
    metrics: { value: { unit, higherIsBetter, label: label ?? opts.name } },
    subject: async () => ({ value: await subject() }),
    baseline: async () => ({ value: await baseline() }),
  });
  return result.metrics.value;
}

/** Compares several metrics that one measurement yields together, in alternation. */
export async function compareMany<K extends string>(opts: CompareManyOptions<K>): Promise<ComparisonResult<K>> {
  const rounds = opts.rounds ?? 5;
  const warmup = opts.warmup ?? 1;
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`rounds must be a positive integer (got ${rounds})`);
  if (!Number.isInteger(warmup) || warmup < 0) throw new Error(`warmup must be a non-negative integer (got ${warmup})`);
  const labels = opts.labels ?? { subject: "stowage", baseline: "baseline" };
  const progress = opts.progress ?? defaultProgress;
  const keys = Object.keys(opts.metrics) as K[];
  const samples = { subject: [] as Record<K, number>[], baseline: [] as Record<K, number>[] };

  const show = (values: Record<K, number>) => keys.map((k) => `${fmt(values[k])} ${opts.metrics[k].unit}`).join(", ");
  for (let i = 0; i < warmup + rounds; i++) {
    const tag = i < warmup ? `warm-up ${i + 1}/${warmup}` : `round ${i - warmup + 1}/${rounds}`;
    // A then B in every round: adjacent pairs see nearly the same machine load.
    for (const side of ["subject", "baseline"] as const) {
      const values = await (side === "subject" ? opts.subject : opts.baseline)();
      for (const k of keys) {
        if (typeof values[k] !== "number" || !Number.isFinite(values[k])) throw new Error(`${opts.name}: ${labels[side]} gave ${k} = ${values[k]}`);
      }
      progress(`${opts.name} ${tag} ${labels[side].padEnd(10)} ${show(values)}${i < warmup ? " (discarded)" : ""}`);
      if (i >= warmup) samples[side].push(values);
    }
  }

  const metrics = {} as Record<K, MetricResult>;
  for (const k of keys) {
    const spec = opts.metrics[k];
    const s = samples.subject.map((v) => v[k]);
    const b = samples.baseline.map((v) => v[k]);
    const subject = stats(s);
    const baseline = stats(b);
    metrics[k] = {
      unit: spec.unit,
      higherIsBetter: spec.higherIsBetter,
      label: spec.label ?? k,
      subject,
      baseline,
      ratio: subject.median / baseline.median,
      paired: stats(s.map((x, i) => x / (b[i] as number))),
    };
  }
  const result: ComparisonResult<K> = { name: opts.name, rounds, labels, metrics };
  if (opts.print ?? true) process.stdout.write(`${formatTable(result)}\n`);
  return result;
}

/** Plain-text table: one block per metric, subject and baseline rows, then the ratio. */
export function formatTable<K extends string>(r: ComparisonResult<K>): string {
  const rows: string[][] = [["metric", "", "median", "min", "max"]];
  for (const m of Object.values(r.metrics) as MetricResult[]) {
    const direction = m.higherIsBetter === null ? "for information" : `${m.higherIsBetter ? "higher" : "lower"} is better`;
    const title = `${m.label} (${m.unit}, ${direction})`;
    rows.push([title, r.labels.subject, fmt(m.subject.median), fmt(m.subject.min), fmt(m.subject.max)]);
    rows.push(["", r.labels.baseline, fmt(m.baseline.median), fmt(m.baseline.min), fmt(m.baseline.max)]);
    rows.push(["", `${r.labels.subject}/${r.labels.baseline}`, m.ratio.toFixed(3), m.paired.min.toFixed(3), m.paired.max.toFixed(3)]);
  }
  return [
    `${r.name}: ${r.rounds} rounds, ${r.labels.subject} and ${r.labels.baseline} in alternation (warm-up discarded)`,
    ...alignColumns(rows, 2),
    `ratio row: median(${r.labels.subject}) / median(${r.labels.baseline}); its min/max are of the per-round paired ratios`,
  ].join("\n");
}

/** Rows as lines of columns two spaces apart, each as wide as its widest cell: the first `left`
 * columns (names) padded on the right, the others (numbers) on the left. */
export function alignColumns(rows: readonly (readonly string[])[], left = 1): string[] {
  const widths = (rows[0] ?? []).map((_, c) => Math.max(...rows.map((row) => (row[c] ?? "").length)));
  return rows.map((row) => row.map((cell, c) => (c < left ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join("  ").trimEnd());
}

/** Four significant digits, thousands grouped: enough for numbers that drift by percents. */
export function fmt(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  if (Math.abs(n) >= 1000) return Math.round(n).toLocaleString("en-US");
  return Number(n.toPrecision(4)).toString();
}

// ───────────────────────────── child processes ─────────────────────────────

/** Every child still running, so an error or a Ctrl-C in the harness does not leave one behind. */
const live = new Set<Subprocess>();
let guarded = false;

function guard() {
  if (guarded) return;
  guarded = true;
  // kill() is synchronous, so it also works inside "exit", where nothing async runs any more.
  // SIGTERM, not SIGKILL: the children then stop their own children (an embedded chain, say).
  process.on("exit", () => {
    for (const p of live) p.kill("SIGTERM");
  });
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      for (const p of live) p.kill("SIGTERM");
      const children = [...live].map((p) => p.exited);
      const late = setTimeout(() => {
        for (const p of live) p.kill("SIGKILL");
      }, 5000);
      void Promise.all(children).finally(() => {
        clearTimeout(late);
        process.exit(130);
      });
    });
  }
}

export interface ChildProcess {
  proc: Subprocess<"pipe", "pipe", "pipe">;
  /** What the child printed (stdout and stderr interleaved, the last 64 KiB), for error messages. */
  output(): string;
  /** Its stdout alone (the last 64 KiB); complete once `stop()` or `finished()` resolved. */
  stdout(): string;
  /** Resolves with the exit code once the child exited and its pipes are drained. */
  finished(): Promise<number>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code. Safe to call twice. */
  stop(graceMs?: number): Promise<number>;
}

const OUTPUT_KEEP = 64 * 1024;

/**
 * Spawns a child with stdin as a pipe that is never written: the child scripts in bench/ exit on
 * its EOF, which the OS delivers even when the harness dies by SIGKILL and no handler runs.
 */
export function spawnChild(cmd: string[], opts: { env?: Record<string, string | undefined>; cwd?: string } = {}): ChildProcess {
  guard();
  const proc = Bun.spawn(cmd, { env: opts.env ?? process.env, cwd: opts.cwd, stdin: "pipe", stdout: "pipe", stderr: "pipe" });
  live.add(proc);
  void proc.exited.then(() => live.delete(proc));
  let all = "";
  let out = "";
  const keepTail = (s: string) => (s.length > 2 * OUTPUT_KEEP ? s.slice(-OUTPUT_KEEP) : s);
  // Both pipes must be drained all the time, or a chatty child blocks on a full pipe.
  const collect = async (stream: ReadableStream<Uint8Array>, isStdout: boolean) => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      const text = decoder.decode(chunk, { stream: true });
      all = keepTail(all + text);
      if (isStdout) out = keepTail(out + text);
    }
  };
  const drained = Promise.all([collect(proc.stdout, true), collect(proc.stderr, false)]).catch(() => undefined);
  const finished = async () => {
    await proc.exited;
    await drained;
    // A child killed by a signal has no exit code; 128 + n is what a shell would report.
    const signal = proc.signalCode;
    return proc.exitCode ?? 128 + (typeof signal === "string" ? constants.signals[signal] : (signal ?? 0));
  };
  return {
    proc,
    output: () => all.slice(-OUTPUT_KEEP),
    stdout: () => out.slice(-OUTPUT_KEEP),
    finished,
    async stop(graceMs = 5000) {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill("SIGTERM");
        const timer = setTimeout(() => proc.kill("SIGKILL"), graceMs);
        await proc.exited;
        clearTimeout(timer);
      }
      return finished();
    },
  };
}

export interface RunningServer extends ChildProcess {
  /** Base URL, e.g. http://127.0.0.1:41234 */
  url: string;
}

/**
 * Starts a server in a child process and waits for the line that names its address: the bench/
 * servers print "listening on http://…", and `stowage serve` "stowage listening on http://…"
 * (not its other listeners' lines, such as "stowage S3 API listening on …").
 */
export async function startServer(
  cmd: string[],
  opts: { env?: Record<string, string | undefined>; cwd?: string; timeoutMs?: number; ready?: RegExp } = {},
): Promise<RunningServer> {
  const ready = opts.ready ?? /^(?:stowage )?listening on (http:\/\/\S+)/m;
  const child = spawnChild(cmd, opts);
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  for (;;) {
    const url = ready.exec(child.output())?.[1];
    if (url) {
      assertLoopback(url);
      return { ...child, url };
    }
    if (child.proc.exitCode !== null || child.proc.signalCode !== null || Date.now() > deadline) {
      await child.stop(0);
      throw new Error(`${cmd.join(" ")} did not start (exit ${child.proc.exitCode ?? child.proc.signalCode}):\n${child.output()}`);
    }
    await Bun.sleep(20);
  }
}

// ───────────────────────────── external commands ─────────────────────────────

export interface CommandOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  /** Killed after this long (default 5 minutes): a benchmark must end by itself. */
  timeoutMs?: number;
  /** Turns the last non-empty stdout line into the number (default: Number()). */
  parse?: (lastLine: string) => number;
}

/**
 * A measurement that runs a command which prints a number on its last line, so benchmarks can
 * compare CLIs (or anything written in another language) with the same harness.
 */
export function commandMeasurement(cmd: string[], opts: CommandOptions = {}): Measure {
  return async () => {
    const { stdout } = await runCommand(cmd, opts);
    const last = stdout.trimEnd().split("\n").pop()?.trim() ?? "";
    const value = (opts.parse ?? Number)(last);
    if (last === "" || !Number.isFinite(value)) throw new Error(`${cmd.join(" ")}: last line is not a number: ${JSON.stringify(last)}`);
    return value;
  };
}

/** A measurement of a command's wall-clock time in ms (spawn included), for CLIs that print no timing. */
export function commandDuration(cmd: string[], opts: Omit<CommandOptions, "parse"> = {}): Measure {
  return async () => {
    const started = performance.now();
    await runCommand(cmd, opts);
    return performance.now() - started;
  };
}

/** Runs a command to its end; throws on a non-zero exit or on the time limit. */
async function runCommand(cmd: string[], opts: Omit<CommandOptions, "parse">): Promise<{ stdout: string }> {
  const child = spawnChild(cmd, { env: opts.env, cwd: opts.cwd });
  // A command measured here gets no input: EOF at once, so one that reads stdin does not hang.
  child.proc.stdin.end();
  const limit = opts.timeoutMs ?? 300_000;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.proc.kill("SIGKILL");
  }, limit);
  const code = await child.finished();
  clearTimeout(timer);
  if (timedOut) throw new Error(`${cmd.join(" ")}: no end within ${limit} ms:\n${child.output()}`);
  if (code !== 0) throw new Error(`${cmd.join(" ")} exited ${code}:\n${child.output()}`);
  return { stdout: child.stdout() };
}

// ───────────────────────────── HTTP load ─────────────────────────────

export interface LoadTestOptions {
  /**
   * Loopback only (127.0.0.0/8, localhost, [::1]): load is never sent anywhere else. Several URLs
   * (several gateways of one service) take the requests in turn, as a round-robin balancer would.
   */
  url: string | string[];
  durationMs: number;
  /** Concurrent keep-alive request loops, one connection each. */
  connections: number;
  method?: string;
  headers?: Record<string, string>;
}

export interface LoadTestResult {
  requests: number;
  errors: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /**
   * CPU time the generator itself used, per second of wall time (1 = one core busy). Near 1 the
   * generator, not the server, limits throughput, and requests/s ratios understate the gap.
   */
  generatorCpu: number;
}

const WORKER = join(import.meta.dir, "load-worker.ts");

/** Throws unless the URL points at this machine's loopback. */
export function assertLoopback(url: string): void {
  const host = new URL(url).hostname;
  const ok = host === "localhost" || host === "[::1]" || /^127(\.\d{1,3}){3}$/.test(host);
  if (!ok) throw new Error(`refusing to load ${url}: only loopback addresses are benchmark targets`);
}

/**
 * Runs keep-alive fetch loops against `url` for `durationMs` in a separate Bun process, so the
 * load generator never shares an event loop (or a JIT) with the harness or the server measured.
 * Throws if any request failed or got a non-2xx status: such a round measures something else.
 */
export async function loadTest(opts: LoadTestOptions): Promise<LoadTestResult> {
  const urls = [opts.url].flat();
  if (urls.length === 0) throw new Error("loadTest needs at least one URL");
  for (const url of urls) assertLoopback(url);
  if (!(opts.durationMs > 0 && opts.durationMs <= 600_000)) throw new Error("durationMs must be in (0, 600000]");
  if (!(Number.isInteger(opts.connections) && opts.connections >= 1 && opts.connections <= 1024)) throw new Error("connections must be 1..1024");
  const child = spawnChild([process.execPath, WORKER, JSON.stringify(opts)]);
  // The worker stops itself at its deadline; this is the backstop if it hangs.
  const timer = setTimeout(() => child.proc.kill("SIGKILL"), opts.durationMs + 30_000);
  const code = await child.finished();
  clearTimeout(timer);
  if (code !== 0) throw new Error(`load worker exited ${code}:\n${child.output()}`);
  const last = child.stdout().trimEnd().split("\n").pop() ?? "";
  const result = JSON.parse(last) as LoadTestResult & { firstError?: string };
  if (result.errors > 0) throw new Error(`${urls.join(", ")}: ${result.errors} of ${result.requests + result.errors} requests failed (first: ${result.firstError})`);
  const { firstError: _, ...clean } = result;
  return clean;
}

/** What `httpMeasure` yields, as `compareMany` takes it. */
export const HTTP_METRICS = {
  rps: { unit: "req/s", higherIsBetter: true, label: "throughput" },
  p50: { unit: "ms", higherIsBetter: false, label: "p50 latency" },
  p99: { unit: "ms", higherIsBetter: false, label: "p99 latency" },
  cpu: { unit: "µs", higherIsBetter: false, label: "server CPU per request" },
  // Not a property of the server: shown so a reader can tell when the generator was the limit.
  gen: { unit: "cores", higherIsBetter: null, label: "load generator CPU" },
} as const satisfies Record<string, MetricSpec>;
export type HttpMetric = keyof typeof HTTP_METRICS;

/**
 * One load test of `server` at `path`: requests/s, p50 and p99, the server's CPU µs per request
 * (its process tree, from /proc) and the generator's CPU. The server idles between rounds, so its
 * CPU time across the load test is the serving cost.
 */
export function httpMeasure(server: RunningServer, path: string, opts: Omit<LoadTestOptions, "url">): MultiMeasure<HttpMetric> {
  return async () => {
    const cpuBefore = processCpuSeconds(server.proc.pid);
    const r = await loadTest({ ...opts, url: `${server.url}${path}` });
    const cpuUs = ((processCpuSeconds(server.proc.pid) - cpuBefore) * 1e6) / r.requests;
    return { rps: r.rps, p50: r.p50Ms, p99: r.p99Ms, cpu: cpuUs, gen: r.generatorCpu };
  };
}

// ───────────────────────────── CPU time ─────────────────────────────

/** The 1, 5 and 15 minute load averages, as /proc/loadavg spells them: said beside every figure,
 * since the machine is shared. */
export const loadAverage = (): string => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

let clockTicks: number | undefined;

/** utime + stime of one process from /proc/PID/stat, in clock ticks, and its parent's pid. */
function readStat(pid: number): { ticks: number; ppid: number } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined; // gone between listing and reading
  }
  // Field 2 (the command name) may hold spaces and parentheses: split after its last ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // proc(5) fields 4 (ppid), 14 (utime) and 15 (stime) sit at 1, 11 and 12 once pid and comm are gone.
  return { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) };
}

/**
 * CPU seconds (user + system, all threads) that a process and all its live descendants have used
 * so far, from /proc (Linux only). Descendants count because a server's work may sit in a child
 * (an embedded chain node answering its health check, say). CPU time per request is steadier
 * than requests/s on a shared machine, and unlike requests/s it does not flatten out when the
 * load generator is the bottleneck.
 */
export function processCpuSeconds(pid: number): number {
  if (clockTicks === undefined) {
    const out = Bun.spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim();
    clockTicks = Number(out) > 0 ? Number(out) : 100;
  }
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const ppid = readStat(Number(entry))?.ppid;
    if (ppid !== undefined) children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
  }
  let ticks = 0;
  const todo = [pid];
  for (let next = todo.pop(); next !== undefined; next = todo.pop()) {
    const stat = readStat(next);
    if (!stat && next === pid) throw new Error(`no process ${pid}`);
    ticks += stat?.ticks ?? 0;
    todo.push(...(children.get(next) ?? []));
  }
  return ticks / clockTicks;
}

/** A bench's string options: name → default and what it sets (shown by --help). */
export type BenchOptions = Record<string, { default?: string; boolean?: true; help: string }>;

/**
 * Parses a bench's arguments with node:util parseArgs: `--help`/`-h` prints `description` and every
 * option with its default and exits 0; an unknown or malformed option prints that and the usage
 * and exits 2, instead of a stack trace.
 *
 * @example
 *   const args = benchArgs("Encrypted against plain transfers.", { rounds: { default: "3", help: "measured rounds" } })
 */
export function benchArgs<O extends BenchOptions>(description: string, options: O): { [K in keyof O]: O[K] extends { boolean: true } ? boolean : O[K] extends { default: string } ? string : string | undefined } {
  const script = `bun bench/${(process.argv[1] ?? "bench").split("/").pop()}`;
  const lines = Object.entries(options).map(([name, o]) => `  --${name}${o.boolean ? "" : " VALUE"}`.padEnd(28) + o.help + (o.default !== undefined ? ` (default ${o.default})` : ""));
  const usage = `${description}\n\nUsage: ${script} [options]\n\n${lines.join("\n")}\n${"  --help, -h".padEnd(28)}this text`;
  benchUsage = usage;
  let values: Record<string, unknown>;
  try {
    ({ values } = parseArgs({
      options: { help: { type: "boolean", short: "h" }, ...Object.fromEntries(Object.entries(options).map(([name, o]) => [name, o.boolean ? { type: "boolean" as const } : { type: "string" as const, default: o.default }])) },
      strict: true,
    }));
  } catch (err) {
    usageError((err as Error).message);
  }
  if (values.help) {
    console.log(usage);
    process.exit(0);
  }
  // The mapped return type is what the option table declares; parseArgs' own type cannot follow it.
  return values as ReturnType<typeof benchArgs<O>>;
}

/** The usage text of this run's benchArgs, for usageError. */
let benchUsage = "";

/** Prints `message` and the bench's usage on stderr and exits 2: a bad option value is refused as a bad option is. */
export function usageError(message: string): never {
  console.error(benchUsage ? `${message}\n\n${benchUsage}` : message);
  process.exit(2);
}

/** Option `name` of benchArgs' values as an integer ≥ `min`, else a usage error. */
export function intOption(values: Record<string, unknown>, name: string, min = 1): number {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < min) usageError(`--${name} must be an integer ≥ ${min} (got ${values[name]})`);
  return n;
}

/** Option `name` of benchArgs' values as a number in (0, max], else a usage error. */
export function positiveOption(values: Record<string, unknown>, name: string, max = Number.POSITIVE_INFINITY): number {
  const n = Number(values[name]);
  if (!(n > 0 && n <= max)) usageError(`--${name} must be a ${max === Number.POSITIVE_INFINITY ? "positive number" : `number in (0, ${max}]`} (got ${values[name]})`);
  return n;
}

/** CPU time (user + system) a process has used so far, in ms (clock ticks of 10 ms); with
 * `children`, its reaped children's too. */
export function cpuMs(pid: number | "self", children = false): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return (Number(f[11]) + Number(f[12]) + (children ? Number(f[13]) + Number(f[14]) : 0)) * 10;
}

/** CPU time of this run's Ceph daemons, in ms (their folder is named after this process: test/support/ceph.ts). */
export function cephCpuMs(): number {
  let ms = 0;
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      if (/^(radosgw|ceph-osd|ceph-mon)/.test(readFileSync(`/proc/${pid}/comm`, "utf8")) && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(`stowage-ceph-${process.pid}-`)) ms += cpuMs(Number(pid));
    } catch {
      // gone between the listing and the read
    }
  }
  return ms;
}

/** `--binary` and `--cpu-prof DIR`, for a bench that starts Stowage (with stowageCommand). */
export const BINARY_OPTION = { boolean: true, help: "measure the compiled dist/stowage instead of src/ under Bun" } as const;
export const CPU_PROF_OPTION = { help: "Stowage writes a CPU profile (.cpuprofile and .md) to this folder when it stops" } as const;

/**
 * The command that runs Stowage: the compiled dist/stowage (`binary`; a usage error when it is not
 * built), or src/main.ts under this Bun, which with `cpuProf` writes a CPU profile there when it
 * exits, as .cpuprofile and as grep-friendly markdown (the compiled binary cannot).
 */
export function stowageCommand(o: { binary?: boolean; cpuProf?: string }): string[] {
  const root = join(import.meta.dir, "..");
  const binary = join(root, "dist", "stowage");
  if (o.binary) {
    if (o.cpuProf) usageError("--cpu-prof profiles `bun src/main.ts`, not --binary");
    if (!existsSync(binary)) usageError(`--binary: ${binary} is missing; run \`bun run build\` first`);
    return [binary];
  }
  const profFlags = o.cpuProf ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${o.cpuProf}`] : [];
  return [process.execPath, ...profFlags, join(root, "src", "main.ts")];
}
