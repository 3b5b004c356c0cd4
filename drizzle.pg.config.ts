/**
 * drizzle-kit for the PostgreSQL schema (D16): its own schema file and migration history, beside
 * the SQLite one (drizzle.config.ts). `sh scripts/bun.sh x drizzle-kit generate --config drizzle.pg.config.ts`.
 */
import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: "./src/db/pg/schema.ts",
  out: "./src/db/migrations-pg",
});
