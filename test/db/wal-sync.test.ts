/**
 * Group commit on SQLite (src/db/wal-sync.ts): a durable transaction resolves only once
 * an fsync of the write-ahead log that began after its COMMIT has finished; the connection is free
 * for the next transactions while that fsync runs, and one fsync carries every commit written
 * before it began; a light commit (`durable: false`) awaits none; an fsync that fails fails the
 * transaction that waited for it and every durable one after it. The fsync is held or failed by
 * the test (it is the boundary: a power cut cannot be staged here), except where the real one is
 * checked to reach the log file.
 * SQLite only, whatever the pass: the database is the test's own.
 */
import { Database } from "bun:sqlite";
import { afterAll, expect, test } from "bun:test";
import { fsync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { openDatabase } from "../../src/db/open.ts";
import type { Queryable } from "../../src/db/sql.ts";
import { SqliteSql } from "../../src/db/sqlite-sql.ts";
import { tempDir } from "../support/tmp.ts";

const dir = tempDir("wal-sync");
const closing: (() => void)[] = [];
afterAll(() => closing.forEach((close) => close()));

/** A migrated database file, then a second `Sql` over it whose fsyncs the test holds. */
function heldDatabase(name: string) {
  const file = join(dir, `${name}.db`);
  openDatabase(file).close();
  const db = new Database(file, { strict: true });
  db.exec("PRAGMA busy_timeout = 5000");
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = FULL");
  const pending: { fd: number; done: (err: NodeJS.ErrnoException | null) => void }[] = [];
  const sql = new SqliteSql(db, file, { fsync: (fd, done) => pending.push({ fd, done }) });
  closing.push(() => {
    void sql.close();
    db.close();
  });
  /** Finishes the oldest fsync still held, with `err` if given. */
  const finish = (err: NodeJS.ErrnoException | null = null) => {
    const next = pending.shift();
    if (!next) throw new Error("no fsync is running");
    next.done(err);
  };
  return { sql, db, pending, finish };
}

/** Settles what can settle: a few turns of the event loop, no timer. */
async function turns(n = 5) {
  for (let i = 0; i < n; i++) await new Promise<void>((go) => setImmediate(go));
}

const put = (key: string) => (tx: Queryable) => tx.run("INSERT INTO app_state (key, value, updated_at) VALUES ($1, 'v', 1)", [key]);
const row = (sql: SqliteSql, key: string) => sql.get("SELECT key FROM app_state WHERE key = $1", [key]);

test("the writing connection runs NORMAL (no fsync inside COMMIT) where durable commits were asked for; :memory: is left alone", () => {
  const { db, sql } = heldDatabase("level");
  expect(sql.wal).toBeDefined();
  expect(db.query("PRAGMA synchronous").get()).toEqual({ synchronous: 1 });
  const memory = new Database(":memory:");
  memory.exec("PRAGMA synchronous = FULL");
  expect(new SqliteSql(memory, ":memory:").wal).toBeUndefined();
  expect(memory.query("PRAGMA synchronous").get()).toEqual({ synchronous: 2 });
  memory.close();
});

test("a durable transaction resolves after an fsync begun after its COMMIT; later commits run meanwhile and share the next fsync", async () => {
  const { sql, pending, finish } = heldDatabase("group");
  expect(sql.failure).toBeUndefined();
  const resolved = new Set<string>();
  const tx = (key: string) => sql.tx(put(key)).then(() => resolved.add(key));
  const a = tx("a");
  await turns();
  expect(pending).toHaveLength(1); // a's fsync, held
  expect(resolved.size).toBe(0);
  // The connection is free while a's fsync runs: b and c commit (readable now) and wait.
  const [b, c] = [tx("b"), tx("c")];
  await turns();
  expect(await row(sql, "c")).toEqual({ key: "c" });
  expect(pending).toHaveLength(1);
  finish();
  await a;
  await turns();
  // a's fsync began before b and c were written: one more, for both.
  expect([...resolved]).toEqual(["a"]);
  expect(pending).toHaveLength(1);
  expect(sql.wal?.started).toBe(2);
  finish();
  await Promise.all([b, c]);
  expect([...resolved].sort()).toEqual(["a", "b", "c"]);
  expect(sql.wal?.started).toBe(2);
});

test("`committed` runs at the COMMIT, with the fsync begun and still held; never for a transaction that rolls back", async () => {
  const { sql, pending, finish } = heldDatabase("committed");
  const seen: string[] = [];
  const done = sql.tx(put("c1"), { committed: () => seen.push(`committed, ${pending.length} fsync held`) }).then(() => seen.push("resolved"));
  await turns();
  // What starts here (a ranged GET's read) overlaps the fsync; the caller still waits for it.
  expect(seen).toEqual(["committed, 1 fsync held"]);
  expect(await row(sql, "c1")).toEqual({ key: "c1" });
  finish();
  await done;
  expect(seen).toEqual(["committed, 1 fsync held", "resolved"]);
  const failing = sql.tx(
    async (tx) => {
      await put("c2")(tx);
      throw new Error("refused");
    },
    { committed: () => seen.push("committed after a rollback") },
  );
  await expect(failing).rejects.toThrow("refused");
  expect(seen).toHaveLength(2);
  expect(await row(sql, "c2")).toBeUndefined();
});

test("a light commit (durable: false) awaits no fsync; the next durable one carries it", async () => {
  const { sql, pending, finish } = heldDatabase("light");
  await sql.tx(put("light"), { durable: false });
  expect(sql.wal?.started).toBe(0);
  const durable = sql.tx(put("durable"));
  await turns();
  expect(pending).toHaveLength(1);
  finish();
  await durable;
  expect(sql.wal?.started).toBe(1);
});

test("a write outside any transaction resolves after its fsync too", async () => {
  const { sql, pending, finish } = heldDatabase("single");
  let done = false;
  const write = sql.run("INSERT INTO app_state (key, value, updated_at) VALUES ('one', 'v', 1)").then(() => (done = true));
  await turns();
  expect(pending).toHaveLength(1);
  expect(done).toBe(false);
  finish();
  await write;
  // A read takes the reading connection and no fsync.
  expect(await row(sql, "one")).toEqual({ key: "one" });
  expect(sql.wal?.started).toBe(1);
});

test("an fsync that fails fails the transaction that waited for it, and every durable commit after it until a restart (its rows are committed: failing is how it says so)", async () => {
  const { sql, finish } = heldDatabase("failing");
  const failing = sql.tx(put("x"));
  await turns();
  finish(Object.assign(new Error("EIO: i/o error, fsync"), { code: "EIO" }));
  await expect(failing).rejects.toThrow("the database's log could not be written to disk (EIO: i/o error, fsync)");
  // Linux may have dropped the pages it could not write and report the next fsync fine.
  await expect(sql.tx(put("y"))).rejects.toThrow("no write is acknowledged until the gateway restarts");
  await expect(sql.run("INSERT INTO app_state (key, value, updated_at) VALUES ('z', 'v', 1)")).rejects.toThrow("EIO");
  expect(sql.wal?.started).toBe(1);
  expect(sql.failure?.message).toContain("EIO"); // what /healthz reports for the database
  // A light commit and a read do not ask the disk for anything.
  await sql.tx(put("light"), { durable: false });
  expect(await row(sql, "light")).toEqual({ key: "light" });
});

test("the real fsync is of the database's log file, and its descriptor is closed with the database", async () => {
  const file = join(dir, "real.db");
  openDatabase(file).close();
  const db = new Database(file, { strict: true });
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = FULL");
  const synced: string[] = [];
  const sql = new SqliteSql(db, file, {
    fsync: (fd, done) => {
      synced.push(readlinkSync(`/proc/self/fd/${fd}`));
      fsync(fd, done);
    },
  });
  await sql.tx(put("real"));
  expect(synced).toEqual([`${file}-wal`]);
  const fd = (sql.wal as unknown as { fd: number }).fd; // private: the one descriptor it holds
  await sql.close();
  db.close();
  const target = (() => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      return undefined; // closed, and not reused
    }
  })();
  expect(target?.startsWith(`${file}-wal`) ?? false).toBe(false);
});
