/**
 * The operator's commands that keep a gateway's data: `stowage admin backup`, `restore`, `check`
 * and `usage` (src/ops does the work). They read the data dir and the database themselves, never
 * the server, so they work on a running gateway and on a stopped one. Results go to stdout (as
 * JSON with `--json`), progress to stderr on a terminal (or with `--progress`). Exit codes as
 * everywhere: 0 done, 1 failed (a backup that could not copy every blob, a check that found
 * something, a restore refused), 2 bad usage.
 *
 * @example
 *   stowage admin backup /backups/stowage --data-dir /var/lib/stowage
 *   stowage admin restore /backups/stowage --data-dir /var/lib/stowage-restored
 *   stowage admin check --json
 *   stowage admin usage --since 2025-01-01 --csv
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { ConfigError, parseConfig, type Config, type Env } from "../config.ts";
import { openBlobStore } from "../blob/index.ts";
import { acquireLock } from "../datadir/lock.ts";
import { liveLeases } from "../db/leases.ts";
import { openExisting } from "../db/open.ts";
import { openPostgres } from "../db/postgres.ts";
import type { Sql } from "../db/sql.ts";
import { runBackup, type BackupProgress } from "../ops/backup.ts";
import { runCheck, type CheckArea } from "../ops/check.ts";
import { BackupError } from "../ops/manifest.ts";
import { runRestore, type RestoreProgress } from "../ops/restore.ts";
import { CSV_COLUMNS, csvLine, csvRow, usageReport, type AccountUsage } from "../ops/usage.ts";
import { parseOptions } from "./args.ts";
import { CliError } from "./chain-access.ts";
import { formatBytes } from "./user/common.ts";

type Out = (line: string) => void;

export interface OpsIo {
  out: Out;
  log: Out;
  /** Whether stderr is a terminal: progress is shown there then. */
  tty: boolean;
  /** Writes progress without a line break (a terminal's status line). */
  status?: (text: string) => void;
}

export const opsHelp = {
  backup: `Usage: stowage admin backup DEST [--data-dir DIR] [--json] [--progress]

  Backs up an embedded gateway, running or stopped, without stopping it, into the folder DEST:
  the database (a consistent snapshot), the embedded chain's state, the secrets (mode 0600), and
  the dfs chunks and ipfs blocks the snapshot names, under their content names. manifest.json
  (each part's size and SHA-256) is written last: a backup without it is unfinished, and running
  the command again finishes it. A second backup into the same DEST copies only new blobs, and
  the last complete backup there stays restorable until the new one's manifest replaces it, even
  if the run is killed or fails: DEST needs room for a second copy of the database meanwhile.
  With blobs in an object store (STOWAGE_S3_ENDPOINT) they are the store's to back up; with
  PostgreSQL, use PostgreSQL's tools (README: "Backups of a cluster").

  --data-dir DIR   the gateway's data dir (default ./data, or STOWAGE_DATA_DIR)
  --json           print the report as JSON
  --progress       show progress on stderr even when it is not a terminal`,
  restore: `Usage: stowage admin restore SRC --data-dir DIR [--json] [--progress]
       stowage admin restore SRC --verify [--json] [--progress]

  Restores the backup in the folder SRC into DIR, a new or empty data dir, which
  \`stowage serve --data-dir DIR\` then starts on. Every part is checked against the manifest
  (size and SHA-256) and every blob against its content address before anything is written; a
  part that differs is named and nothing is written.

  --data-dir DIR   where to restore (must not exist, or be empty)
  --verify         only check the backup; write nothing
  --json           print the report as JSON
  --progress       show progress on stderr even when it is not a terminal`,
  check: `Usage: stowage admin check [--data-dir DIR] [--repair] [--fast] [--json] [--progress]

  Checks that the database and the blobs agree, on SQLite or PostgreSQL (STOWAGE_DATABASE_URL),
  local files or an object store (STOWAGE_S3_*): every file's content and manifest, every chunk
  and block it needs (present, and hashing to its key), reference counts against the rows and
  holders they count, and each account's stored bytes against its files. It reports; with
  --repair it sets right the counts that are safe to set (references of content rows against
  their holders only while no gateway runs). Exit code 1 when anything is left wrong.

  --data-dir DIR   the gateway's data dir (default ./data, or STOWAGE_DATA_DIR)
  --repair         set right what is safe to (counts), and say what it did
  --fast           check that blobs exist with their size, without hashing them
  --json           print the report as JSON
  --progress       show progress on stderr even when it is not a terminal`,
  usage: `Usage: stowage admin usage [--data-dir DIR] [--since DATE] [--json | --csv]

  Per account: files and bytes stored on each back-end, traffic moved (the current period, and
  all time under vouchers), purchases and free grants (from the chain's events), S3 access keys
  (s3 keys) and multipart uploads, ipfs pins, Pinning Service API tokens (pin tokens, counted
  apart from S3 keys) and public bytes served. --since DATE (2025-01-31, or a full ISO time)
  limits what has a time: purchases and grants, files stored, S3 keys made, traffic periods
  begun, public bytes served.

  --data-dir DIR   the gateway's data dir (default ./data, or STOWAGE_DATA_DIR)
  --since DATE     only activity since DATE
  --json           print the report as JSON
  --csv            print one CSV row per account`,
} as const;

export type OpsCommand = keyof typeof opsHelp;
export const isOpsCommand = (name: string | undefined): name is OpsCommand => name !== undefined && name in opsHelp;

const SPECS: Record<OpsCommand, { flags: string[]; switches: string[] }> = {
  backup: { flags: ["--data-dir"], switches: ["--json", "--progress"] },
  restore: { flags: ["--data-dir"], switches: ["--json", "--verify", "--progress"] },
  check: { flags: ["--data-dir"], switches: ["--json", "--repair", "--fast", "--progress"] },
  usage: { flags: ["--data-dir", "--since"], switches: ["--json", "--csv"] },
};

export async function runOps(sub: OpsCommand, argv: string[], env: Env, io: OpsIo): Promise<number> {
  const { flags, positionals } = parseOptions(argv, { flags: SPECS[sub].flags, switches: SPECS[sub].switches, short: { "-j": "--json" } });
  const json = flags.has("--json");
  const showProgress = !json && (io.tty || flags.has("--progress"));
  const configOf = (dataDir = flags.get("--data-dir")) => parseConfig(dataDir !== undefined ? ["--data-dir", dataDir] : [], env);
  const expect = (n: number, what: string) => {
    if (positionals.length !== n) throw new ConfigError(positionals.length > n ? `unexpected argument ${positionals[n]}` : `${sub} needs ${what}`);
  };
  try {
    if (sub === "backup") {
      expect(1, "DEST, the backup's folder");
      return await backup(configOf(), positionals[0] as string, json, showProgress, io);
    }
    if (sub === "restore") {
      expect(1, "SRC, the backup's folder");
      const verify = flags.has("--verify");
      if (verify && flags.has("--data-dir")) throw new ConfigError("--verify writes nothing: give it no --data-dir");
      if (!verify && !flags.has("--data-dir")) throw new ConfigError("restore needs --data-dir DIR (a new, empty data dir), or --verify");
      return await restore(positionals[0] as string, flags.get("--data-dir"), json, showProgress, io);
    }
    expect(0, "");
    if (sub === "check") return await check(configOf(), { repair: flags.has("--repair"), fast: flags.has("--fast"), json, showProgress }, io);
    if (flags.has("--json") && flags.has("--csv")) throw new ConfigError("give one of --json and --csv");
    const since = flags.has("--since") ? parseSince(flags.get("--since") as string) : undefined;
    return await usage(configOf(), { since, format: json ? "json" : flags.has("--csv") ? "csv" : "table" }, io);
  } catch (err) {
    if (err instanceof BackupError) throw new CliError(err.message);
    throw err;
  }
}

/** A status line: rewritten in place on a terminal, a line at most once a second otherwise. */
function statusLine(io: OpsIo, enabled: boolean) {
  let shown = 0;
  let open = false;
  return {
    show(text: string, force = false) {
      if (!enabled) return;
      const now = performance.now();
      if (!force && now - shown < (io.tty ? 100 : 1000)) return;
      shown = now;
      if (io.tty && io.status) {
        io.status(`\r${text}\x1b[K`);
        open = true;
      } else io.log(text);
    },
    end() {
      if (open && io.status) io.status("\n");
      open = false;
    },
  };
}

async function backup(config: Config, dest: string, json: boolean, showProgress: boolean, io: OpsIo): Promise<number> {
  const line = statusLine(io, showProgress);
  const steps: Record<BackupProgress["step"], string> = { database: "database snapshot", chain: "chain state", secrets: "secrets", blobs: "blobs", manifest: "manifest", prune: "removing the last backup's database and blobs no longer named" };
  const report = await runBackup({
    config,
    dest,
    progress: (p) => {
      if (p.step === "blobs") line.show(`blobs ${p.done}/${p.total}, ${formatBytes(p.copiedBytes ?? 0)} copied`);
      else line.show(`${steps[p.step]} …`, true);
    },
  }).finally(() => line.end());
  const { blobs } = report;
  if (json) io.out(JSON.stringify(report, null, 2));
  else {
    const db = report.manifest.parts.find((p) => p.path === "stowage.db");
    io.out(`backup of ${report.manifest.source.dataDir} (${report.running ? "running" : "stopped"}) as of ${report.snapshotAt} in ${report.dest}`);
    io.out(`database ${formatBytes(db?.size ?? 0)}, chain ${report.manifest.source.chain ?? "external"}, ${report.manifest.parts.length} parts`);
    if (report.manifest.blobs.copied) io.out(`blobs: ${blobs.listed} named (${formatBytes(blobs.listedBytes)}): ${blobs.copied} copied (${formatBytes(blobs.copiedBytes)}), ${blobs.present} already there, ${blobs.pruned} no longer named removed`);
    else io.out(`blobs: ${blobs.listed} named (${formatBytes(blobs.listedBytes)}), left in the object store`);
    io.out(`written ${formatBytes(report.written)} in ${report.seconds.toFixed(1)} s`);
  }
  for (const note of report.notes) io.log(`note: ${note}`);
  if (blobs.damaged.length > 0) {
    io.log(`${blobs.damaged.length} blobs the database names could not be copied (missing or damaged at the source), for example ${blobs.damaged[0]}; the rest is backed up. Run \`stowage admin check\` on the gateway.`);
    return 1;
  }
  return 0;
}

async function restore(src: string, dataDir: string | undefined, json: boolean, showProgress: boolean, io: OpsIo): Promise<number> {
  const line = statusLine(io, showProgress);
  const report = await runRestore({
    src,
    dataDir,
    verifyOnly: dataDir === undefined,
    progress: (p: RestoreProgress) => line.show(`${p.step === "verify" ? "verifying" : "writing"} blobs ${p.done}/${p.total}`),
  }).finally(() => line.end());
  if (json) io.out(JSON.stringify(report, null, 2));
  else {
    const what = `${report.parts} parts and ${report.blobs} blobs (${formatBytes(report.bytes)}) of the backup as of ${report.manifest.snapshotAt}`;
    io.out(report.dataDir ? `restored ${what} into ${report.dataDir}` : `verified ${what}: it matches its manifest`);
    if (report.dataDir) io.log(`start it with: stowage serve --data-dir ${report.dataDir}`);
  }
  if (report.damaged.length > 0) io.log(`note: ${report.damaged.length} blobs were missing or damaged at the source when the backup was made (manifest.json lists them)`);
  if (!report.manifest.blobs.copied) io.log("note: the blobs were left in the object store when the backup was made: the restored gateway needs the same STOWAGE_S3_* settings");
  return 0;
}

/** The database of the configuration, opened for an operator's command (no migration: it is read as the gateways left it). */
async function openDatabase(config: Config): Promise<{ sql: Sql; dialect: "sqlite" | "postgres"; close(): Promise<void> }> {
  if (config.databaseUrl) {
    const pg = await openPostgres(config.databaseUrl, { max: 4, migrations: [] });
    return { sql: pg.sql, dialect: "postgres", close: () => pg.close() };
  }
  const file = join(config.dataDir, "stowage.db");
  if (!existsSync(file)) throw new CliError(`no database at ${resolve(file)}: give the gateway's --data-dir (or STOWAGE_DATABASE_URL)`);
  const db = openExisting(file);
  return { sql: db.sql, dialect: "sqlite", close: () => db.close() };
}

async function check(config: Config, o: { repair: boolean; fast: boolean; json: boolean; showProgress: boolean }, io: OpsIo): Promise<number> {
  // The store of a gateway that may be running: its temporary files are left alone.
  const store = await openBlobStore(config, { sweepTemps: false });
  const data = await openDatabase(config);
  // With no gateway running, content references may be set to their holders too: on SQLite this
  // command then holds the data dir's lock, so none starts meanwhile.
  let lock: { release(): void } | undefined;
  let offline = false;
  try {
    if (o.repair) {
      if (data.dialect === "sqlite") {
        try {
          lock = acquireLock(config.dataDir);
          offline = true;
        } catch {
          offline = false;
        }
      } else offline = (await liveLeases(data.sql, Date.now())).length === 0;
    }
    const line = statusLine(io, o.showProgress);
    const names: Record<CheckArea, string> = { files: "files", references: "references", manifests: "manifests", blobs: "blobs", stored: "stored bytes" };
    const report = await runCheck({
      sql: data.sql,
      store,
      hash: !o.fast,
      repair: o.repair,
      offline,
      settleMs: 2_000,
      progress: (p) => line.show(`checking ${names[p.area]}${p.total !== undefined ? ` ${p.done}/${p.total}` : ""}`),
    }).finally(() => line.end());
    if (o.json) io.out(JSON.stringify({ ...report, offline }, null, 2));
    else {
      for (const f of report.findings) io.out(`${f.repaired ? "repaired" : "PROBLEM "} ${f.area}: ${f.subject}: ${f.message}`);
      if (report.more > 0) io.out(`… and ${report.more} more`);
      const c = report.counts;
      io.out(
        `checked ${c.files} files, ${c.dfsObjects} dfs objects, ${c.ipfsRoots} ipfs roots, ${c.blobsChecked} blobs (${o.fast ? "sizes only" : `${formatBytes(c.bytesHashed)} hashed`}) in ${report.seconds.toFixed(1)} s: ` +
          (report.ok ? (report.repaired ? `repaired ${report.repaired}, nothing else wrong` : "everything agrees") : `${report.findings.filter((f) => !f.repaired).length + report.more} problems${report.repaired ? `, ${report.repaired} repaired` : ""}`),
      );
      if (!report.ok && o.repair && !offline && report.findings.some((f) => !f.repaired && f.area === "references" && f.subject.includes("content"))) {
        io.log("note: content references are repaired only while no gateway runs (stop them, then run --repair again)");
      }
    }
    return report.ok ? 0 : 1;
  } finally {
    lock?.release();
    await data.close();
  }
}

function parseSince(raw: string): number {
  const t = Date.parse(/^\d{4}-\d{2}-\d{2}$/.test(raw) ? `${raw}T00:00:00Z` : raw);
  if (Number.isNaN(t)) throw new ConfigError(`--since: not a date: ${raw} (use 2025-01-31 or an ISO time)`);
  return t;
}

async function usage(config: Config, o: { since?: number; format: "table" | "json" | "csv" }, io: OpsIo): Promise<number> {
  const data = await openDatabase(config); // rows only: no blob is read
  try {
    const report = await usageReport(data.sql, { since: o.since });
    if (o.format === "json") io.out(JSON.stringify(report, null, 2));
    else if (o.format === "csv") {
      io.out(csvLine(CSV_COLUMNS));
      for (const a of report.accounts) io.out(csvLine(csvRow(a)));
    } else {
      const row = (a: Pick<AccountUsage, "stored" | "traffic" | "purchases" | "grants" | "s3" | "ipfs">, name: string) =>
        [
          name.padEnd(42),
          `${a.stored.dfs.count}/${formatBytes(a.stored.dfs.bytes)}`.padStart(16),
          `${a.stored.ipfs.count}/${formatBytes(a.stored.ipfs.bytes)}`.padStart(16),
          formatBytes(a.traffic.periodBytes).padStart(11),
          `${formatBytes(BigInt(a.purchases.space.bytes))}+${formatBytes(BigInt(a.purchases.traffic.bytes))}`.padStart(22),
          `${formatBytes(BigInt(a.grants.space.bytes))}+${formatBytes(BigInt(a.grants.traffic.bytes))}`.padStart(22),
          String(a.s3.keys).padStart(7),
          String(a.ipfs.pinTokens).padStart(10),
        ].join(" ");
      io.out(`usage${report.since ? ` since ${report.since}` : ""} (purchases and grants: space+traffic)`);
      io.out(["account".padEnd(42), "dfs".padStart(16), "ipfs".padStart(16), "traffic".padStart(11), "bought".padStart(22), "granted".padStart(22), "s3 keys".padStart(7), "pin tokens".padStart(10)].join(" "));
      for (const a of report.accounts) io.out(row(a, a.account));
      io.out(row(report.totals, `total (${report.accounts.length} accounts)`));
    }
    return 0;
  } finally {
    await data.close();
  }
}
