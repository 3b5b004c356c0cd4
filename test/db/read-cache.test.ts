/**
 * Listing pages kept while the database is unchanged (src/db/read-cache.ts, issue 10): a page
 * read twice with nothing committed between is loaded once, and any commit — this connection's,
 * another connection's or another gateway's — shows in the next page. Runs on the database of
 * this pass (STOWAGE_TEST_DB): on PostgreSQL nothing is kept, and the same listing holds.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { ReadCache } from "../../src/db/read-cache.ts";
import { createFiles } from "../../src/storage/files.ts";
import { testDatabase, TEST_DB } from "../support/db.ts";
import { tempDir } from "../support/tmp.ts";

/** A cache over a version the test sets, and the loads it made. */
function watched(limits?: ConstructorParameters<typeof ReadCache>[1]) {
  const state = { version: 1 as number | undefined, loads: [] as string[] };
  const cache = new ReadCache<number>(() => state.version, limits);
  const read = (key: string, rows = [1, 2, 3]) =>
    cache.read(key, async () => {
      state.loads.push(key);
      return rows;
    });
  return { state, cache, read };
}

describe("ReadCache", () => {
  test("while the version stays a page loads once; a new version loads it again", async () => {
    const { state, read } = watched();
    expect(await read("a")).toEqual([1, 2, 3]);
    expect(await read("a")).toEqual([1, 2, 3]);
    expect(await read("b")).toEqual([1, 2, 3]);
    expect(state.loads).toEqual(["a", "b"]);
    state.version = 2;
    await read("a");
    await read("b");
    expect(state.loads).toEqual(["a", "b", "a", "b"]);
  });

  test("with no version (PostgreSQL, SQLite in memory) every read loads", async () => {
    const { state, read } = watched();
    state.version = undefined;
    await read("a");
    await read("a");
    expect(state.loads).toEqual(["a", "a"]);
  });

  test("a commit during a load: that page is not kept under the older version", async () => {
    const { state, cache } = watched();
    let finish!: (rows: number[]) => void;
    const slow = cache.read("a", () => new Promise<number[]>((ok) => (finish = ok)));
    state.version = 2; // committed while the first read loaded
    expect(await cache.read("b", async () => [9])).toEqual([9]);
    finish([1]);
    expect(await slow).toEqual([1]);
    const again = await cache.read("a", async () => (state.loads.push("a"), [2]));
    expect(again).toEqual([2]);
    expect(state.loads).toEqual(["a"]);
  });

  test("bounded: a page over rowsPerAnswer is not kept, the oldest pages go first, an empty page counts as a row", async () => {
    const { state, read } = watched({ rowsPerAnswer: 3, rows: 6 });
    await read("big", [1, 2, 3, 4]);
    await read("big", [1, 2, 3, 4]);
    expect(state.loads).toEqual(["big", "big"]);

    state.loads.length = 0;
    await read("a"); // 3 rows
    await read("b"); // 6
    await read("a"); // a is now the newest
    await read("c"); // 9 > 6: the oldest, b, goes
    await read("a");
    await read("c");
    await read("b");
    expect(state.loads).toEqual(["a", "b", "c", "b"]);

    state.version = 2;
    state.loads.length = 0;
    for (let i = 0; i < 8; i++) await read(`empty${i}`, []);
    await read("empty0", []);
    await read("empty7", []);
    expect(state.loads).toEqual([...Array.from({ length: 8 }, (_, i) => `empty${i}`), "empty0"]);
  });
});

describe(`a listing on ${TEST_DB}`, () => {
  const dir = tempDir("read-cache");
  const here = testDatabase(dir);
  const there = testDatabase(dir); // another connection to the same database: another process's (an operator's command), or on PostgreSQL another gateway's
  afterAll(async () => {
    await here.close();
    await there.close();
  });
  const did = "did:ethr:0x3d9:0x6BA9d8C00a118Bf758A4A06DD6c7B80f36fa02E6";
  const owner = "0x6BA9d8C00a118Bf758A4A06DD6c7B80f36fa02E6";
  const file = (name: string) => ({ did, backend: "dfs" as const, name, cid: `bafk${name}`, size: 4, encryption: "" });

  test("shows what this gateway and another connection committed since the page before", async () => {
    const files = createFiles(here.sql);
    const names = async () => (await files.list(did, owner, "dfs", { limit: 10 })).map((r) => r.name);
    await files.add(file("one"));
    expect(await names()).toEqual(["one"]);
    expect(await names()).toEqual(["one"]);

    await files.add(file("two"));
    expect(await names()).toEqual(["one", "two"]);

    await createFiles(there.sql).add(file("three"));
    expect(await names()).toEqual(["one", "two", "three"]);

    await there.sql.run("DELETE FROM files WHERE did = $1 AND name = $2", [did, "one"]);
    expect(await names()).toEqual(["two", "three"]);
  });
});
