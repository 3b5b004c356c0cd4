/**
 * Which database the tests run on (DESIGN.md D16), chosen for the whole test process by
 * `STOWAGE_TEST_DB`: unset or `sqlite` = a SQLite file in the test's data dir, `postgres` = a
 * database of its own on the shared PostgreSQL of test/support/postgres.ts. `npm test` runs the
 * accounts, storage, quota and directory suites a second time with `postgres`, so one test proves
 * both databases without being written twice.
 *
 * The PostgreSQL side opens lazily behind the same `Sql` interface (every call is async anyway),
 * so test support that builds an app synchronously stays synchronous.
 */
import { join } from "node:path";
import { openDatabase } from "../../src/db/open.ts";
import { openPostgres } from "../../src/db/postgres.ts";
import type { Param, Queryable, Sql, TxOptions } from "../../src/db/sql.ts";
import { postgres } from "./postgres.ts";

const chosen = process.env.STOWAGE_TEST_DB ?? "sqlite";
if (chosen !== "sqlite" && chosen !== "postgres") throw new Error(`STOWAGE_TEST_DB: "sqlite" or "postgres" (got ${JSON.stringify(chosen)})`);

export const TEST_DB: "sqlite" | "postgres" = chosen;

/** A fresh PostgreSQL database's URL, migrated by the first opener. */
export async function testDatabaseUrl(): Promise<string> {
  return (await postgres()).createDatabase();
}

/** A PostgreSQL `Sql` opened on first use. */
class LazyPgSql implements Sql {
  readonly dialect = "postgres" as const;
  private opened: Promise<Sql> | undefined;
  constructor(private readonly url: Promise<string>) {}
  private open(): Promise<Sql> {
    this.opened ??= this.url.then((u) => openPostgres(u, { max: 4 })).then((o) => o.sql);
    return this.opened;
  }
  async all<T extends object>(text: string, params?: readonly Param[]) {
    return (await this.open()).all<T>(text, params);
  }
  async get<T extends object>(text: string, params?: readonly Param[]) {
    return (await this.open()).get<T>(text, params);
  }
  async run(text: string, params?: readonly Param[]) {
    return (await this.open()).run(text, params);
  }
  async tx<T>(fn: (tx: Queryable) => Promise<T>, opts?: TxOptions) {
    return (await this.open()).tx(fn, opts);
  }
  async close() {
    if (this.opened) await (await this.opened).close();
  }
}

/** A fresh PostgreSQL database whatever this pass's database is, for what only PostgreSQL has. */
export function postgresSql(): Sql {
  return new LazyPgSql(testDatabaseUrl());
}

export interface TestDatabase {
  /** The data-access layer on the chosen database. */
  sql: Sql;
  close(): Promise<void>;
}

/** PostgreSQL databases by data dir, as the SQLite file is: reopening a data dir finds its rows. */
const urls = new Map<string, Promise<string>>();

/** The PostgreSQL URL of a data dir in this process (a new database on first use). */
export function testDatabaseUrlOf(dataDir: string): Promise<string> {
  let url = urls.get(dataDir);
  if (url === undefined) urls.set(dataDir, (url = testDatabaseUrl()));
  return url;
}

/**
 * The database of a test whose data dir is `dataDir` (the same one again when the dir is
 * reopened). `url`: the PostgreSQL database to use, for a child process its parent hands it to.
 */
export function testDatabase(dataDir: string, url?: string): TestDatabase {
  if (TEST_DB === "sqlite") {
    const sqlite = openDatabase(join(dataDir, "stowage.db"));
    return { sql: sqlite.sql, close: async () => sqlite.close() };
  }
  if (url !== undefined) urls.set(dataDir, Promise.resolve(url));
  const sql = new LazyPgSql(testDatabaseUrlOf(dataDir));
  return { sql, close: () => sql.close() };
}
