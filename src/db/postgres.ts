/**
 * Opens PostgreSQL (D16) through Bun's built-in SQL client, then applies the embedded PostgreSQL migrations. Many gateways share one database and may start at
 * the same moment, so the migrations run in one transaction that first takes a transaction-scoped
 * advisory lock: the second gateway waits, then finds nothing left to apply. (drizzle's own
 * migrator creates its table and reads the last migration outside any lock, so two starts race.)
 * The lock is released by COMMIT or ROLLBACK — and by the server if the gateway dies holding it.
 *
 * The services reach it through the data-access layer (`sql`, pg-sql.ts), which maps int8 to
 * numbers; drizzle keeps only the schema and the migration history (src/db/pg/).
 *
 * @example
 *   const { sql, close } = await openPostgres("postgres://stowage@127.0.0.1:5432/stowage")
 */
import { SQL as BunSQL } from "bun";
import type { MigrationMeta } from "drizzle-orm/migrator";
import { PgSql } from "./pg-sql.ts";
import type { Sql } from "./sql.ts";
import { embeddedPgMigrations } from "./pg/migrations.macro.ts" with { type: "macro" };

export interface OpenPostgres {
  client: BunSQL;
  /** The async data-access layer (sql.ts) over the same client. */
  sql: Sql;
  /** How many migrations this opener applied (0 when another gateway had already). */
  migrated: number;
  close(): Promise<void>;
}

/** drizzle-kit's schema and table for the history, so its tooling reads ours. */
const MIGRATIONS_SCHEMA = "drizzle";
const MIGRATIONS_TABLE = "__drizzle_migrations";
/** The advisory lock key of "migrating Stowage's schema" ("Stow" in ASCII); per database. */
const MIGRATION_LOCK = 0x53746f77;

export async function openPostgres(url: string, opts: { max?: number; migrations?: MigrationMeta[] } = {}): Promise<OpenPostgres> {
  // bigint: int8 as BigInt rather than a string, mapped to numbers by PgSql (pg-sql.ts).
  const client = new BunSQL(url, { max: opts.max ?? 10, bigint: true });
  try {
    const migrated = await migratePostgres(client, opts.migrations ?? embeddedPgMigrations());
    return { client, sql: new PgSql(client), migrated, close: () => client.close() };
  } catch (e) {
    await client.close().catch(() => {});
    throw e;
  }
}

/** Applies every migration newer than the last one applied, under the lock; returns how many ran. */
export async function migratePostgres(client: BunSQL, migrations: MigrationMeta[]): Promise<number> {
  return client.begin(async (tx) => {
    // First, before anything reads or creates: CREATE … IF NOT EXISTS is not safe against a
    // concurrent CREATE (a unique violation in the catalog), and the history must be read by one.
    await tx.unsafe(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
    await tx.unsafe(`CREATE SCHEMA IF NOT EXISTS ${MIGRATIONS_SCHEMA}`);
    await tx.unsafe(`CREATE TABLE IF NOT EXISTS ${MIGRATIONS_SCHEMA}.${MIGRATIONS_TABLE} (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`);
    const [last] = (await tx.unsafe(`SELECT created_at FROM ${MIGRATIONS_SCHEMA}.${MIGRATIONS_TABLE} ORDER BY created_at DESC LIMIT 1`)) as { created_at: string | bigint }[];
    // int8 arrives as a string or a BigInt (see the header).
    const pending = migrations.filter((m) => !last || Number(last.created_at) < m.folderMillis);
    for (const m of pending) {
      for (const stmt of m.sql) if (stmt.trim()) await tx.unsafe(stmt);
      await tx.unsafe(`INSERT INTO ${MIGRATIONS_SCHEMA}.${MIGRATIONS_TABLE} (hash, created_at) VALUES ($1, $2)`, [m.hash, m.folderMillis]);
    }
    return pending.length;
  });
}
