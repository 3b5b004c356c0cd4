/**
 * The cache of listing pages by itself (src/db/read-cache.ts), over a version the test
 * sets: a page loads once while the version stays, again after it moves, never when there is no
 * version; a page loaded across a commit is not kept; the bounds hold. The same cache over a real
 * database: test/db/read-cache.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { ReadCache } from "../../src/db/read-cache.ts";

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
