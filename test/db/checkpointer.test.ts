/**
 * Checkpoints off the event loop (src/db/checkpointer.ts): the writing connection never
 * checkpoints by itself (that stopped the whole event loop ≈ 4 ms every ≈ 200 commits); a worker
 * thread on its own connection does, every `checkpointEvery` commits, and the log starts over
 * after each, so the log file stays small under steady writes; every committed row is in the
 * database file once the connections close; a thread that cannot work hands checkpoints back to
 * SQLite. Real fsyncs and a real worker thread. SQLite only, whatever the pass: the database is
 * the test's own.
 */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { openDatabase } from "../../src/db/open.ts";
import { SqliteSql } from "../../src/db/sqlite-sql.ts";
import { tempDir } from "../support/tmp.ts";

const dir = tempDir("checkpointer");
const COMMITS = 1000;

test("under steady durable writes the thread checkpoints, the log starts over and stays small, and every row is in the database after close", async () => {
  const file = join(dir, "steady.db");
  const { sqlite, sql, close } = openDatabase(file, undefined, { checkpointEvery: 20 });
  expect(sqlite.query("PRAGMA wal_autocheckpoint").get()).toEqual({ wal_autocheckpoint: 0 });
  const checkpoints = (sql as SqliteSql).checkpoints;
  if (!checkpoints) throw new Error("a database in a file with durable commits has a checkpointer");

  let largest = 0;
  for (let i = 0; i < COMMITS; i++) {
    await sql.tx((tx) => tx.run("INSERT INTO app_state (key, value, updated_at) VALUES ($1, $2, $3)", [`k${i}`, "v".repeat(500), i]));
    largest = Math.max(largest, statSync(`${file}-wal`).size);
  }
  await checkpoints.settled();
  expect(checkpoints.failed).toBeUndefined();
  expect(checkpoints.runs).toBeGreaterThanOrEqual(2);
  // Without checkpoints, or without the log starting over, 1,000 commits of a 4 KiB page or more
  // each leave a log of 4 MiB or more; with them it stays near 20 commits' worth (≈ 100 KiB). Half
  // of those 4 MiB leaves room for a worker that a busy machine starves for a while (a CI run saw
  // 1.03 MiB with 400 commits and a bound of 1 MiB).
  expect(largest).toBeLessThan(2 * 1024 * 1024);

  await close();
  // The thread's connection closed too: the last connection to close removes the log.
  expect(existsSync(`${file}-wal`)).toBe(false);
  const reopened = new Database(file, { readonly: true });
  expect(reopened.query("SELECT count(*) AS n FROM app_state WHERE key LIKE 'k%'").get()).toEqual({ n: COMMITS });
  reopened.close();
});

test("a thread that cannot start hands checkpoints back to SQLite, once, and no write fails for it", async () => {
  const file = join(dir, "fallback.db");
  await openDatabase(file).close();
  const db = new Database(file, { strict: true });
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = FULL");
  const errors: Error[] = [];
  // As in a compiled binary built without the worker's entrypoint.
  const sql = new SqliteSql(db, file, { checkpointEvery: 1, checkpointScript: join(dir, "no-such-worker.ts"), onCheckpointError: (err) => errors.push(err) });
  expect(db.query("PRAGMA wal_autocheckpoint").get()).toEqual({ wal_autocheckpoint: 0 });
  for (let i = 0; i < 3; i++) {
    await sql.tx((tx) => tx.run("INSERT INTO app_state (key, value, updated_at) VALUES ($1, 'v', 1)", [`f${i}`]));
    await sql.checkpoints?.settled();
  }
  expect(errors).toHaveLength(1);
  expect(errors[0]?.message).toStartWith("checkpoint");
  expect(sql.checkpoints?.failed).toBe(errors[0]);
  expect(db.query("PRAGMA wal_autocheckpoint").get()).toEqual({ wal_autocheckpoint: 1000 });
  expect(await sql.all("SELECT key FROM app_state WHERE key LIKE 'f%' ORDER BY key")).toEqual([{ key: "f0" }, { key: "f1" }, { key: "f2" }]);
  await sql.close();
  db.close();
});
