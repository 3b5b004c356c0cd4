/**
 * The quota's "stored" as an account's file count grows (small uploads): an upload reads
 * it twice (its first check, leaving out the entry it would replace, and the exact check once its
 * row is in). Before 90f9a06 that was a SUM over all of the account's files; now it is one row of
 * `stored_totals`, kept by triggers on `files`. The small-uploads bench cannot cheaply give an
 * account 100k files (≈ 4 ms of server CPU per upload), so this measures the two statements
 * themselves, in process, on one account holding N files (beside 10,000 of other accounts), on
 * SQLite and PostgreSQL: the old text verbatim against storage/files.ts's storedBytes — and what
 * the triggers add to every file write (one insert and one delete per file, each committed alone,
 * in rounds with and without the triggers in turn).
 *
 * CPU per call: this process's (process.cpuUsage) and, on PostgreSQL, the server backend's (its
 * /proc stat: the pool has one connection), since the machine is shared (compare CPU, not wall).
 *
 * Run: bun bench/stored-bytes.ts [--files 1000,10000,100000] [--dbs sqlite,postgres] [--calls 1000] [--rounds 2] [--parts reads,writes]
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../src/db/open.ts";
import { openPostgres } from "../src/db/postgres.ts";
import { embeddedMigrations } from "../src/db/migrations.macro.ts";
import { embeddedPgMigrations } from "../src/db/pg/migrations.macro.ts";
import type { Sql, TxOptions } from "../src/db/sql.ts";
import { storedBytes } from "../src/storage/files.ts";
import { postgres } from "../test/support/postgres.ts";
import { alignColumns, benchArgs, loadAverage, usageError } from "./harness.ts";

const args = benchArgs("The quota's stored-bytes read (old SUM vs the stored_totals row) and the triggers' cost per file write, at N files per account, on SQLite and PostgreSQL.", {
  files: { default: "1000,10000,100000", help: "files of the measured account, comma-separated" },
  dbs: { default: "sqlite,postgres", help: "databases, comma-separated" },
  calls: { default: "1000", help: "reads (and writes) per measurement" },
  rounds: { default: "2", help: "measured rounds" },
  parts: { default: "reads,writes", help: "what to measure, comma-separated" },
});
const sizes = args.files.split(",").map(Number);
const dbs = args.dbs.split(",");
const calls = Number(args.calls);
const rounds = Number(args.rounds);
const parts = args.parts.split(",");
for (const p of parts) if (p !== "reads" && p !== "writes") usageError("--parts: reads, writes or both");
for (const d of dbs) if (d !== "sqlite" && d !== "postgres") usageError("--dbs: sqlite, postgres or both");
for (const n of [...sizes, calls, rounds]) if (!(Number.isInteger(n) && n > 0)) usageError("every option must be a positive integer");

/** The statements of src/storage/files.ts before 90f9a06, verbatim. */
const OLD_STORED = "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) AS n FROM files WHERE did = $1";
const OLD_STORED_EXCEPT = `${OLD_STORED} AND NOT (backend = $2 AND name = $3)`;

const DID = "did:ethr:0x3d9:0x000000000000000000000000000000000000bEEF";
const OTHERS = 10_000;
const progress = (line: string) => process.stderr.write(`${line}\n`);
const scratch = mkdtempSync(join(tmpdir(), "stowage-bench-stored-"));
process.on("exit", () => rmSync(scratch, { recursive: true, force: true }));
const CLK_TCK_MS = 10; // Linux USER_HZ = 100

/** utime + stime of a process, ms. */
function procCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * CLK_TCK_MS;
}

interface Db {
  sql: Sql;
  /** The server backend's CPU in ms (PostgreSQL), or 0. */
  serverCpu(): number;
  close(): Promise<void>;
}

async function open(kind: string, n: number): Promise<Db> {
  if (kind === "sqlite") {
    const d = openDatabase(join(scratch, `s${n}-${Date.now()}.db`));
    return { sql: d.sql, serverCpu: () => 0, close: async () => d.close() };
  }
  const pg = await postgres();
  const o = await openPostgres(await pg.createDatabase(), { max: 1 });
  const pid = (await o.sql.get<{ pid: number }>("SELECT pg_backend_pid() AS pid"))!.pid;
  return { sql: o.sql, serverCpu: () => procCpuMs(pid), close: o.close };
}

/** `n` files of the measured account and OTHERS of 100 other accounts, written in batches (the triggers count them). */
async function fill(sql: Sql, n: number) {
  const owners = [DID, ...Array.from({ length: 100 }, (_, i) => `did:other:${i}`)];
  for (const d of owners) await sql.run("INSERT INTO buckets (did, created_at) VALUES ($1, 0) ON CONFLICT (did) DO NOTHING", [d]);
  const rows: [string, string, number][] = [];
  for (let i = 0; i < n; i++) rows.push([DID, `f${i}`, 1000 + (i % 4096)]);
  for (let i = 0; i < OTHERS; i++) rows.push([`did:other:${i % 100}`, `o${i}`, 777]);
  const STEP = 500;
  for (let from = 0; from < rows.length; from += STEP) {
    const part = rows.slice(from, from + STEP);
    const values = part.map((_, k) => `($${3 * k + 1}, ${k % 2 ? "'dfs'" : "'ipfs'"}, $${3 * k + 2}, 'bafy', $${3 * k + 3}, 0)`).join(", ");
    await sql.tx(async (tx) => void (await tx.run(`INSERT INTO files (did, backend, name, cid, size, mod_time) VALUES ${values}`, part.flat())));
  }
  await sql.run("ANALYZE");
}

interface Cpu {
  client: number;
  server: number;
  wall: number;
}

/** Per call, µs. */
async function measure(db: Db, fn: (i: number) => Promise<unknown>): Promise<Cpu> {
  for (let i = 0; i < Math.min(100, calls); i++) await fn(i); // warm: prepared statements, caches
  const c0 = process.cpuUsage();
  const s0 = db.serverCpu();
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) await fn(i);
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { client: (c.user + c.system) / calls, server: ((db.serverCpu() - s0) * 1000) / calls, wall: (wall * 1000) / calls };
}

/** Each round of writes is measured with the triggers, then without, then they are made again from the migrations' own statements. */
const WRITE: TxOptions = { isolation: "read committed", durable: false };
const createsTrigger = (stmt: string) => /^CREATE TRIGGER/m.test(stmt);
const triggers: Record<string, string[]> = {
  sqlite: embeddedMigrations().flatMap((m) => m.sql.filter(createsTrigger)),
  postgres: embeddedPgMigrations().flatMap((m) => m.sql.filter(createsTrigger)),
};
/** Dropped for the writes' "before" (the database is thrown away afterwards). */
const DROP_TRIGGERS: Record<string, string[]> = {
  sqlite: ["DROP TRIGGER files_stored_insert", "DROP TRIGGER files_stored_delete", "DROP TRIGGER files_stored_update"],
  postgres: ["DROP TRIGGER files_stored_totals ON files"],
};

const out: string[][] = [["db", "files", "round", "what", "before µs CPU", "after µs CPU", "before µs wall", "after µs wall"]];
const cpu = (c: Cpu) => (c.client + c.server).toFixed(1);
progress(`load average at start: ${loadAverage()}`);
for (const kind of dbs) {
  for (const n of sizes) {
    const db = await open(kind, n);
    progress(`${kind}: ${n.toLocaleString("en-US")} files …`);
    await fill(db.sql, n);
    const exact = (await db.sql.get<{ n: number }>(OLD_STORED, [DID]))!.n;
    if ((await storedBytes(db.sql, DID)) !== exact) throw new Error(`stored_totals disagrees with the SUM: ${await storedBytes(db.sql, DID)} vs ${exact}`);
    for (let r = 1; r <= (parts.includes("reads") ? rounds : 0); r++) {
      // An upload's two reads: the first check (leaving out the name it would replace) and the exact one.
      const oldPair = await measure(db, async (i) => {
        await db.sql.get(OLD_STORED_EXCEPT, [DID, "dfs", `f${i % n}`]);
        await db.sql.get(OLD_STORED, [DID]);
      });
      const newPair = await measure(db, async (i) => {
        await storedBytes(db.sql, DID, { backend: "dfs", name: `f${i % n}` });
        await storedBytes(db.sql, DID);
      });
      out.push([kind, String(n), String(r), "an upload's 2 reads", cpu(oldPair), cpu(newPair), oldPair.wall.toFixed(1), newPair.wall.toFixed(1)]);
    }
    if (parts.includes("writes")) {
      // What the triggers add to a write: one file row in and out, each its own transaction (READ
      // COMMITTED, as an upload's), rounds with and without the triggers in turn.
      const write = (tag: string) => async (i: number) => {
        await db.sql.tx(async (tx) => void (await tx.run("INSERT INTO files (did, backend, name, cid, size, mod_time) VALUES ($1, 'dfs', $2, 'bafy', 5, 0)", [DID, `${tag}${i}`])), WRITE);
        await db.sql.tx(async (tx) => void (await tx.run("DELETE FROM files WHERE did = $1 AND backend = 'dfs' AND name = $2", [DID, `${tag}${i}`])), WRITE);
      };
      for (let r = 1; r <= rounds; r++) {
        const withTriggers = await measure(db, write(`w${r}-`));
        for (const s of DROP_TRIGGERS[kind]!) await db.sql.run(s);
        const without = await measure(db, write(`x${r}-`));
        for (const s of triggers[kind]!) await db.sql.run(s);
        out.push([kind, String(n), String(r), "1 insert + 1 delete", cpu(without), cpu(withTriggers), without.wall.toFixed(1), withTriggers.wall.toFixed(1)]);
      }
    }
    await db.close();
  }
}
console.log(alignColumns(out).join("\n"));
console.log(`\nbefore = the SUM over the account's files (reads) / no triggers (writes); after = stored_totals. CPU = this process + (PostgreSQL) its backend; per call; ${calls} calls per cell. Load average at end: ${loadAverage()}`);
if (dbs.includes("postgres")) await (await postgres()).stop();
