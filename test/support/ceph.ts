/**
 * A one-node Ceph with an S3 gateway (radosgw) on 127.0.0.1, for the tests that prove the S3 blob
 * store against a real object store rather than a mock (DESIGN.md D15 and its Ceph pitfall).
 *
 * Starting Ceph costs seconds, so the cluster starts once per test process (`bun test` runs every
 * file in one process) and is shared: `cephRgw()` returns the same promise to every caller, and
 * each test takes its own key prefix (`rgw.prefix()`) so tests never see each other's objects. The
 * daemons and a watchdog run outside this process's tree (setsid), as test/support/postgres.ts
 * does: bun test kills the processes a timed-out test started, and the cluster belongs to the
 * whole process, not to the test that happened to start it. The watchdog stops the daemons and
 * removes the folder once this process is gone, however it ended (bun test emits no "exit";
 * SIGKILL runs nothing), so no daemons outlive a test run. The Debian packages are installed when missing
 * (`scripts/ceph.sh install`), so a fresh machine needs nothing beforehand.
 */
import { S3Client } from "bun";
import { createHash, createHmac, randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { alive, freePort, rssOf, run } from "./procs.ts";

export interface Rgw {
  /** http://127.0.0.1:PORT */
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** A bucket made at start, shared by every test (keep to your `prefix()`). */
  bucket: string;
  /** A key prefix no other caller gets: `t<N>-<random>/`. */
  prefix(): string;
  /** Creates a bucket (Bun's S3Client has none: one PUT signed by hand). Idempotent. */
  createBucket(name: string): Promise<void>;
  /** An S3Client on `bucket` (or another) with the test user's keys. */
  client(bucket?: string): S3Client;
  /** How long the start took, packages already installed, in ms. */
  startMs: number;
  /** Resident memory of mon + osd + radosgw now, in bytes. */
  rss(): number;
  /** Stops radosgw, then the OSD, then the mon (the OSD first makes radosgw hang ≈ 3 s). */
  stop(): Promise<void>;
}

const ROOT = join(import.meta.dir, "..", "..");
const START_TIMEOUT_MS = 90_000;
const STOP_TIMEOUT_MS = 10_000;
/** Sparse: only the bytes written take disk space. Big enough for the benchmarks' files. */
const OSD_BYTES = 16 * 2 ** 30;

let started: Promise<Rgw> | undefined;

/** The shared cluster, started on first call. */
export function cephRgw(): Promise<Rgw> {
  started ??= startRgw();
  return started;
}

/** Installs the packages if missing; the script holds a lock so parallel callers wait. */
async function ensureInstalled(): Promise<void> {
  if (["ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph"].every((b) => Bun.which(b))) return;
  const proc = Bun.spawn(["sh", join(ROOT, "scripts", "ceph.sh"), "install"], { stdout: "inherit", stderr: "inherit" });
  if ((await proc.exited) !== 0) throw new Error("installing Ceph failed (scripts/ceph.sh install): see the output above");
}

function conf(dir: string, fsid: string, monPort: number, rgwPort: number): string {
  // auth none everywhere: a throwaway cluster on loopback. ms_mon_client_mode crc: radosgw
  // otherwise loops on auth error -13. paxos_propose_interval: radosgw's first start 9 s → 1 s.
  return `[global]
fsid = ${fsid}
mon_host = v2:127.0.0.1:${monPort}
public_addr = 127.0.0.1
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
ms_mon_client_mode = crc
paxos_propose_interval = 0.05
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
# A test server's own data is tiny: a nearly full host disk must not stop its monitor.
mon_data_avail_warn = 1
mon_data_avail_crit = 1
objecter_tick_interval = 0.2
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
keyring = /dev/null
run_dir = ${dir}/run
log_file = ${dir}/log/$name.log
log_to_stderr = false
err_to_stderr = true
admin_socket =
[mon.a]
mon_data = ${dir}/mon
[osd.0]
osd_data = ${dir}/osd
osd_objectstore = bluestore
bluestore_block_create = true
bluestore_block_size = ${OSD_BYTES}
bluestore_fsck_on_mkfs = false
bluestore_cache_autotune = false
bluestore_cache_size = 134217728
osd_op_num_shards = 1
bdev_aio_poll_ms = 20
[client.rgw]
rgw_frontends = beast endpoint=127.0.0.1:${rgwPort}
rgw_data = ${dir}/rgw
`;
}

async function startRgw(): Promise<Rgw> {
  await ensureInstalled();
  const t0 = performance.now();
  // Under /tmp, not the repo: a unix socket path must stay short, and tests' temp folders are
  // removed by tmp.ts in an order this file does not control.
  const dir = join(tmpdir(), `stowage-ceph-${process.pid}-${randomUUID().slice(0, 8)}`);
  for (const sub of ["mon", "osd", "run", "log", "rgw"]) mkdirSync(join(dir, sub), { recursive: true });
  const fsid = randomUUID();
  const osdUuid = randomUUID();
  const monPort = freePort();
  const rgwPort = freePort();
  const cfg = join(dir, "ceph.conf");
  writeFileSync(cfg, conf(dir, fsid, monPort, rgwPort));
  const c = ["-c", cfg];
  const daemons: number[] = [];
  // Detached (setsid, see the header): `$!` is the daemon's own pid, setsid execs it in place.
  const daemon = async (name: string, cmd: string[]): Promise<number> => {
    const log = join(dir, "log", name);
    const pid = Number((await run(["sh", "-c", 'setsid "$@" </dev/null >"$0.out" 2>"$0.err" & echo $!', log, ...cmd], `starting ${name}`)).trim());
    daemons.push(pid);
    writePid(dir, name, pid);
    return pid;
  };
  const signal = (pid: number, sig: NodeJS.Signals) => {
    try {
      process.kill(pid, sig);
    } catch {} // already gone
  };
  const killAll = () => {
    for (const pid of daemons) signal(pid, "SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  // Only outside `bun test` (the benchmarks): bun test exits without emitting "exit".
  process.on("exit", killAll);
  // Under bun test, and when this process is SIGKILLed: tail returns when the pid is gone.
  const watch = `tail --pid=${process.pid} -f /dev/null; pkill -KILL -F ${dir}/run/rgw.pid; pkill -KILL -F ${dir}/run/osd.pid; pkill -KILL -F ${dir}/run/mon.pid; rm -rf ${dir}`;
  const watchdogPid = Number((await run(["sh", "-c", 'setsid sh -c "$1" </dev/null >/dev/null 2>&1 & echo $!', "sh", watch], "watchdog")).trim());

  const deadline = AbortSignal.timeout(START_TIMEOUT_MS);
  const failed = (why: string) => {
    let logs = "";
    for (const n of ["mon.err", "osd.err", "rgw.err"]) {
      try {
        logs += `\n--- ${n}\n${readFileSync(join(dir, "log", n), "utf8").slice(-2000)}`;
      } catch {}
    }
    killAll(); // after the logs are read: it removes their folder
    return new Error(`Ceph did not start: ${why}${logs}`);
  };
  try {
    await run(["monmaptool", "--create", "--add", "a", `v2:127.0.0.1:${monPort}`, "--fsid", fsid, join(dir, "monmap")], "monmaptool");
    // The OSD's mkfs needs no monitor (--no-mon-config): it runs while the monitor starts.
    const osdMkfs = run(["ceph-osd", ...c, "-i", "0", "--mkfs", "--osd-uuid", osdUuid, "--no-mon-config"], "ceph-osd --mkfs");
    await run(["ceph-mon", ...c, "-i", "a", "--mkfs", "--monmap", join(dir, "monmap")], "ceph-mon --mkfs");
    const mon = await daemon("mon", ["ceph-mon", ...c, "-i", "a", "-f"]);
    await run(["ceph", ...c, "--connect-timeout", "30", "osd", "new", osdUuid, "0"], "ceph osd new");
    await osdMkfs;
    const osd = await daemon("osd", ["ceph-osd", ...c, "-i", "0", "-f"]);
    // radosgw waits for the OSD by itself. The user is made once it answers: radosgw-admin run
    // meanwhile races radosgw to create the same pools and both slow down.
    const rgw = await daemon("rgw", ["radosgw", ...c, "-n", "client.rgw", "-f"]);
    const endpoint = `http://127.0.0.1:${rgwPort}`;
    await untilAnswers(endpoint, deadline, () => {
      for (const pid of daemons) if (!alive(pid)) throw failed(`a daemon exited (pid ${pid})`);
    });
    const accessKeyId = `AK${randomUUID().replaceAll("-", "").slice(0, 18).toUpperCase()}`;
    const secretAccessKey = randomUUID().replaceAll("-", "") + randomUUID().replaceAll("-", "").slice(0, 8);
    await run(["radosgw-admin", ...c, "user", "create", "--uid=stowage-test", "--display-name=stowage test", `--access-key=${accessKeyId}`, `--secret-key=${secretAccessKey}`], "radosgw-admin user create");
    const region = "us-east-1";
    const client = (bucket = "stowage-test") => new S3Client({ endpoint, region, accessKeyId, secretAccessKey, bucket });
    const createBucket = async (name: string) => {
      const res = await fetch(`${endpoint}/${name}`, { method: "PUT", headers: signV4({ method: "PUT", host: `127.0.0.1:${rgwPort}`, path: `/${name}`, region, accessKeyId, secretAccessKey }) });
      // 409 BucketAlreadyOwnedByYou: RGW's answer to a second create by the same user.
      if (!res.ok && res.status !== 409) throw new Error(`creating bucket ${name}: ${res.status} ${await res.text()}`);
    };
    await createBucket("stowage-test");
    const startMs = Math.round(performance.now() - t0);
    let n = 0;
    return {
      endpoint,
      region,
      accessKeyId,
      secretAccessKey,
      bucket: "stowage-test",
      prefix: () => `t${++n}-${randomUUID().slice(0, 8)}/`,
      createBucket,
      client,
      startMs,
      rss: () => daemons.reduce((sum, pid) => sum + rssOf(pid), 0),
      stop: async () => {
        for (const pid of [rgw, osd, mon]) {
          signal(pid, "SIGTERM");
          const until = performance.now() + STOP_TIMEOUT_MS;
          while (alive(pid) && performance.now() < until) await Bun.sleep(20);
          if (alive(pid)) signal(pid, "SIGKILL");
        }
        process.off("exit", killAll);
        signal(watchdogPid, "SIGKILL");
        rmSync(dir, { recursive: true, force: true });
        started = undefined;
      },
    };
  } catch (e) {
    throw e instanceof Error && e.message.startsWith("Ceph did not start") ? e : failed((e as Error).message);
  }
}

/** The STOWAGE_S3_* settings of a server keeping its content under `prefix` in the shared bucket,
 * as an operator would set them: one spelling for the tests (blobs.ts) and the benchmark. */
export function stowageS3Env(rgw: Rgw, prefix: string): Record<string, string> {
  return {
    STOWAGE_S3_ENDPOINT: rgw.endpoint,
    STOWAGE_S3_BUCKET: rgw.bucket,
    STOWAGE_S3_REGION: rgw.region,
    STOWAGE_S3_PREFIX: prefix,
    STOWAGE_S3_ACCESS_KEY_ID: rgw.accessKeyId,
    STOWAGE_S3_SECRET_ACCESS_KEY: rgw.secretAccessKey,
  };
}

const EMPTY_SHA256 = createHash("sha256").update("").digest("hex");

/** AWS Signature V4 headers for one bodiless request: all the create-bucket PUT needs (Bun's
 * S3Client cannot presign a URL without an object key). */
function signV4(r: { method: string; host: string; path: string; region: string; accessKeyId: string; secretAccessKey: string }): Record<string, string> {
  const amzDate = new Date().toISOString().replace(/[-:]/g, "").replace(/\.\d{3}/, "");
  const day = amzDate.slice(0, 8);
  const scope = `${day}/${r.region}/s3/aws4_request`;
  const signed = "host;x-amz-content-sha256;x-amz-date";
  const canonical = [r.method, r.path, "", `host:${r.host}`, `x-amz-content-sha256:${EMPTY_SHA256}`, `x-amz-date:${amzDate}`, "", signed, EMPTY_SHA256].join("\n");
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, createHash("sha256").update(canonical).digest("hex")].join("\n");
  const hmac = (key: string | Buffer, data: string) => createHmac("sha256", key).update(data).digest();
  const key = hmac(hmac(hmac(hmac(`AWS4${r.secretAccessKey}`, day), r.region), "s3"), "aws4_request");
  const signature = createHmac("sha256", key).update(toSign).digest("hex");
  return {
    "x-amz-date": amzDate,
    "x-amz-content-sha256": EMPTY_SHA256,
    authorization: `AWS4-HMAC-SHA256 Credential=${r.accessKeyId}/${scope}, SignedHeaders=${signed}, Signature=${signature}`,
  };
}

/** The watchdog reads these: daemons in the foreground (-f) write no pid file of their own. */
function writePid(dir: string, name: string, pid: number): void {
  writeFileSync(join(dir, "run", `${name}.pid`), String(pid));
}

/** Waits until radosgw answers HTTP (any status): it listens only once its pools are usable. */
async function untilAnswers(endpoint: string, deadline: AbortSignal, check: () => void): Promise<void> {
  for (;;) {
    check();
    if (deadline.aborted) throw new Error(`radosgw did not answer on ${endpoint} within ${START_TIMEOUT_MS} ms`);
    try {
      await fetch(endpoint, { signal: AbortSignal.timeout(1000) });
      return;
    } catch {
      await Bun.sleep(50); // not listening yet
    }
  }
}
