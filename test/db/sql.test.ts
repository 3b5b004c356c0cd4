/**
 * The data-access layer (src/db/sql.ts) behaves the same on both databases: one SQL text, numbers
 * as numbers, booleans, transactions that commit or roll back whole, writes that wait for an open
 * transaction on SQLite, and PostgreSQL's SERIALIZABLE transactions retried when they collide.
 * Runs on the database of this pass (STOWAGE_TEST_DB, test/support/db.ts).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { testDatabase, TEST_DB } from "../support/db.ts";
import { tempDir } from "../support/tmp.ts";
import { batches, placeholders, type Queryable, together } from "../../src/db/sql.ts";

const db = testDatabase(tempDir("sql"));
const sql = db.sql;
afterAll(() => db.close());

// app_state and leases exist on both dialects (the migrations ran).
describe(`data-access layer on ${TEST_DB}`, () => {
  test("int8 and count(*) are numbers, exact up to 2^53 − 1; SUM cast to BIGINT too", async () => {
    const big = Number.MAX_SAFE_INTEGER;
    await sql.run("INSERT INTO leases (name, holder, epoch, expires_at) VALUES ($1, $2, $3, $4)", ["n1", "h", big, 2 ** 40]);
    await sql.run("INSERT INTO leases (name, holder, epoch, expires_at) VALUES ($1, $2, $3, $4)", ["n2", "h", 1, 5]);
    const row = await sql.get<{ epoch: number; expiresAt: number }>('SELECT epoch, expires_at AS "expiresAt" FROM leases WHERE name = $1', ["n1"]);
    expect(row).toEqual({ epoch: big, expiresAt: 2 ** 40 });
    const agg = await sql.get<{ n: number; total: number }>("SELECT COUNT(*) AS n, CAST(COALESCE(SUM(expires_at), 0) AS BIGINT) AS total FROM leases WHERE name IN ($1, $2)", ["n1", "n2"]);
    expect(agg).toEqual({ n: 2, total: 2 ** 40 + 5 });
    expect(await sql.get("SELECT 1 AS one FROM leases WHERE name = $1", ["none"])).toBeUndefined();
  });

  test("run() counts changed rows; RETURNING and ON CONFLICT work the same", async () => {
    const up = "INSERT INTO rate_counters (key, window_start, count) VALUES ($1, $2, 1) ON CONFLICT (key) DO UPDATE SET count = rate_counters.count + 1 RETURNING count";
    expect(await sql.get<{ count: number }>(up, ["k", 0])).toEqual({ count: 1 });
    expect(await sql.get<{ count: number }>(up, ["k", 0])).toEqual({ count: 2 });
    expect(await sql.run("UPDATE rate_counters SET count = count + 1 WHERE key = $1", ["k"])).toBe(1);
    expect(await sql.run("UPDATE rate_counters SET count = count + 1 WHERE key = $1", ["missing"])).toBe(0);
  });

  test("placeholders() and batches() build IN lists", async () => {
    const keys = Array.from({ length: 1200 }, (_, i) => `b${i}`);
    for (const batch of batches(keys)) {
      await sql.run(`INSERT INTO rate_counters (key, window_start, count) VALUES ${batch.map((_, i) => `($${i + 1}, 0, 0)`).join(", ")}`, batch);
    }
    let found = 0;
    for (const batch of batches(keys)) found += (await sql.all(`SELECT key FROM rate_counters WHERE key IN (${placeholders(batch.length)})`, batch)).length;
    expect(found).toBe(1200);
  });

  test("a transaction that throws leaves nothing; one that returns commits everything", async () => {
    await expect(
      sql.tx(async (tx) => {
        await tx.run("INSERT INTO app_state (key, value, updated_at) VALUES ($1, $2, $3)", ["gone", "x", 1]);
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    expect(await sql.get("SELECT key FROM app_state WHERE key = $1", ["gone"])).toBeUndefined();
    const out = await sql.tx(async (tx) => {
      await tx.run("INSERT INTO app_state (key, value, updated_at) VALUES ($1, $2, $3)", ["kept", "x", 1]);
      return (await tx.get<{ value: string }>("SELECT value FROM app_state WHERE key = $1 FOR UPDATE", ["kept"]))?.value;
    });
    expect(out).toBe("x");
    expect(await sql.get("SELECT value FROM app_state WHERE key = $1", ["kept"])).toEqual({ value: "x" });
  });

  test("`committed` runs once a transaction has committed, its rows readable outside it; never for one that throws", async () => {
    // A read begun in `committed` sees the rows: on SQLite the writing connection is free again,
    // on PostgreSQL another connection of the pool reads them.
    let outside: Promise<unknown> | undefined;
    const insert = (tx: Queryable) => tx.run("INSERT INTO app_state (key, value, updated_at) VALUES ($1, $2, $3)", ["seen", "x", 1]);
    await sql.tx(insert, { committed: () => void (outside = sql.get("SELECT value FROM app_state WHERE key = $1", ["seen"])) });
    expect(await outside).toEqual({ value: "x" });
    let calls = 0;
    await expect(
      sql.tx(
        async (tx) => {
          await tx.run("INSERT INTO app_state (key, value, updated_at) VALUES ($1, $2, $3)", ["unseen", "x", 1]);
          throw new Error("boom");
        },
        { committed: () => calls++ },
      ),
    ).rejects.toThrow("boom");
    expect(calls).toBe(0);
  });

  test("together(): statements sent side by side run in order, see each other's writes, and a failure among them rolls all back", async () => {
    const insert = "INSERT INTO app_state (key, value, updated_at) VALUES ($1, $2, $3)";
    const [inserted, read] = await sql.tx((tx) => together(tx.run(insert, ["side-a", "1", 1]), tx.get<{ value: string }>("SELECT value FROM app_state WHERE key = $1", ["side-a"])));
    expect({ inserted, read }).toEqual({ inserted: 1, read: { value: "1" } });
    // The failure in the middle is the one thrown (on PostgreSQL the statement after it fails too,
    // its transaction aborted); the transaction ends only once every statement has answered, so
    // the insert before it, on SQLite already run, rolls back with it and nothing commits by itself.
    await expect(sql.tx((tx) => together(tx.run(insert, ["side-b", "1", 1]), tx.run("INSERT INTO no_such_table (x) VALUES ($1)", [1]), tx.run(insert, ["side-c", "1", 1])))).rejects.toThrow(/no_such_table/);
    expect(await sql.all("SELECT key FROM app_state WHERE key IN ($1, $2)", ["side-b", "side-c"])).toEqual([]);
  });

  test("together() waits for every promise, then throws the first failure in the order given", async () => {
    const order: string[] = [];
    const late = Bun.sleep(30).then(() => void order.push("late settled"));
    const first = Promise.reject(new Error("first"));
    const second = Promise.reject(new Error("second"));
    await expect(together(late, second, first).finally(() => order.push("rejected"))).rejects.toThrow("second");
    expect(order).toEqual(["late settled", "rejected"]);
  });

  test("read-modify-write transactions in parallel lose no update (queued on SQLite, retried on PostgreSQL)", async () => {
    await sql.run("INSERT INTO app_state (key, value, updated_at) VALUES ($1, $2, $3)", ["counter", "0", 0]);
    const bump = () =>
      sql.tx(async (tx) => {
        const row = await tx.get<{ value: string }>("SELECT value FROM app_state WHERE key = $1", ["counter"]);
        // A real await between the read and the write: other transactions run meanwhile.
        await new Promise((ok) => setTimeout(ok, 1));
        await tx.run("UPDATE app_state SET value = $2 WHERE key = $1", ["counter", String(Number(row!.value) + 1)]);
      });
    await Promise.all(Array.from({ length: 20 }, bump));
    expect(await sql.get("SELECT value FROM app_state WHERE key = $1", ["counter"])).toEqual({ value: "20" });
  });

  test("a write outside any transaction waits for the open one and is not rolled back with it", async () => {
    let release!: () => void;
    const gate = new Promise<void>((ok) => (release = ok));
    const failing = sql.tx(async (tx) => {
      await tx.run("INSERT INTO app_state (key, value, updated_at) VALUES ($1, $2, $3)", ["inside", "x", 1]);
      await gate;
      throw new Error("rolled back");
    });
    const outside = sql.run("INSERT INTO app_state (key, value, updated_at) VALUES ($1, $2, $3)", ["outside", "y", 1]);
    // A read outside sees committed rows only.
    expect(await sql.get("SELECT key FROM app_state WHERE key = $1", ["inside"])).toBeUndefined();
    release();
    await expect(failing).rejects.toThrow("rolled back");
    await outside;
    expect(await sql.get("SELECT key FROM app_state WHERE key = $1", ["inside"])).toBeUndefined();
    expect(await sql.get("SELECT value FROM app_state WHERE key = $1", ["outside"])).toEqual({ value: "y" });
  });

  // On PostgreSQL the option is ignored (another gateway may rely on the row while its database
  // restarts): the commit keeps the server's synchronous_commit (the test server's is off, for
  // speed). On SQLite it means "resolve without awaiting the log's fsync": test/db/wal-sync.test.ts.
  if (TEST_DB === "postgres") {
    test("durable: false is ignored on PostgreSQL: the commit keeps the server's synchronous_commit", async () => {
      const level = async (q: { get: typeof sql.get }) => (await q.get<{ synchronous_commit: string }>("SHOW synchronous_commit"))?.synchronous_commit;
      const server = await sql.tx((tx) => level(tx));
      expect(server).toBeString();
      const seen = await sql.tx(async (tx) => {
        await tx.run("INSERT INTO app_state (key, value, updated_at) VALUES ($1, $2, $3)", ["light", "x", 1]);
        return level(tx);
      }, { durable: false });
      expect(seen).toBe(server);
      expect(await sql.get("SELECT value FROM app_state WHERE key = $1", ["light"])).toEqual({ value: "x" });
    });
  }
});
