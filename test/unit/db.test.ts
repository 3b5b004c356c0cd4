import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openDatabase, migrate } from "../../src/db/open.ts";
import { embeddedMigrations } from "../../src/db/migrations.macro.ts";
import { tempDir } from "../support/tmp.ts";

describe("database", () => {
  const dir = tempDir("db");

  test("an empty database gets every migration, with WAL, busy_timeout and foreign keys", () => {
    const { sqlite, close } = openDatabase(join(dir, "a.db"));
    const applied = sqlite.query<{ n: number }, []>("select count(*) as n from __drizzle_migrations").get();
    expect(applied?.n).toBe(embeddedMigrations().length);
    expect(sqlite.query<{ journal_mode: string }, []>("pragma journal_mode").get()?.journal_mode).toBe("wal");
    expect(sqlite.query<{ timeout: number }, []>("pragma busy_timeout").get()?.timeout).toBe(5000);
    expect(sqlite.query<{ foreign_keys: number }, []>("pragma foreign_keys").get()?.foreign_keys).toBe(1);
    close();
  });

  test("an existing database keeps its rows and applies nothing twice", async () => {
    const file = join(dir, "b.db");
    const first = openDatabase(file);
    await first.sql.run("INSERT INTO app_state (key, value, updated_at) VALUES ($1, $2, $3)", ["k", "v", 1]);
    first.close();
    const second = openDatabase(file);
    expect(migrate(second.sqlite, embeddedMigrations())).toBe(0);
    expect(await second.sql.get("SELECT value FROM app_state WHERE key = $1", ["k"])).toEqual({ value: "v" });
    second.close();
  });

  test("a new migration is applied to an existing database, and a failing one leaves it unchanged", () => {
    const file = join(dir, "c.db");
    openDatabase(file).close();
    const base = embeddedMigrations();
    const last = base[base.length - 1]!.folderMillis;
    const { sqlite, close } = openDatabase(file);
    expect(migrate(sqlite, [...base, { sql: ["CREATE TABLE extra (id integer primary key)"], bps: true, folderMillis: last + 1, hash: "x" }])).toBe(1);
    expect(() => migrate(sqlite, [...base, { sql: ["CREATE TABLE extra2 (id integer)", "CREATE TABLE broken ("], bps: true, folderMillis: last + 2, hash: "y" }])).toThrow();
    expect(sqlite.query("select name from sqlite_master where name = 'extra2'").get()).toBeNull();
    close();
  });
});
