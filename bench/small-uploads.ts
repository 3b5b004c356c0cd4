/**
 * Small uploads (4 KiB × 16 in flight): uploads per second of 4 KiB files of fresh
 * random bytes, 16 requests in flight, against a plain server that parses the same multipart body,
 * hashes the file part and writes it to one fsync'd file each (`bench/storage.ts
 * --baseline-server`). Measured in alternation, a fixed number of uploads per measurement. Each
 * upload names a new file, as the baseline writes a new one; with `--replace` every upload names
 * the same file, so each also replaces the last one and deletes its content (work the baseline
 * does not do; until 2026-11-23 this was the only mode).
 *
 * - Stowage: the real server (`bun src/main.ts serve`, or `dist/stowage` with `--binary`) over a
 *   temporary data dir, log level `error`, one account granted space and traffic, logged in with
 *   the SDK. Each upload is the request the SDK sends (`POST /dfs/` or `/ipfs/`, Bearer token, the
 *   signed fields with the file's Cid as payload — its SHA-256 with `--sha256-payload` — a fresh
 *   voucher, then the file part), signed
 *   before the measurement starts: the load is the server's alone, not the client's secp256k1
 *   signing (≈ 2 signatures per upload), which on 2 shared cores would otherwise compete with it.
 * - Baseline: the same multipart bodies (fields and file), posted to its /upload.
 * - Floor (bench/servers/upload-floor.ts; leave it out with `--no-floor`): the baseline plus only
 *   what D5 and D6 demand of any upload — the request's and the voucher's signatures recovered
 *   (Stowage's own code, libsecp256k1), the payload checked against the Cid, and ONE durable
 *   SQLite transaction (Stowage's layer, group commit) claiming the requestID and the voucher and
 *   recording the file — sent the very requests Stowage is sent. Measured against the baseline in
 *   a comparison of its own, after Stowage's: its ratio is the most a server keeping those
 *   guarantees reaches here with Stowage's own pieces (Bun, libsecp256k1, SQLite). Then Stowage
 *   against the floor, in alternation too (the two comparisons before ran in other minutes, on a
 *   disk whose speed swings): that ratio is what Stowage's other layers cost.
 *
 * With `--postgres` Stowage keeps its rows in a real PostgreSQL (Debian's, test/support/postgres.ts:
 * started for the run, a database of its own, on this machine's disk even with `--tmpfs`) as a
 * cluster's gateway does (D16): every statement is then a round trip, and every commit durable.
 * After the warm-up it runs ANALYZE (see `analyzeOnce`): the rounds measure a database whose
 * planner has statistics, as autovacuum gives any database within its first minute.
 * The floor then keeps its rows on the same PostgreSQL (a database of its own, the same pool): the
 * least a cluster's gateway needs, three round trips per upload. Both print PostgreSQL's CPU per
 * upload beside their own.
 *
 * Metrics: uploads per second (the closed loop's count over its wall time), p50 and p99 latency
 * (ms, as the client sees them), and the server process's CPU time per upload (/proc/PID/stat,
 * utime + stime of the server alone, not its embedded anvil): the steady number on a shared machine.
 *
 * Run: bun bench/small-uploads.ts [--rounds 3] [--uploads 400] [--in-flight 16] [--kib 4]
 *        [--backends dfs,ipfs] [--sha256-payload] [--replace] [--no-floor] [--tmpfs] [--postgres [--pool 10]] [--binary] [--cpu-prof DIR]
 *        (--help: every option; the floor is left out with --sha256-payload, --replace or files over 1 MiB)
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { cidOfStream, D9_LAYOUT } from "../src/sdk/cid.ts";
import { connectStorage } from "../src/sdk/storage.ts";
import { storageDomain, storageTypes } from "../src/identity/eip712.ts";
import { postgres, type Postgres } from "../test/support/postgres.ts";
import { BINARY_OPTION, benchArgs, commandDuration, compareMany, type ComparisonResult, CPU_PROF_OPTION, cpuMs, fmt, intOption, loadAverage, percentile, type RunningServer, startServer, stats, stowageCommand, usageError } from "./harness.ts";

const ROOT = join(import.meta.dir, "..");
const SHM = "/dev/shm";
/** Rounds of each comparison run first and not counted. */
const WARMUP = 1;
const values = benchArgs("Small uploads: Stowage against a plain multipart + SHA-256 + fsync'd file server, side by side.", {
  rounds: { default: "3", help: "measured rounds" },
  uploads: { default: "400", help: "uploads per measurement" },
  "in-flight": { default: "16", help: "uploads in flight" },
  kib: { default: "4", help: "file size in KiB" },
  backends: { default: "dfs", help: "dfs, ipfs or both, comma-separated" },
  "sha256-payload": { boolean: true, help: "sign the file's SHA-256 instead of its Cid (D5's older form)" },
  replace: { boolean: true, help: "every upload names the same file (replacing the last, deleting its content) instead of a new one" },
  "no-floor": { boolean: true, help: "leave out the floor (servers/upload-floor.ts: the baseline + the signatures and claims every upload needs) and its two comparisons" },
  postgres: { boolean: true, help: "Stowage on a real PostgreSQL (started for the run; its own database) instead of SQLite: a cluster gateway's configuration (D16)" },
  pool: { default: "10", help: "with --postgres: the gateway's connections to PostgreSQL (STOWAGE_DATABASE_POOL)" },
  tmpfs: { boolean: true, help: `every server's files in ${SHM} (memory: an fsync costs nothing), so the comparison is of CPU, not of this machine's disk, whose speed swings` },
  binary: BINARY_OPTION,
  "cpu-prof": CPU_PROF_OPTION,
});
const rounds = intOption(values, "rounds");
const perRound = intOption(values, "uploads");
const inFlight = intOption(values, "in-flight");
const fileBytes = intOption(values, "kib") * 1024;
const pool = intOption(values, "pool");
const backends = values.backends.split(",");
if (backends.some((b) => b !== "dfs" && b !== "ipfs")) usageError("--backends takes dfs, ipfs or both");
const useBinary = values.binary === true;
/** Sign the file's SHA-256 instead of its Cid (D5's older form; servers before the Cid payload take only it). */
const sha256Payload = values["sha256-payload"] === true;
const replace = values.replace === true;
/** The floor takes new Cid-signed files of one chunk only: it neither replaces a file, nor takes a
 * SHA-256 payload, nor builds a Cid of more than one leaf. */
const withFloor = values["no-floor"] !== true && !sha256Payload && !replace && fileBytes <= D9_LAYOUT.chunkSize;
/** Files named so far (without --replace, each upload names a new one). */
let named = 0;
const stowageCmd = stowageCommand({ binary: useBinary, cpuProf: values["cpu-prof"] });

/** One multipart body: the fields, then the file part (as the SDK builds it). */
function multipart(fields: Record<string, string>, file: Uint8Array, filename = "small.bin"): { body: Uint8Array; type: string } {
  const boundary = `----stowage${randomBytes(12).toString("hex")}`;
  const enc = new TextEncoder();
  const head = enc.encode(
    Object.entries(fields)
      .map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`)
      .join("") + `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
  const tail = enc.encode(`\r\n--${boundary}--\r\n`);
  const body = new Uint8Array(head.length + file.length + tail.length);
  body.set(head);
  body.set(file, head.length);
  body.set(tail, head.length + file.length);
  return { body, type: `multipart/form-data; boundary=${boundary}` };
}

interface Prepared {
  url: string;
  headers: Record<string, string>;
  body: Uint8Array;
}

/** Sends `requests` with `inFlight` at a time; uploads/s, latencies, and the server's CPU per upload. */
async function run(pid: number, requests: Prepared[]) {
  const latencies: number[] = [];
  let next = 0;
  const cpu0 = cpuMs(pid);
  const db0 = databaseCpuMs();
  const started = performance.now();
  const worker = async () => {
    while (next < requests.length) {
      const r = requests[next++] as Prepared;
      const t = performance.now();
      const res = await fetch(r.url, { method: "POST", headers: r.headers, body: r.body });
      const text = await res.text();
      if (!res.ok) throw new Error(`${r.url}: ${res.status} ${text.slice(0, 300)}`);
      latencies.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const seconds = (performance.now() - started) / 1000;
  const cpu = cpuMs(pid) - cpu0;
  if (pg) databaseCpuOf(pid).push((databaseCpuMs() - db0) / requests.length);
  latencies.sort((a, b) => a - b);
  return { rate: requests.length / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99), cpu: cpu / requests.length };
}

/** With --postgres: PostgreSQL's CPU per upload in each measurement of Stowage and of the floor
 * (one server is loaded at a time, so its backends work for it alone), by the server's pid. */
let pg: Postgres | undefined;
const databaseCpu = new Map<number, number[]>();
const databaseCpuOf = (pid: number) => databaseCpu.get(pid) ?? (databaseCpu.set(pid, []).get(pid) as number[]);
const databaseCpuMs = () => (pg ? pg.pids().reduce((ms, p) => ms + cpuMs(p), 0) : 0);
/** With --postgres, PostgreSQL's median CPU per upload over one comparison's measurements of each
 * server (named when there are two), its warm-up left out as compareMany leaves it out; then
 * forgotten, so the next comparison starts anew. */
const databaseCpuText = (...servers: { pid: number; name?: string }[]) =>
  pg ? `; PostgreSQL's CPU ${servers.map(({ pid, name }) => `${fmt(stats(databaseCpuOf(pid).splice(0).slice(WARMUP)).median)}${name ? ` (${name})` : ""}`).join(", ")} ms per upload` : "";

/**
 * With --postgres, once, after Stowage's first round (the warm-up): ANALYZE, as autovacuum does
 * within a minute of a new database's first writes. Before it the planner has no statistics, ties
 * the two indexes that start with (did, backend), and reads an upload's file row by name through
 * `files_listing`: every file of the account per upload, instead of one through `files_name`. The
 * bench's half minute would otherwise measure only a new database's first minute.
 */
let analyzed = false;
async function analyzeOnce() {
  if (!pg || analyzed) return;
  analyzed = true;
  await pg.analyze(env.STOWAGE_DATABASE_URL as string);
}

if (values.tmpfs && !existsSync(SHM)) usageError(`--tmpfs: ${SHM} does not exist here`);
// The servers make their files under TMPDIR (the baseline and the floor) or the data dir (Stowage).
const temp = values.tmpfs ? SHM : tmpdir();
const childEnv = { ...process.env, TMPDIR: temp };
const work = mkdtempSync(join(temp, "stowage-bench-small-uploads-"));
const dataDir = join(work, "data");
const env: Record<string, string | undefined> = { HOME: tmpdir(), TMPDIR: temp, ...(useBinary ? {} : { PATH: process.env.PATH }) };
const servers: RunningServer[] = [];
let exitCode = 0;
try {
  if (values.postgres) {
    pg = await postgres();
    env.STOWAGE_DATABASE_URL = await pg.createDatabase();
    env.STOWAGE_DATABASE_POOL = String(pool);
  }
  const stowage = await startServer(
    [...stowageCmd, "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir, "--log-level", "error", "--ipfs-listen", "/ip4/127.0.0.1/tcp/0", "--access-token-ttl", "12h", "--s3-api-port", "0", "--metrics-listen", "127.0.0.1:0"],
    { env, cwd: ROOT, timeoutMs: 60_000 },
  );
  servers.push(stowage);
  const baseline = await startServer([process.execPath, join(import.meta.dir, "storage.ts"), "--baseline-server"], { env: childEnv, cwd: ROOT });
  servers.push(baseline);

  const account = privateKeyToAccount(generatePrivateKey());
  const store = await connectStorage({ baseUrl: stowage.url, account });
  for (const quota of [["--space", "1024GiB"], ["--traffic", "1024GiB"]]) {
    await commandDuration([...stowageCmd, "admin", "grant", "--did", store.did, ...quota, "--data-dir", dataDir], { env, cwd: ROOT })();
  }
  const { accessToken } = await store.login();
  const info = await store.trafficHash(0);
  const domain = storageDomain(info.chainId, info.verifyingContract as `0x${string}`);
  const floorDatabase = pg && withFloor ? { databaseUrl: await pg.createDatabase(), pool } : {};
  const floor = withFloor ? await startServer([process.execPath, join(import.meta.dir, "servers", "upload-floor.ts"), JSON.stringify({ chainId: info.chainId, verifyingContract: info.verifyingContract, seller: info.seller, ...floorDatabase })], { env: childEnv, cwd: ROOT }) : undefined;
  if (floor) servers.push(floor);
  const load = await fetch(`${stowage.url}/healthz`);
  await load.text();
  /** Voucher sizes far above what is used, each distinct: every one is accepted once (D6). */
  let voucherSize = 2n ** 40n + BigInt(Date.now() % 1_000_000) * 1_000_000n;

  const header = `small uploads: ${fileBytes / 1024} KiB × ${inFlight} in flight, ${perRound} per measurement, ${rounds} rounds + ${WARMUP} warm-up, ${replace ? "every upload replacing one file" : "a new file each"}; stowage ${stowage.url} (log level error, embedded chain, ${pg ? "PostgreSQL" : "SQLite"}) against the plain multipart + SHA-256 + fsync'd file server ${baseline.url}${floor ? `, and the floor ${floor.url} against it` : ""}; files in ${temp}${values.tmpfs ? " (memory)" : ""}; 2 cores, Bun ${Bun.version}, load average ${loadAverage()}`;
  console.error(header);
  const lines: string[] = [header];
  /** The requests the SDK would send, one per fresh file, signed before the clock starts. */
  const signedRequests = async (url: string, headers: Record<string, string>) => {
    const requests: Prepared[] = [];
    for (let i = 0; i < perRound; i++) {
      const file = randomBytes(fileBytes);
      const payload = sha256Payload ? new Bun.CryptoHasher("sha256").update(file).digest("hex") : await cidOfStream(new Blob([file]).stream());
      const signed = await store.signRequest("upload", payload);
      const size = (voucherSize += 1_000_000n);
      // The voucher names the file's Cid (the payload, or a cid field beside a SHA-256 payload).
      const cid = sha256Payload ? await cidOfStream(new Blob([file]).stream()) : payload;
      const sign = await account.signTypedData({ domain, types: storageTypes, primaryType: "Voucher", message: { seller: info.seller as `0x${string}`, size, cid, expires: 0n } });
      const { body, type } = multipart({ ...signed, size: String(size), sign, ...(sha256Payload ? { cid } : {}) }, file, replace ? "small.bin" : `small-${++named}.bin`);
      requests.push({ url, headers: { ...headers, "content-type": type }, body });
    }
    return requests;
  };
  const baselineRound = async () => {
    const requests: Prepared[] = [];
    for (let i = 0; i < perRound; i++) {
      const { body, type } = multipart({ did: store.did, token: `0x${"ab".repeat(32)}`, requestID: String(i + 1), payload: "cd".repeat(32), signature: `0x${"ef".repeat(65)}`, size: "1099511627776", sign: `0x${"ef".repeat(65)}` }, randomBytes(fileBytes));
      requests.push({ url: `${baseline.url}/upload`, headers: { "content-type": type }, body });
    }
    return run(baseline.proc.pid, requests);
  };
  const metrics = {
    rate: { unit: "uploads/s", higherIsBetter: true, label: "uploads per second" },
    p50: { unit: "ms", higherIsBetter: false, label: "latency p50" },
    p99: { unit: "ms", higherIsBetter: false, label: "latency p99" },
    cpu: { unit: "ms/upload", higherIsBetter: false, label: "server CPU per upload" },
  } as const;
  type Compared = ComparisonResult<keyof typeof metrics>["metrics"];
  /** A comparison's uploads/s and server CPU, subject against baseline, for the summary. */
  const summary = (m: Compared) =>
    `${fmt(m.rate.subject.median)} vs ${fmt(m.rate.baseline.median)} uploads/s (${m.rate.ratio.toFixed(2)}×, paired ${m.rate.paired.min.toFixed(2)}–${m.rate.paired.max.toFixed(2)}), server CPU ${fmt(m.cpu.subject.median)} vs ${fmt(m.cpu.baseline.median)} ms per upload (${m.cpu.ratio.toFixed(2)}×)`;
  /** Each back-end's round, for its comparison with the floor. */
  const measured: { kind: string; round: () => Promise<Record<keyof typeof metrics, number>> }[] = [];
  for (const kind of backends) {
    const stowageRound = async () => {
      const result = await run(stowage.proc.pid, await signedRequests(`${stowage.url}/${kind}/`, { authorization: `Bearer ${accessToken}` }));
      await analyzeOnce();
      return result;
    };
    const result = await compareMany({ name: `${kind} ${fileBytes / 1024} KiB × ${inFlight}`, rounds, warmup: WARMUP, labels: { subject: `stowage-${kind}`, baseline: "baseline" }, metrics, subject: stowageRound, baseline: baselineRound });
    const m = result.metrics;
    lines.push(`  ${kind}: ${summary(m)}, p50 ${fmt(m.p50.subject.median)} vs ${fmt(m.p50.baseline.median)} ms${databaseCpuText({ pid: stowage.proc.pid })}`);
    measured.push({ kind, round: stowageRound });
  }
  if (floor) {
    const floorRound = async () => run(floor.proc.pid, await signedRequests(`${floor.url}/upload`, {}));
    const f = (await compareMany({ name: `floor ${fileBytes / 1024} KiB × ${inFlight}`, rounds, warmup: WARMUP, labels: { subject: "floor", baseline: "baseline" }, metrics, subject: floorRound, baseline: baselineRound })).metrics;
    lines.push(`  floor (the baseline + D5/D6's two recoveries and one durable claim-and-record transaction, servers/upload-floor.ts${pg ? ", on PostgreSQL" : ""}): ${summary(f)}${databaseCpuText({ pid: floor.proc.pid })}`);
    for (const { kind, round } of measured) {
      const k = (await compareMany({ name: `${kind} against the floor`, rounds, warmup: WARMUP, labels: { subject: `stowage-${kind}`, baseline: "floor" }, metrics, subject: round, baseline: floorRound })).metrics;
      lines.push(`  ${kind} / floor, in alternation: ${summary(k)}${databaseCpuText({ pid: stowage.proc.pid, name: "stowage" }, { pid: floor.proc.pid, name: "floor" })}`);
    }
  }
  console.log(`\nsummary (stowage vs baseline, medians; ratio = stowage / baseline)\n${lines.slice(1).join("\n")}\nload average at the end: ${loadAverage()}`);
} catch (err) {
  console.error(err);
  exitCode = 1;
} finally {
  for (const s of servers.reverse()) await s.stop();
  await pg?.stop();
  rmSync(work, { recursive: true, force: true });
}
process.exit(exitCode);
