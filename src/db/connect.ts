/**
 * The server's database, by configuration (D16): SQLite in the data dir when STOWAGE_DATABASE_URL
 * is unset (the embedded default, one gateway), PostgreSQL when it names one (many gateways).
 * Either way the services get the same `Sql`; the migrations of the dialect have run when this
 * resolves (on PostgreSQL under a lock, so gateways starting together migrate once).
 *
 * @example
 *   const store = await openStore(config, log)
 *   await store.sql.get("SELECT 1 AS one")
 */
import { join } from "node:path";
import type { Config } from "../config.ts";
import type { Logger } from "../log.ts";
import { openDatabase } from "./open.ts";
import { openPostgres } from "./postgres.ts";
import type { Dialect, Sql } from "./sql.ts";

export interface Store {
  sql: Sql;
  dialect: Dialect;
  close(): Promise<void>;
}

/** Where the database is, for logs: never the password. */
export function describeDatabase(url: string): string {
  const u = new URL(url);
  return `postgres://${u.username ? `${decodeURIComponent(u.username)}@` : ""}${u.host}${u.pathname}`;
}

export async function openStore(config: Pick<Config, "dataDir" | "databaseUrl" | "databasePool">, log: Logger): Promise<Store> {
  if (!config.databaseUrl) {
    const file = join(config.dataDir, "stowage.db");
    const db = openDatabase(file, undefined, {
      onCheckpointError: (err) => log.error("the database's checkpoint thread failed: SQLite checkpoints on the event loop again", { err: err.message }),
    });
    log.info("database ready", { dialect: "sqlite", file });
    return { sql: db.sql, dialect: "sqlite", close: () => db.close() };
  }
  const began = performance.now();
  const pg = await openPostgres(config.databaseUrl, { max: config.databasePool });
  log.info("database ready", { dialect: "postgres", at: describeDatabase(config.databaseUrl), migrated: pg.migrated, pool: config.databasePool, ms: Math.round(performance.now() - began) });
  return { sql: pg.sql, dialect: "postgres", close: () => pg.close() };
}
