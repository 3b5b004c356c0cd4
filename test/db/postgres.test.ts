/**
 * The PostgreSQL groundwork of D16, on a real PostgreSQL (test/support/postgres.ts): gateways
 * that start together migrate once, the PostgreSQL schema has every table and column the SQLite
 * one has (and the migrations build exactly that schema), numbers come back as numbers through
 * drizzle's bun-sql driver, and the directory's search folds accents and case and uses its index.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { asc, count, eq, is, sql, type SQLWrapper } from "drizzle-orm";
import { PgTable, getTableConfig as pgConfig } from "drizzle-orm/pg-core";
import { SQLiteTable, getTableConfig as sqliteConfig } from "drizzle-orm/sqlite-core";
import { embeddedPgMigrations } from "../../src/db/pg/migrations.macro.ts";
import * as pg from "../../src/db/pg/schema.ts";
import { drizzle } from "drizzle-orm/bun-sql";
import { openPostgres, type OpenPostgres } from "../../src/db/postgres.ts";
import { openStore } from "../../src/db/connect.ts";
import { parseConfig } from "../../src/config.ts";
import { createLogger } from "../../src/log.ts";
import { COMMONNESS, tsqueryText } from "../../src/directory/search-pg.ts";
import * as sqlite from "../../src/schema.ts";
import { postgres, type Postgres } from "../support/postgres.ts";

const MiB = 2 ** 20;
let server: Postgres;
const opened: OpenPostgres[] = [];
/** The server's opener, plus drizzle over its client for the schema checks below. */
const open = async (url: string) => {
  const o = await openPostgres(url, { max: 4 });
  opened.push(o);
  return { ...o, db: drizzle({ client: o.client }) };
};

/** `sum()` as a number (0 over no rows): PostgreSQL's sum of int8 is numeric, a string in Bun SQL. */
const sumNumber = (expr: SQLWrapper) => sql`coalesce(sum(${expr}), 0)`.mapWith(Number);

beforeAll(async () => {
  server = await postgres();
  console.log(`PostgreSQL: started in ${server.startMs} ms (initdb included); postmaster + children RSS now ${(server.rss() / MiB).toFixed(0)} MiB`);
});
afterAll(async () => {
  for (const o of opened) await o.close();
});

describe("migrations", () => {
  test("gateways that start together on a fresh database all open it, and each migration runs once", async () => {
    const url = await server.createDatabase();
    const migrations = embeddedPgMigrations();
    const all = await Promise.all([open(url), open(url), open(url), open(url)]);
    // One opener applied everything; the others waited on the lock and found nothing to do.
    expect(all.map((o) => o.migrated).sort((a, b) => a - b)).toEqual([0, 0, 0, migrations.length]);
    const history = await all[0]!.client.unsafe("SELECT hash FROM drizzle.__drizzle_migrations ORDER BY id");
    expect(history.map((r: { hash: string }) => r.hash)).toEqual(migrations.map((m) => m.hash));
    // A gateway started later applies nothing either.
    expect((await open(url)).migrated).toBe(0);
  });
});

describe("the gateway's connection pool", () => {
  test("a gateway opens at most STOWAGE_DATABASE_POOL connections, however many statements wait", async () => {
    const url = await server.createDatabase();
    const backends = async (pool?: string) => {
      const config = parseConfig([], { STOWAGE_DATABASE_URL: url, ...(pool && { STOWAGE_DATABASE_POOL: pool }) });
      const store = await openStore(config, createLogger("error"));
      try {
        // Each statement holds its connection for a moment, so the twelve ask for twelve at once.
        const rows = await Promise.all(Array.from({ length: 12 }, () => store.sql.get<{ pid: number }>("SELECT pg_backend_pid() AS pid, pg_sleep(0.05)")));
        return new Set(rows.map((r) => r?.pid)).size;
      } finally {
        await store.close();
      }
    };
    expect(await backends("1")).toBe(1);
    expect(await backends("3")).toBeLessThanOrEqual(3);
    // The default (10) is no such limit here: Bun's client opens connections as statements queue.
    expect(await backends()).toBeGreaterThan(3);
  });
});

/** Table name → its columns (name, not-null), for every table a schema module exports. */
function shape(tables: { name: string; columns: { name: string; notNull: boolean }[] }[]) {
  return Object.fromEntries(tables.map((t) => [t.name, Object.fromEntries(t.columns.map((c) => [c.name, c.notNull]))]));
}

describe("schema parity", () => {
  const sqliteTables = Object.values(sqlite).filter((v) => is(v, SQLiteTable)).map((t) => sqliteConfig(t as SQLiteTable));
  const pgTables = Object.values(pg).filter((v) => is(v, PgTable)).map((t) => pgConfig(t as PgTable));

  test("the PostgreSQL schema has every table and column of the SQLite one, and no other", () => {
    expect(sqliteTables.length).toBeGreaterThan(25);
    // Save the directory's stored search document and its vocabulary, PostgreSQL's counterparts
    // of the FTS5 table (which drizzle's SQLite schema does not list either).
    const pgShape = shape(pgTables);
    expect(pgShape.directory_entries).toHaveProperty("search", false);
    delete pgShape.directory_entries?.search;
    expect(pgShape).toHaveProperty("directory_terms");
    delete pgShape.directory_terms;
    expect(pgShape).toEqual(shape(sqliteTables));
  });

  test("both have the same named indexes", () => {
    const names = (ts: { name: string; indexes: { config: { name?: string } }[] }[]) => ts.flatMap((t) => t.indexes.map((i) => `${t.name}.${i.config.name}`)).sort();
    expect(names(pgTables)).toEqual(names(sqliteTables));
  });

  test("the migrations build exactly the PostgreSQL schema's tables and columns", async () => {
    const { client } = await open(await server.createDatabase());
    const rows: { table_name: string; column_name: string; is_nullable: string }[] = await client.unsafe(
      "SELECT table_name, column_name, is_nullable FROM information_schema.columns WHERE table_schema = 'public'",
    );
    const live: Record<string, Record<string, boolean>> = {};
    for (const r of rows) (live[r.table_name] ??= {})[r.column_name] = r.is_nullable === "NO";
    expect(live).toEqual(shape(pgTables));
  });
});

describe("drizzle on PostgreSQL", () => {
  test("rows round-trip: int8 as numbers (2^53 − 1 exact), booleans, JSON as text, sum() and count() as numbers", async () => {
    const { db, client } = await open(await server.createDatabase());
    const now = Date.now();
    const [user] = await db
      .insert(pg.users)
      .values({ uid: "email:a@example.com", number: 100001, email: "a@example.com", browserInfo: { name: "Café", id: "7" }, socialFollowed: true, createdAt: now, updatedAt: now })
      .returning();
    expect(user).toMatchObject({ id: 1, number: 100001, points: 0, browserInfo: { name: "Café", id: "7" }, socialFollowed: true, createdAt: now, name: "" });
    expect(typeof user!.id).toBe("number");

    const big = Number.MAX_SAFE_INTEGER;
    await db.insert(pg.quotaReservations).values([
      { account: "0xA", kind: "space", bytes: 2 ** 40, createdAt: now, expiresAt: now + 60_000 },
      { account: "0xA", kind: "space", bytes: 5, createdAt: now },
      { account: "0xB", kind: "traffic", bytes: big, createdAt: now },
    ]);
    const [held] = await db
      .select({ bytes: sumNumber(pg.quotaReservations.bytes), n: count() })
      .from(pg.quotaReservations)
      .where(eq(pg.quotaReservations.account, "0xA"));
    expect(held).toEqual({ bytes: 2 ** 40 + 5, n: 2 });
    const [none] = await db.select({ bytes: sumNumber(pg.quotaReservations.bytes) }).from(pg.quotaReservations).where(eq(pg.quotaReservations.account, "nobody"));
    expect(none).toEqual({ bytes: 0 });
    const [b] = await db.select().from(pg.quotaReservations).where(eq(pg.quotaReservations.account, "0xB"));
    expect(b!.bytes).toBe(big);
    expect(b!.expiresAt).toBe(0);
    // Why the mapping must be explicit: Bun SQL itself hands int8 over as a BigInt (the client
    // runs with bigint: true) and sum() as a numeric string.
    const [raw] = await client`SELECT sum(bytes) AS s, max(bytes) AS m FROM quota_reservations`;
    expect(raw).toEqual({ s: String(2 ** 40 + 5 + big), m: BigInt(big) });

    // A relative update in one statement (D16: no read-modify-write), and a transaction.
    await db.transaction(async (tx) => {
      await tx.update(pg.users).set({ points: sql`${pg.users.points} + 7` }).where(eq(pg.users.id, user!.id));
      await tx.insert(pg.actionRecords).values({ userId: user!.id, action: 3, points: 7, time: Math.floor(now / 1000), slot: "once" });
    });
    const [after] = await db.select({ points: pg.users.points }).from(pg.users);
    expect(after).toEqual({ points: 7 });
    // ON CONFLICT instead of a caught unique violation (which would abort the transaction).
    const again = await db.insert(pg.actionRecords).values({ userId: user!.id, action: 3, points: 7, time: 0, slot: "once" }).onConflictDoNothing().returning();
    expect(again).toEqual([]);
  });

  test("file names and blob keys compare byte by byte even where the database's collation is linguistic", async () => {
    const { db, client } = await open(await server.createDatabase());
    const [database] = await client`SELECT datlocprovider AS provider, daticulocale AS locale FROM pg_database WHERE datname = current_database()`;
    expect(database).toEqual({ provider: "i", locale: "en-US" });
    await db.insert(pg.buckets).values({ did: "did:a", createdAt: 1 });
    const names = ["b", "B", "a", "é", "Z", "_x", "a b"];
    await db.insert(pg.files).values(names.map((name) => ({ did: "did:a", backend: "dfs" as const, name, cid: "c", size: 1, modTime: 1 })));
    const sorted = await db.select({ name: pg.files.name }).from(pg.files).orderBy(asc(pg.files.name));
    // JS sorts UTF-16 code units; for these names that is byte order. ICU en-US gives _x, a, a b, b, B, é, Z.
    expect(sorted.map((r) => r.name)).toEqual([...names].sort());
    const keys = ["ipfs/bafyb", "ipfs/Bafy", "ipfs_x", "dfs/ab"];
    await db.insert(pg.blobPins).values(keys.map((key) => ({ key, holder: "h", expiresAt: 1 })));
    const keyOrder = await client`SELECT key FROM blob_pins ORDER BY key`;
    expect(keyOrder.map((r: { key: string }) => r.key)).toEqual([...keys].sort());
  });
});

describe("directory search on PostgreSQL", () => {
  test("accent-, case- and width-insensitive, prefix on a word, name matches above keyword-only ones, through the GIN index", async () => {
    const { db, client } = await open(await server.createDatabase());
    const entry = (id: number, name: string, keywords: string[]) => ({ id, owner: "0xO", mid: `m${id}`, did: "did:o", name, size: "1", price: "0", public: true, keywords, block: 1 });
    await db.insert(pg.directoryEntries).values([
      entry(1, "Café de Flore", ["paris"]),
      entry(2, "Tea house", ["CAFÉ", "thé"]),
      entry(3, "Cafeteria menu", []),
      entry(4, "Bakery", ["bread"]),
    ]);
    const search = async (tsquery: string) => {
      const rows = await client.unsafe(
        `SELECT id FROM directory_entries
         WHERE directory_search_document(name, keywords) @@ to_tsquery('simple', stowage_fold($1))
         ORDER BY ts_rank(directory_search_document(name, keywords), to_tsquery('simple', stowage_fold($1))) DESC, id`,
        [tsquery],
      );
      return rows.map((r: { id: string }) => Number(r.id));
    };
    expect(await search("cafe")).toEqual([1, 2]);
    expect(await search("Café")).toEqual([1, 2]);
    expect(await search("ＣＡＦＥ")).toEqual([1, 2]); // full-width: NFKC
    expect(await search("the")).toEqual([2]);
    expect(await search("caf:*")).toEqual([1, 3, 2]);
    expect(await search("nothing")).toEqual([]);

    // The planner can answer the match from the GIN index: the query's expression is the index's.
    const plan = await db.transaction(async (tx) => {
      await tx.execute(sql`SET LOCAL enable_seqscan = off`);
      return tx.execute(sql`EXPLAIN SELECT id FROM directory_entries WHERE directory_search_document(name, keywords) @@ to_tsquery('simple', stowage_fold('cafe'))`);
    });
    expect(JSON.stringify(plan)).toContain("directory_entries_search");
  });

  test("the server's document-frequency test (search-pg.ts) counts its matches through the stored document's GIN index", async () => {
    const { sql: q } = await open(await server.createDatabase());
    const explain = (text: string, params: (string | number)[]) =>
      q.tx(async (tx) => {
        // An empty table: forbid the sequential scan to see that the index can answer the match.
        await tx.run("SET LOCAL enable_seqscan = off");
        return JSON.stringify(await tx.all<Record<string, string>>(`EXPLAIN ${text}`, params));
      });
    const query = tsqueryText("red harbour") as string;
    expect(await explain(COMMONNESS, [tsqueryText("red harbour", "", true) as string, query, 1001])).toContain("directory_entries_search_stored");
  });
});

test("the test databases belong to a role that is no superuser (migrations need only a database owner's rights)", async () => {
  const client = new SQL(await server.createDatabase());
  try {
    const [me] = await client`SELECT rolsuper FROM pg_roles WHERE rolname = current_user`;
    expect(me.rolsuper).toBe(false);
  } finally {
    await client.close();
  }
});
