/**
 * Opens the SQLite database: pragmas in the order that works (busy_timeout before WAL), then the
 * embedded migrations, each in its own transaction.
 *
 * @example
 *   const { sql, close } = openDatabase("data/stowage.db")
 */
import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import type { MigrationMeta } from "drizzle-orm/migrator";
import { embeddedMigrations } from "./migrations.macro.ts" with { type: "macro" };
import type { Sql } from "./sql.ts";
import { SqliteSql, type SqliteSqlOptions } from "./sqlite-sql.ts";
export interface OpenDatabase {
  sqlite: Database;
  /** The async data-access layer (sql.ts) over the same writing connection. */
  sql: Sql;
  /** Closes at once; the promise waits for the checkpoint thread's connection (sqlite-sql.ts). */
  close(): Promise<void>;
}

/** Same table and columns as drizzle-kit's migrator, so `drizzle-kit` tooling reads our history. */
const MIGRATIONS_TABLE = "__drizzle_migrations";

export function openDatabase(file: string, migrations: MigrationMeta[] = embeddedMigrations(), options: SqliteSqlOptions = {}): OpenDatabase {
  const sqlite = new Database(file, { create: true, strict: true });
  // busy_timeout must come first: switching to WAL itself can meet a lock held by another process.
  sqlite.exec("PRAGMA busy_timeout = 5000");
  sqlite.exec("PRAGMA journal_mode = WAL");
  sqlite.exec("PRAGMA synchronous = FULL");
  sqlite.exec("PRAGMA foreign_keys = ON");
  migrate(sqlite, migrations);
  const sql = new SqliteSql(sqlite, file, options);
  return {
    sqlite,
    sql,
    close: () => {
      const closing = sql.close();
      sqlite.close();
      return closing;
    },
  };
}

/**
 * An existing database, for an operator's command that may run beside the server (backup, check,
 * usage): nothing is created and no migration runs (the server's own version migrates), the
 * journal mode stays as it is, and commits are not fsynced one by one (`synchronous = NORMAL`;
 * such a command writes a few rows, which a power cut may take back, never half of one). Its
 * connection waits up to 5 s for the server's writer, as the server's waits for it: keep its
 * writing transactions short, since bun:sqlite waits on the server's event loop.
 */
export function openExisting(file: string): OpenDatabase {
  if (!existsSync(file)) throw new Error(`no database at ${file}`);
  const sqlite = new Database(file, { readwrite: true, create: false, strict: true });
  sqlite.exec("PRAGMA busy_timeout = 5000");
  sqlite.exec("PRAGMA synchronous = NORMAL");
  sqlite.exec("PRAGMA foreign_keys = ON");
  const sql = new SqliteSql(sqlite, file);
  return {
    sqlite,
    sql,
    close: () => {
      const closing = sql.close();
      sqlite.close();
      return closing;
    },
  };
}

/** Applies every migration newer than the last one applied; returns how many ran. */
export function migrate(sqlite: Database, migrations: MigrationMeta[]): number {
  sqlite.exec(`CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (id INTEGER PRIMARY KEY, hash TEXT NOT NULL, created_at NUMERIC)`);
  const apply = sqlite.transaction(() => {
    const last = sqlite.query<{ created_at: number }, []>(`SELECT created_at FROM ${MIGRATIONS_TABLE} ORDER BY created_at DESC LIMIT 1`).get();
    const pending = migrations.filter((m) => !last || Number(last.created_at) < m.folderMillis);
    for (const m of pending) {
      for (const stmt of m.sql) if (stmt.trim()) sqlite.exec(stmt);
      sqlite.query(`INSERT INTO ${MIGRATIONS_TABLE} (hash, created_at) VALUES (?, ?)`).run(m.hash, m.folderMillis);
    }
    return pending.length;
  });
  return apply.immediate();
}
