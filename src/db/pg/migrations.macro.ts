/**
 * Bun macro: runs at bundle time, so the compiled binary carries the PostgreSQL migrations
 * (src/db/migrations-pg, generated from src/db/pg/schema.ts) and needs no folder on disk — as
 * src/db/migrations.macro.ts does for SQLite.
 */
import { readMigrationFiles, type MigrationMeta } from "drizzle-orm/migrator";
import { join } from "node:path";

export function embeddedPgMigrations(): MigrationMeta[] {
  return readMigrationFiles({ migrationsFolder: join(import.meta.dir, "..", "migrations-pg") });
}
