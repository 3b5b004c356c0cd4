/**
 * A listing over the cache of listing pages (src/db/read-cache.ts) on the database of
 * this pass (STOWAGE_TEST_DB): any commit — this connection's, another connection's or another
 * gateway's — shows in the next page. On PostgreSQL nothing is kept, and the same listing holds.
 * The cache alone (bounds, a commit during a load): test/unit/read-cache.test.ts.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createFiles } from "../../src/storage/files.ts";
import { testDatabase, TEST_DB } from "../support/db.ts";
import { tempDir } from "../support/tmp.ts";

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
