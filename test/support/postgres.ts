/**
 * A real PostgreSQL (Debian's 15) on 127.0.0.1, for the tests that prove the PostgreSQL side of
 * D16 against the server itself rather than a mock (DESIGN.md D16 and its PostgreSQL pitfall).
 *
 * Starting it costs seconds (initdb most of them), so the server starts once per test process (`bun test` runs
 * every file in one process) and is shared, as test/support/ceph.ts does for Ceph: `postgres()`
 * returns the same promise to every caller, and each test takes its own database
 * (`createDatabase()`), so tests never see each other's rows. PostgreSQL refuses to run as root:
 * as root, `initdb` and `postgres` run as the `postgres` OS user (`runuser`) on a temp folder it
 * owns. A watchdog stops it and removes the folder when the test process is gone, however it
 * ended (bun test emits no "exit"; SIGKILL runs nothing), so no server outlives a test run. The
 * Debian package is installed when missing (`scripts/postgres.sh install`), so a fresh machine
 * needs nothing beforehand.
 *
 * Databases belong to a role without superuser rights, as a production gateway's would: the
 * migrations must work with what a database owner may do (`unaccent` is a trusted extension).
 * Their default collation is linguistic (ICU en-US), as production databases' usually are, so
 * code that needs byte order and does not ask for `COLLATE "C"` fails here too.
 */
import { SQL, spawnSync } from "bun";
import { randomUUID } from "node:crypto";
import { chownSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { descendants, freePort, rssOf, run } from "./procs.ts";

export interface Postgres {
  /** postgres://stowage@127.0.0.1:PORT/ (no database). */
  baseUrl: string;
  /** A new empty database owned by the test role, as a postgres:// URL no other caller gets. */
  createDatabase(): Promise<string>;
  /**
   * ANALYZE of a database `createDatabase` made, as autovacuum does within a minute of a new
   * database's first writes (benches: a measurement of minutes must not be of a database the
   * planner has no statistics of; see bench/small-uploads.ts).
   */
  analyze(url: string): Promise<void>;
  /** How long the start took (initdb included, package already installed), in ms. */
  startMs: number;
  /** Resident memory of the postmaster and its children now, in bytes (shared buffers are
   * counted once per process that touched them, so this overstates). */
  rss(): number;
  /** The postmaster and its children now (backends, writers): for their CPU time in benches. */
  pids(): number[];
  /** Fast shutdown, folder removed. */
  stop(): Promise<void>;
}

const ROOT = join(import.meta.dir, "..", "..");
const BIN = "/usr/lib/postgresql/15/bin";
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;
/** The role every test database belongs to. */
const ROLE = "stowage";

let started: Promise<Postgres> | undefined;

/** The shared server, started on first call. */
export function postgres(): Promise<Postgres> {
  started ??= startPostgres();
  return started;
}

/** Installs the package if missing; the script holds a lock so parallel callers wait. */
async function ensureInstalled(): Promise<void> {
  if (["initdb", "postgres"].every((b) => existsSync(join(BIN, b)))) return;
  const proc = Bun.spawn(["sh", join(ROOT, "scripts", "postgres.sh"), "install"], { stdout: "inherit", stderr: "inherit" });
  if ((await proc.exited) !== 0) throw new Error("installing PostgreSQL failed (scripts/postgres.sh install): see the output above");
}

/** As root, the command runs as the `postgres` OS user; as anyone else, as that user. */
function asOwner(cmd: string[]): string[] {
  return process.getuid?.() === 0 ? ["runuser", "-u", "postgres", "--", ...cmd] : cmd;
}

function ownerIds(): { uid: number; gid: number } {
  const id = (flag: string) => Number(spawnSync(["id", flag, "postgres"]).stdout.toString().trim());
  return { uid: id("-u"), gid: id("-g") };
}

/** The postmaster's pid from its own pid file (under runuser, the process Bun spawned is
 * runuser's, not the server's), or 0 before it is written. */
function postmasterPid(data: string): number {
  try {
    return Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]) || 0;
  } catch {
    return 0;
  }
}

async function startPostgres(): Promise<Postgres> {
  await ensureInstalled();
  const t0 = performance.now();
  // Under /tmp, not the repo: the `postgres` user must be able to reach it, and tests' temp
  // folders are removed by tmp.ts in an order this file does not control.
  const dir = join("/tmp", `stowage-pg-${process.pid}-${randomUUID().slice(0, 8)}`);
  const data = join(dir, "data");
  const log = join(dir, "postgres.log");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (process.getuid?.() === 0) {
    const { uid, gid } = ownerIds();
    chownSync(dir, uid, gid);
  }
  const port = freePort();
  // SIGQUIT is PostgreSQL's immediate shutdown: the postmaster takes its children down with it,
  // then removes its pid file. Synchronous (it also runs from an exit handler); the folder is
  // removed only once the server is done with it, or removing it fails halfway.
  const killAll = () => {
    const pid = postmasterPid(data);
    if (pid) spawnSync(["sh", "-c", `kill -QUIT ${pid} 2>/dev/null && while [ -f ${data}/postmaster.pid ]; do sleep 0.02; done`], { timeout: STOP_TIMEOUT_MS });
    rmSync(dir, { recursive: true, force: true });
  };
  // Only outside `bun test`: bun test 1.4.5 exits without emitting "exit".
  process.on("exit", killAll);
  // The watchdog does the cleanup under bun test, and when this process is SIGKILLed: tail
  // returns when the pid is gone. It and the server (pg_ctl daemonises it) are not children of
  // this process: bun test kills the processes a timed-out test started, and the server is
  // shared by the whole process, not owned by the test that happened to start it.
  const watch = `tail --pid=${process.pid} -f /dev/null; p=$(head -n1 ${data}/postmaster.pid 2>/dev/null) && kill -QUIT "$p" && while [ -f ${data}/postmaster.pid ]; do sleep 0.05; done; rm -rf ${dir}`;
  const watchdogPid = Number((await run(["sh", "-c", 'setsid sh -c "$1" </dev/null >/dev/null 2>&1 & echo $!', "sh", watch], "watchdog")).trim());

  const failed = (why: string) => {
    let tail = "";
    try {
      tail = `\n--- postgres.log\n${readFileSync(log, "utf8").slice(-2000)}`;
    } catch {}
    killAll();
    return new Error(`PostgreSQL did not start: ${why}${tail}`);
  };
  try {
    // --no-sync and fsync=off: a throwaway server; durability across a power cut is not under test.
    await run(asOwner([join(BIN, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"]), "initdb");
    const options = [
      `-p ${port}`,
      "-c listen_addresses=127.0.0.1",
      `-c unix_socket_directories=${dir}`,
      "-c fsync=off",
      "-c synchronous_commit=off",
      "-c full_page_writes=off",
      "-c max_connections=200",
    ].join(" ");
    // -w: returns once the server accepts connections.
    await run(asOwner([join(BIN, "pg_ctl"), "start", "-w", "-t", String(START_TIMEOUT_MS / 1000), "-D", data, "-l", log, "-o", options]), "pg_ctl start");
    const admin = new SQL(`postgres://postgres@127.0.0.1:${port}/postgres`, { max: 1 });
    await admin.unsafe(`CREATE ROLE ${ROLE} LOGIN`);
    const startMs = Math.round(performance.now() - t0);
    const pids = () => {
      const pid = postmasterPid(data);
      return pid ? [pid, ...descendants(pid)] : [];
    };
    const baseUrl = `postgres://${ROLE}@127.0.0.1:${port}/`;
    let n = 0;
    return {
      baseUrl,
      startMs,
      createDatabase: async () => {
        const name = `t${++n}_${randomUUID().slice(0, 8)}`;
        await admin.unsafe(`CREATE DATABASE ${name} OWNER ${ROLE} TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'`);
        return baseUrl + name;
      },
      analyze: async (url) => {
        const owner = new SQL(url, { max: 1 });
        try {
          await owner.unsafe("ANALYZE");
        } finally {
          await owner.close();
        }
      },
      rss: () => pids().reduce((sum, p) => sum + rssOf(p), 0),
      pids,
      stop: async () => {
        await admin.close();
        try {
          // Fast shutdown: rolls back open transactions, checkpoints, exits.
          await run(asOwner([join(BIN, "pg_ctl"), "stop", "-w", "-m", "fast", "-t", String(STOP_TIMEOUT_MS / 1000), "-D", data]), "pg_ctl stop");
        } catch {
          killAll();
        }
        process.off("exit", killAll);
        try {
          process.kill(watchdogPid, "SIGKILL");
        } catch {} // already gone
        rmSync(dir, { recursive: true, force: true });
        started = undefined;
      },
    };
  } catch (e) {
    throw e instanceof Error && e.message.startsWith("PostgreSQL did not start") ? e : failed((e as Error).message);
  }
}

