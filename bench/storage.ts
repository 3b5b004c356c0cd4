/**
 * File transfers: Stowage against a plain-file baseline, in alternation. For each back-end (`dfs`,
 * `ipfs`): upload and full download throughput (MiB/s) of a file of fresh random bytes, the time of
 * ranged downloads, and the server's peak RSS while the bytes moved; then the same with a 1 GiB
 * file, whose peak RSS shows that memory does not grow with the file.
 *
 * - Stowage: the real server (`bun src/main.ts serve`, or the compiled `dist/stowage` with
 *   `--binary`) in a child process over a temporary data dir, embedded chain included. The
 *   client is the SDK (`connectStorage`): login, a signed upload with a fresh voucher, downloads
 *   with vouchers. Only the HTTP exchange is timed (from the fetch of the upload or download to
 *   its last byte): hashing the file, asking for /traffichash and signing happen before it.
 * - Baseline: a minimal Bun.serve in a child process (this file with `--baseline-server`): the
 *   same multipart body parsed as it streams (busboy, as Stowage does), the file part hashed with
 *   SHA-256 and written to one plain file, fsync'd before the answer; downloads through Bun.file
 *   (sendfile), Range included.
 *
 * With `--s3` (DESIGN.md D15) Stowage keeps its content on a one-node Ceph RGW (started by
 * test/support/ceph.ts, as the tests do), and the baseline is Bun's own `S3Client` putting and
 * getting the same bytes straight to the same RGW: a child process (this file with
 * `--baseline-s3`) that times `write(key, Bun.file(path))` and reads `file(key)` (or a slice of
 * it) to the end, with Bun's default part size and queue. The ratio then says what Stowage's
 * gateway costs on top of the object store itself.
 *
 * Before each timed upload the bench writes and deletes a scratch file of about the upload's size
 * (local blob store only), for both sides alike: see `warmPageCache`.
 *
 * CPU: utime + stime (/proc/PID/stat) of the server process during the upload and the full
 * download, per MiB moved; with `--s3` also that of the Ceph daemons (radosgw, OSD, mon), which
 * shows what each side's pattern of requests costs the store (0 without `--s3`); and the bench's
 * own, which is Stowage's client (the SDK sending and reading over HTTP; on uploads this includes
 * the SDK hashing the file before the timed request), while the S3 baseline reads and writes
 * inside its child (there the bench only asks, so it is near 0). With `--s3`, also the requests
 * the RGW answered per MiB moved (its log's `beast:` lines): Stowage's one object per 1 MiB chunk
 * or block against the baseline's 5 MiB parts.
 *
 * Peak RSS: /proc/PID/status VmHWM of the server process (not its anvil), reset through
 * /proc/PID/clear_refs before each upload and before the downloads (Linux; run as the owner).
 * Idle RSS: VmRSS of both servers once started, before any transfer (printed under the header).
 *
 * Run: bun bench/storage.ts [--rounds 3] [--size-mib 256] [--big-mib 1024] [--big-rounds 1]
 *        [--ranges 32] [--range-kib 1024] [--backends dfs,ipfs] [--no-big] [--binary] [--s3]
 *        [--cpu-prof DIR]   (--help: every option)
 */
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";

if (process.argv[2] === "--baseline-server") {
  await baselineServer();
} else if (process.argv[2] === "--baseline-s3") {
  await baselineS3(process.argv[3] as string);
} else {
  await main();
}

// ───────────────────────────── the baseline server ─────────────────────────────

/**
 * POST /upload (multipart: fields, then one file part) → `{ id, size, sha256 }` once the file is
 * fsync'd; GET /files/:id (Range) through Bun.file; DELETE /files/:id. Files live in a temporary
 * folder removed on exit. Stops on SIGTERM/SIGINT and on EOF of stdin (servers/lifetime.ts).
 * Imports nothing the main mode needs, so its RSS is the server's own.
 */
async function baselineServer() {
  const { receiveFile } = await import("./servers/receive.ts");
  const { runUntilStopped } = await import("./servers/lifetime.ts");
  const { unlink } = await import("node:fs/promises");
  const dir = mkdtempSync(join(tmpdir(), "stowage-bench-files-"));
  let next = 0;

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    maxRequestBodySize: 64 * 2 ** 30,
    async fetch(request) {
      const url = new URL(request.url);
      if (request.method === "POST" && url.pathname === "/upload") {
        const id = String(++next);
        try {
          const { size, sha256 } = await receiveFile(request, join(dir, id));
          return Response.json({ id, size, sha256: Buffer.from(sha256).toString("hex") });
        } catch (err) {
          await unlink(join(dir, id)).catch(() => {});
          return Response.json({ error: String(err) }, { status: 400 });
        }
      }
      const m = /^\/files\/(\d+)$/.exec(url.pathname);
      if (!m) return new Response("not found", { status: 404 });
      const path = join(dir, m[1] as string);
      if (request.method === "DELETE") {
        await unlink(path).catch(() => {});
        return new Response(null, { status: 204 });
      }
      const file = Bun.file(path);
      if (!(await file.exists())) return new Response("not found", { status: 404 });
      const r = /^bytes=(\d+)-(\d+)$/.exec(request.headers.get("range") ?? "");
      if (!r) return new Response(file);
      const [start, end] = [Number(r[1]), Math.min(Number(r[2]), file.size - 1)];
      if (start > end) return new Response(null, { status: 416, headers: { "content-range": `bytes */${file.size}` } });
      return new Response(file.slice(start, end + 1), { status: 206, headers: { "content-range": `bytes ${start}-${end}/${file.size}` } });
    },
  });
  console.log(`listening on http://127.0.0.1:${server.port}`);
  await runUntilStopped(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });
}

// ───────────────────────────── the S3 baseline ─────────────────────────────

/** What the S3 baseline child is told on its command line (JSON). */
interface S3Target {
  endpoint: string;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  prefix: string;
}

/**
 * Bun's S3Client alone, timed inside this process so no HTTP hop of the bench adds to it:
 * POST /put?path=&key= → `{ ms }` once `write` resolved; GET /get?key=[&from=&to=][&sha=1] →
 * `{ ms, bytes, sha256? }` after reading the object (or the inclusive range) to its end;
 * DELETE /del?key=. Keys get the target's prefix. Stops like the baseline server.
 */
async function baselineS3(targetJson: string) {
  const { S3Client } = await import("bun");
  const { runUntilStopped } = await import("./servers/lifetime.ts");
  const t = JSON.parse(targetJson) as S3Target;
  const client = new S3Client({ endpoint: t.endpoint, region: t.region, bucket: t.bucket, accessKeyId: t.accessKeyId, secretAccessKey: t.secretAccessKey });
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    // A 1 GiB put is one request that stays silent until the object is stored.
    idleTimeout: 0,
    async fetch(request) {
      const url = new URL(request.url);
      const key = t.prefix + (url.searchParams.get("key") ?? "");
      try {
        if (request.method === "POST" && url.pathname === "/put") {
          const file = Bun.file(url.searchParams.get("path") ?? "");
          const started = performance.now();
          await client.write(key, file);
          return Response.json({ ms: performance.now() - started });
        }
        if (request.method === "GET" && url.pathname === "/get") {
          const from = url.searchParams.get("from");
          const to = url.searchParams.get("to");
          const hasher = url.searchParams.get("sha") ? new Bun.CryptoHasher("sha256") : undefined;
          const started = performance.now();
          const file = from !== null && to !== null ? client.file(key).slice(Number(from), Number(to) + 1) : client.file(key);
          let bytes = 0;
          for await (const chunk of file.stream()) {
            bytes += chunk.byteLength;
            hasher?.update(chunk);
          }
          return Response.json({ ms: performance.now() - started, bytes, sha256: hasher?.digest("hex") });
        }
        if (request.method === "DELETE" && url.pathname === "/del") {
          await client.delete(key);
          return new Response(null, { status: 204 });
        }
        return new Response("not found", { status: 404 });
      } catch (err) {
        return Response.json({ error: String(err) }, { status: 500 });
      }
    },
  });
  console.log(`listening on http://127.0.0.1:${server.port}`);
  await runUntilStopped(() => server.stop(true));
}

// ───────────────────────────── the benchmark ─────────────────────────────

async function main() {
  // Loaded here, not at the top: the baseline server child must not carry viem and the SDK.
  const { BINARY_OPTION, benchArgs, cephCpuMs: cephCpuMsSoFar, compareMany, commandDuration, CPU_PROF_OPTION, cpuMs, fmt, intOption, loadAverage, startServer, stowageCommand, usageError } = await import("./harness.ts");
  type RunningServer = Awaited<ReturnType<typeof startServer>>;
  const { connectStorage } = await import("../src/sdk/storage.ts");
  const { generatePrivateKey, privateKeyToAccount } = await import("viem/accounts");

  const MiB = 2 ** 20;
  const ROOT = join(import.meta.dir, "..");
  const values = benchArgs("Storage transfers: Stowage against a plain-file baseline, side by side.", {
    rounds: { default: "3", help: "measured rounds" },
    "size-mib": { default: "256", help: "file size in MiB" },
    "big-mib": { default: "1024", help: "file size of the big phase in MiB" },
    "big-rounds": { default: "1", help: "measured rounds of the big phase" },
    ranges: { default: "32", help: "ranged downloads per round" },
    "range-kib": { default: "1024", help: "bytes per ranged download in KiB" },
    backends: { default: "dfs,ipfs", help: "dfs, ipfs or both, comma-separated" },
    "no-big": { boolean: true, help: "leave out the big phase" },
    binary: BINARY_OPTION,
    s3: { boolean: true, help: "content on a one-node Ceph RGW, against Bun's S3Client straight to it" },
    "cpu-prof": CPU_PROF_OPTION,
  });
  const rounds = intOption(values, "rounds");
  const size = intOption(values, "size-mib") * MiB;
  const bigSize = intOption(values, "big-mib") * MiB;
  const bigRounds = intOption(values, "big-rounds");
  const rangeCount = intOption(values, "ranges");
  const rangeBytes = intOption(values, "range-kib") * 1024;
  const backends = values.backends.split(",");
  if (backends.some((b) => b !== "dfs" && b !== "ipfs")) usageError("--backends takes dfs, ipfs or both");
  if (rangeBytes > size) usageError("--range-kib must fit in the file");
  const useBinary = values.binary === true;
  const stowageCmd = stowageCommand({ binary: useBinary, cpuProf: values["cpu-prof"] });

  const work = mkdtempSync(join(tmpdir(), "stowage-bench-storage-"));
  const dataDir = join(work, "data");
  // A clean environment, as an operator's service would have (PATH only for `bun src/main.ts`).
  const env: Record<string, string | undefined> = { HOME: tmpdir(), ...(useBinary ? {} : { PATH: process.env.PATH }) };
  // --s3: a one-node Ceph RGW (stopped when this process exits); Stowage and the S3 baseline each
  // get their own key prefix in its bucket.
  const useS3 = values.s3 === true;
  let s3Target: S3Target | undefined;
  let rgwStartMs = 0;
  if (useS3) {
    const { cephRgw, stowageS3Env } = await import("../test/support/ceph.ts");
    const rgw = await cephRgw();
    rgwStartMs = rgw.startMs;
    Object.assign(env, stowageS3Env(rgw, rgw.prefix()));
    s3Target = { endpoint: rgw.endpoint, region: rgw.region, bucket: rgw.bucket, accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey, prefix: rgw.prefix() };
  }

  // ── /proc ──
  const statusKiB = (pid: number, key: "VmHWM" | "VmRSS") => {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    if (!m) throw new Error(`no ${key} for ${pid}`);
    return Number(m[1]);
  };
  /** Only this run's Ceph cluster (its folder is named after this process by test/support/ceph.ts):
   * other test runs on the machine may have Ceph daemons of their own. */
  const cephMark = `stowage-ceph-${process.pid}-`;
  /** CPU time of the Ceph daemons (with --s3): what the object store spent on the same bytes. */
  const cephCpuMs = () => (useS3 ? cephCpuMsSoFar() : 0);
  /** Requests the RGW has answered so far (with --s3): the `beast:` lines of its log, one per
   * request at Ceph's default log level. Per MiB moved, they show each side's pattern of requests. */
  const rgwLog = () => {
    const dir = readdirSync(tmpdir()).find((d) => d.startsWith(cephMark));
    return dir === undefined ? undefined : join(tmpdir(), dir, "log", "client.rgw.log");
  };
  const rgwRequests = () => {
    const log = useS3 ? rgwLog() : undefined;
    if (log === undefined || !existsSync(log)) return 0;
    return readFileSync(log, "utf8").split("\n").filter((l) => l.includes(" beast: ")).length;
  };
  /** Resets the process's peak RSS to its current RSS (Linux 4.0+). */
  const resetPeak = (pid: number) => writeFileSync(`/proc/${pid}/clear_refs`, "5");
  const peakMiB = (pid: number) => statusKiB(pid, "VmHWM") / 1024;

  // ── files: fresh random bytes for every transfer, so no store sees content it already has ──
  let fileNo = 0;
  function makeFile(bytes: number): { path: string; sha256: string } {
    const path = join(work, `file-${++fileNo}.bin`);
    const hasher = new Bun.CryptoHasher("sha256");
    const fd = openSync(path, "w");
    for (let left = bytes; left > 0; left -= MiB) {
      const piece = randomBytes(Math.min(MiB, left));
      hasher.update(piece);
      writeSync(fd, piece);
    }
    closeSync(fd);
    return { path, sha256: hasher.digest("hex") };
  }
  /**
   * Writes and deletes `bytes` of scratch file, so the timed upload's writes land on page-cache
   * pages the host backs. On this VM (virtio-balloon free page reporting) pages freed more than
   * ≈ 2 s ago are handed back to the host, and a write into them cost 1.1–2.0 ms of CPU per MiB
   * against 0.2–0.27 just after a delete (256 MiB fsync'd, 10 rounds each, 2026-11-23): whichever
   * side landed on such pages lost up to a third of its upload speed, at random.
   */
  function warmPageCache(bytes: number) {
    const path = join(work, "scratch.bin");
    const fd = openSync(path, "w");
    const piece = new Uint8Array(MiB);
    for (let left = bytes; left > 0; left -= MiB) writeSync(fd, piece, 0, Math.min(MiB, left));
    closeSync(fd);
    rmSync(path);
  }
  /** Deterministic offsets per round: both sides read the same ranges. */
  function rangesFor(round: number, fileSize: number): [number, number][] {
    let x = (round + 1) * 2654435761;
    return Array.from({ length: rangeCount }, () => {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      const start = x % (fileSize - rangeBytes + 1);
      return [start, start + rangeBytes - 1];
    });
  }
  /** Reads a body to its end; returns the byte count (and checks the SHA-256 when asked). */
  async function drain(res: Response, sha256?: string): Promise<number> {
    const hasher = sha256 ? new Bun.CryptoHasher("sha256") : undefined;
    let n = 0;
    for await (const chunk of res.body as ReadableStream<Uint8Array>) {
      n += chunk.byteLength;
      hasher?.update(chunk);
    }
    if (hasher && hasher.digest("hex") !== sha256) throw new Error(`download of ${res.url} came back with other bytes`);
    return n;
  }
  const expectBytes = (what: string, got: number, want: number) => {
    if (got !== want) throw new Error(`${what}: ${got} bytes, expected ${want}`);
  };

  /** What one side measures in one round. */
  type Sample = { up: number; down: number; range: number; rangeCall: number; cpuRange: number; asks: number; cpuUp: number; cpuDown: number; cephUp: number; cephDown: number; clientUp: number; clientDown: number; rgwUp: number; rgwDown: number; rssIdle: number; rssUp: number; rssDown: number };
  interface Side {
    pid: number;
    upload(path: string, sha256: string): Promise<{ ms: number; id: string }>;
    /** Times from the request to the last byte; `call`: from the client's call (Stowage: the SDK
     * signs a voucher first, asking for its counter when it is not sure of it). */
    download(id: string, range?: [number, number], sha256?: string): Promise<{ ms: number; bytes: number; call?: number }>;
    remove(id: string): Promise<void>;
    /** GET /traffichash requests the client has sent so far (Stowage's SDK asks for its voucher counter when it is not sure of it). */
    counterAsks?(): number;
  }

  function measure(side: Side, fileSize: number, withRanges: boolean) {
    let call = 0;
    return async (): Promise<Sample> => {
      const round = call++;
      const verify = round === 0; // the first call is the warm-up (or the only round): check the bytes
      const file = makeFile(fileSize);
      try {
        resetPeak(side.pid);
        const rssIdle = statusKiB(side.pid, "VmRSS") / 1024;
        // CPU per MiB moved: the server's (the S3 baseline's child for s3-direct) and the store's.
        const perMiB = (ms: number) => ms / (fileSize / MiB);
        if (!useS3) warmPageCache(fileSize + fileSize / 8); // the chunks or blocks and the file's own room
        let [cpu, ceph, own, rgw] = [cpuMs(side.pid), cephCpuMs(), cpuMs(process.pid), rgwRequests()];
        const up = await side.upload(file.path, file.sha256);
        const [cpuUp, cephUp, clientUp, rgwUp] = [perMiB(cpuMs(side.pid) - cpu), perMiB(cephCpuMs() - ceph), perMiB(cpuMs(process.pid) - own), perMiB(rgwRequests() - rgw)];
        const rssUp = peakMiB(side.pid);
        resetPeak(side.pid);
        [cpu, ceph, own, rgw] = [cpuMs(side.pid), cephCpuMs(), cpuMs(process.pid), rgwRequests()];
        const down = await side.download(up.id, undefined, verify ? file.sha256 : undefined);
        const [cpuDown, cephDown, clientDown, rgwDown] = [perMiB(cpuMs(side.pid) - cpu), perMiB(cephCpuMs() - ceph), perMiB(cpuMs(process.pid) - own), perMiB(rgwRequests() - rgw)];
        expectBytes("download", down.bytes, fileSize);
        let rangeMs = 0;
        let callMs = 0;
        const cpuBeforeRanges = cpuMs(side.pid);
        const asksBefore = side.counterAsks?.() ?? 0;
        if (withRanges) {
          for (const r of rangesFor(round, fileSize)) {
            const part = await side.download(up.id, r);
            expectBytes("ranged download", part.bytes, r[1] - r[0] + 1);
            rangeMs += part.ms;
            callMs += part.call ?? part.ms;
          }
        }
        // Clock ticks of 10 ms: the mean over the GETs of a round is what resolves.
        const cpuRange = withRanges ? (cpuMs(side.pid) - cpuBeforeRanges) / rangeCount : 0;
        const asks = withRanges ? ((side.counterAsks?.() ?? 0) - asksBefore) / rangeCount : 0;
        const rssDown = peakMiB(side.pid);
        await side.remove(up.id);
        return { up: fileSize / MiB / (up.ms / 1000), down: fileSize / MiB / (down.ms / 1000), range: withRanges ? rangeMs / rangeCount : 0, rangeCall: withRanges ? callMs / rangeCount : 0, cpuRange, asks, cpuUp, cpuDown, cephUp, cephDown, clientUp, clientDown, rgwUp, rgwDown, rssIdle, rssUp, rssDown };
      } finally {
        rmSync(file.path, { force: true });
      }
    };
  }

  const servers: RunningServer[] = [];
  let exitCode = 0;
  try {
    // ── Stowage, an account with free quota, the SDK ──
    const stowage = await startServer(
      [...stowageCmd, "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir, "--log-level", "error", "--ipfs-listen", "/ip4/127.0.0.1/tcp/0", "--access-token-ttl", "12h", "--s3-api-port", "0", "--metrics-listen", "127.0.0.1:0"],
      { env, cwd: ROOT, timeoutMs: 60_000 },
    );
    servers.push(stowage);
    const baseline = await startServer(s3Target ? [process.execPath, import.meta.path, "--baseline-s3", JSON.stringify(s3Target)] : [process.execPath, import.meta.path, "--baseline-server"], { cwd: ROOT });
    servers.push(baseline);

    let requestStarted = 0;
    let counterAsks = 0;
    const timedFetch = ((input: string | URL | Request, init?: RequestInit) => {
      requestStarted = performance.now();
      if (String(input instanceof Request ? input.url : input).includes("/traffichash")) counterAsks++;
      return fetch(input, init);
    }) as typeof fetch;
    const account = privateKeyToAccount(generatePrivateKey());
    const store = await connectStorage({ baseUrl: stowage.url, account, fetch: timedFetch });
    for (const quota of [["--space", "1024GiB"], ["--traffic", "1024GiB"]]) {
      await commandDuration([...stowageCmd, "admin", "grant", "--did", store.did, ...quota, "--data-dir", dataDir], { env, cwd: ROOT })();
    }
    await store.login();

    const stowageSide = (kind: "dfs" | "ipfs"): Side => {
      const entries = new Map<string, { ID: number; Size: number }>();
      return {
        pid: stowage.proc.pid,
        async upload(path) {
          // The SDK hashes the file, asks for /traffichash and signs before its fetch: not timed.
          const entry = await store.upload(kind, path);
          const ms = performance.now() - requestStarted;
          entries.set(entry.Cid, entry);
          return { ms, id: entry.Cid };
        },
        async download(cid, range, sha256) {
          const called = performance.now();
          const res = await store.download(kind, cid, range ? { range } : { size: entries.get(cid)?.Size });
          const started = requestStarted;
          const bytes = await drain(res, sha256);
          const end = performance.now();
          return { ms: end - started, call: end - called, bytes };
        },
        async remove(cid) {
          // dfs gives the space back at once; ipfs has no delete (its blocks go at the next start).
          if (kind === "dfs") await store.delete(entries.get(cid)?.ID as number);
          entries.delete(cid);
        },
        counterAsks: () => counterAsks,
      };
    };

    /** The SDK's multipart body (the same fields, then the file), streamed with its length. */
    const multipart = (path: string) => {
      const boundary = `----stowage${randomBytes(12).toString("hex")}`;
      const fields: Record<string, string> = {
        did: `did:ethr:0x3d9:${account.address}`,
        token: `0x${"ab".repeat(32)}`,
        requestID: "1",
        payload: "cd".repeat(32),
        signature: `0x${"ef".repeat(65)}`,
        size: "1099511627776",
        sign: `0x${"ef".repeat(65)}`,
      };
      const enc = new TextEncoder();
      const head = enc.encode(
        Object.entries(fields)
          .map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`)
          .join("") + `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
      );
      const tail = enc.encode(`\r\n--${boundary}--\r\n`);
      const file = Bun.file(path);
      const parts = (async function* () {
        yield head;
        yield* file.stream();
        yield tail;
      })();
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const next = await parts.next();
          if (next.done) controller.close();
          else controller.enqueue(next.value);
        },
      });
      return { body, headers: { "content-type": `multipart/form-data; boundary=${boundary}`, "content-length": String(head.byteLength + file.size + tail.byteLength) } };
    };
    const fileSide: Side = {
      pid: baseline.proc.pid,
      async upload(path, sha256) {
        const { body, headers } = multipart(path);
        const started = performance.now();
        const res = await fetch(`${baseline.url}/upload`, { method: "POST", headers, body });
        const answer = (await res.json()) as { id: string; sha256: string; error?: string };
        const ms = performance.now() - started;
        if (!res.ok || answer.sha256 !== sha256) throw new Error(`baseline upload: ${res.status} ${JSON.stringify(answer)}`);
        return { ms, id: answer.id };
      },
      async download(id, range, sha256) {
        const started = performance.now();
        const res = await fetch(`${baseline.url}/files/${id}`, { headers: range ? { range: `bytes=${range[0]}-${range[1]}` } : {} });
        if (res.status !== (range ? 206 : 200)) throw new Error(`baseline download: ${res.status}`);
        const bytes = await drain(res, sha256);
        return { ms: performance.now() - started, bytes };
      },
      async remove(id) {
        await fetch(`${baseline.url}/files/${id}`, { method: "DELETE" });
      },
    };
    /** The S3 baseline: the child times the S3 call itself; the bench only says what to do. */
    let s3Object = 0;
    const s3Call = async <T>(path: string, init?: RequestInit): Promise<T> => {
      const res = await fetch(`${baseline.url}${path}`, init);
      const answer = (await res.json()) as T & { error?: string };
      if (!res.ok) throw new Error(`S3 baseline ${path}: ${res.status} ${answer.error}`);
      return answer;
    };
    const s3Side: Side = {
      pid: baseline.proc.pid,
      async upload(path) {
        const key = `direct/${++s3Object}`;
        const { ms } = await s3Call<{ ms: number }>(`/put?path=${encodeURIComponent(path)}&key=${key}`, { method: "POST" });
        return { ms, id: key };
      },
      async download(key, range, sha256) {
        const q = `${range ? `&from=${range[0]}&to=${range[1]}` : ""}${sha256 ? "&sha=1" : ""}`;
        const got = await s3Call<{ ms: number; bytes: number; sha256?: string }>(`/get?key=${key}${q}`);
        if (sha256 && got.sha256 !== sha256) throw new Error(`S3 baseline: ${key} came back with other bytes`);
        return { ms: got.ms, bytes: got.bytes };
      },
      async remove(key) {
        await fetch(`${baseline.url}/del?key=${key}`, { method: "DELETE" });
      },
    };
    const baselineSide = s3Target ? s3Side : fileSide;

    const commit = Bun.spawnSync(["git", "rev-parse", "--short", "HEAD"], { cwd: ROOT }).stdout.toString().trim();
    const subjectLabel = useBinary ? "stowage-bin" : "stowage";
    const against = s3Target
      ? `content on a one-node Ceph RGW ${s3Target.endpoint} (started in ${rgwStartMs} ms), against Bun's S3Client putting and getting the same bytes straight to it (child ${baseline.url})`
      : `against a plain-file baseline ${baseline.url}`;
    console.log(
      `storage transfers: ${subjectLabel} ${stowage.url} (log level error, embedded chain) ${against}; ` +
        `${rounds} rounds + 1 warm-up of ${size / MiB} MiB (${rangeCount} ranged GETs of ${rangeBytes / 1024} KiB each), then ${bigRounds} × ${bigSize / MiB} MiB; ` +
        `${navigator.hardwareConcurrency} cores, Bun ${Bun.version}, commit ${commit}, ${new Date().toISOString()}, load average ${loadAverage()}`,
    );
    // idle goal (≤ 128 MiB): after start, the grants and a login, before any transfer.
    const idleMiB = (pid: number) => fmt(statusKiB(pid, "VmRSS") / 1024);
    console.log(`idle RSS before any transfer: ${subjectLabel} ${idleMiB(stowage.proc.pid)} MiB, baseline ${idleMiB(baseline.proc.pid)} MiB`);
    const metrics = {
      up: { unit: "MiB/s", higherIsBetter: true, label: "upload" },
      down: { unit: "MiB/s", higherIsBetter: true, label: "full download" },
      range: { unit: "ms", higherIsBetter: false, label: `ranged GET of ${rangeBytes / 1024} KiB, mean` },
      rangeCall: { unit: "ms", higherIsBetter: false, label: `the same, from the client's call (Stowage: the SDK's voucher included)` },
      cpuRange: { unit: "ms", higherIsBetter: false, label: "server CPU per ranged GET (with any other request of the client around it)" },
      asks: { unit: "per GET", higherIsBetter: null, label: "the client's GET /traffichash per ranged GET" },
      cpuUp: { unit: "ms/MiB", higherIsBetter: false, label: "server CPU, upload" },
      cpuDown: { unit: "ms/MiB", higherIsBetter: false, label: "server CPU, full download" },
      cephUp: { unit: "ms/MiB", higherIsBetter: null, label: "Ceph daemons' CPU, upload" },
      cephDown: { unit: "ms/MiB", higherIsBetter: null, label: "Ceph daemons' CPU, full download" },
      clientUp: { unit: "ms/MiB", higherIsBetter: null, label: "the bench's own CPU (the client), upload" },
      clientDown: { unit: "ms/MiB", higherIsBetter: null, label: "the bench's own CPU (the client), full download" },
      rgwUp: { unit: "per MiB", higherIsBetter: null, label: "RGW requests, upload" },
      rgwDown: { unit: "per MiB", higherIsBetter: null, label: "RGW requests, full download" },
      rssIdle: { unit: "MiB", higherIsBetter: null, label: "server RSS before the upload" },
      rssUp: { unit: "MiB", higherIsBetter: false, label: "server peak RSS, upload" },
      rssDown: { unit: "MiB", higherIsBetter: false, label: "server peak RSS, downloads" },
    } as const;
    const labels = { subject: `${subjectLabel}-KIND`, baseline: s3Target ? "s3-direct" : "baseline" };
    const summary: string[] = [];
    /**
     * CPU spent per MiB by the server, (with --s3) the Ceph daemons and the bench, medians. On a machine with
     * few cores, where the store, the server and the bench share them, throughput follows the CPU
     * all of them spend on a MiB: the inverse ratio of these says roughly where the throughput
     * ratio can go at best.
     */
    type CpuMetrics = Record<"cpuUp" | "cpuDown" | "cephUp" | "cephDown" | "clientUp" | "clientDown", { subject: { median: number }; baseline: { median: number } }>;
    const cpuOf = (m: CpuMetrics, way: "up" | "down", side: "subject" | "baseline") =>
      way === "up" ? m.cpuUp[side].median + m.cephUp[side].median + m.clientUp[side].median : m.cpuDown[side].median + m.cephDown[side].median + m.clientDown[side].median;
    for (const kind of backends as ("dfs" | "ipfs")[]) {
      const r = await compareMany({
        name: `${kind}: ${size / MiB} MiB`,
        rounds,
        labels: { ...labels, subject: labels.subject.replace("KIND", kind) },
        metrics,
        subject: measure(stowageSide(kind), size, true),
        baseline: measure(baselineSide, size, true),
      });
      const m = r.metrics;
      summary.push(
        `${kind} ${size / MiB} MiB: upload ${fmt(m.up.subject.median)} vs ${fmt(m.up.baseline.median)} MiB/s (${m.up.ratio.toFixed(2)}×), ` +
          `full download ${fmt(m.down.subject.median)} vs ${fmt(m.down.baseline.median)} MiB/s (${m.down.ratio.toFixed(2)}×), ` +
          `ranged GET ${fmt(m.range.subject.median)} vs ${fmt(m.range.baseline.median)} ms (${m.range.ratio.toFixed(2)}×; server CPU ${fmt(m.cpuRange.subject.median)} vs ${fmt(m.cpuRange.baseline.median)} ms each, with ${fmt(m.asks.subject.median)} GET /traffichash per GET; from the SDK's call ${fmt(m.rangeCall.subject.median)} ms, ${m.rangeCall.ratio.toFixed(2)}×), ` +
          `peak RSS ${fmt(Math.max(m.rssUp.subject.max, m.rssDown.subject.max))} vs ${fmt(Math.max(m.rssUp.baseline.max, m.rssDown.baseline.max))} MiB; ` +
          `CPU ${useS3 ? "server + Ceph + client" : "server + client"} per MiB: upload ${fmt(cpuOf(m, "up", "subject"))} vs ${fmt(cpuOf(m, "up", "baseline"))} ms (${(cpuOf(m, "up", "baseline") / cpuOf(m, "up", "subject")).toFixed(2)}×), ` +
          `download ${fmt(cpuOf(m, "down", "subject"))} vs ${fmt(cpuOf(m, "down", "baseline"))} ms (${(cpuOf(m, "down", "baseline") / cpuOf(m, "down", "subject")).toFixed(2)}×)` +
          (useS3 ? `; RGW requests per MiB: upload ${fmt(m.rgwUp.subject.median)} vs ${fmt(m.rgwUp.baseline.median)}, download ${fmt(m.rgwDown.subject.median)} vs ${fmt(m.rgwDown.baseline.median)}` : ""),
      );
    }
    if (values["no-big"] !== true) {
      const { range: _, rangeCall: _rc, cpuRange: _c, asks: _a, ...bigMetrics } = metrics;
      const withoutRange = (f: () => Promise<Sample>) => async () => {
        const { range: _r, rangeCall: _rcl, cpuRange: _cr, asks: _as, ...rest } = await f();
        return rest;
      };
      for (const kind of backends as ("dfs" | "ipfs")[]) {
        const r = await compareMany({
          name: `${kind}: ${bigSize / MiB} MiB`,
          rounds: bigRounds,
          warmup: 0,
          labels: { ...labels, subject: labels.subject.replace("KIND", kind) },
          metrics: bigMetrics,
          subject: withoutRange(measure(stowageSide(kind), bigSize, false)),
          baseline: withoutRange(measure(baselineSide, bigSize, false)),
        });
        const m = r.metrics;
        const peak = Math.max(m.rssUp.subject.max, m.rssDown.subject.max);
        summary.push(
          `${kind} ${bigSize / MiB} MiB: upload ${fmt(m.up.subject.median)} vs ${fmt(m.up.baseline.median)} MiB/s (${m.up.ratio.toFixed(2)}×), ` +
            `full download ${fmt(m.down.subject.median)} vs ${fmt(m.down.baseline.median)} MiB/s (${m.down.ratio.toFixed(2)}×); ` +
            `server peak RSS ${fmt(m.rssUp.subject.max)} MiB during the upload, ${fmt(m.rssDown.subject.max)} MiB during the download, from ${fmt(m.rssIdle.subject.median)} MiB before ` +
            `(peak ${((peak / (bigSize / MiB)) * 100).toFixed(1)} % of the file size; baseline ${fmt(m.rssUp.baseline.max)} / ${fmt(m.rssDown.baseline.max)} MiB from ${fmt(m.rssIdle.baseline.median)})`,
        );
      }
    }
    console.log(`\nsummary (stowage vs ${labels.baseline}, medians; ratio = stowage / ${labels.baseline})\n${summary.map((s) => `  ${s}`).join("\n")}`);
    console.log(`load average at the end: ${loadAverage()}`);
  } catch (err) {
    console.error(`storage benchmark failed: ${(err as Error).stack ?? err}`);
    for (const s of servers) console.error(`--- output of ${s.proc.pid}:\n${s.output()}`);
    exitCode = 1;
  } finally {
    const codes = await Promise.all(servers.map((s) => s.stop(10_000)));
    rmSync(work, { recursive: true, force: true });
    if (codes.some((c) => c !== 0)) {
      console.error(`a server exited uncleanly: ${codes.join(", ")}`);
      for (const s of servers) console.error(`--- output of ${s.proc.pid}:\n${s.output()}`);
    }
  }
  process.exit(exitCode);
}
