/**
 * Bun macro: runs at bundle time, so the compiled binary carries its migrations and needs no
 * `src/db/migrations` folder on disk.
 */
import { readMigrationFiles, type MigrationMeta } from "drizzle-orm/migrator";
import { join } from "node:path";

export function embeddedMigrations(): MigrationMeta[] {
  return readMigrationFiles({ migrationsFolder: join(import.meta.dir, "migrations") });
}
