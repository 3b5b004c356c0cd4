/**
 * The installation id (src/db/installation.ts) on both databases: made once, kept across calls,
 * and the same for gateways that start together on one database (D16).
 */
import { afterAll, expect, test } from "bun:test";
import { installationId } from "../../src/db/installation.ts";
import { testDatabase } from "../support/db.ts";
import { tempDir } from "../support/tmp.ts";

const database = testDatabase(tempDir("installation"));
afterAll(() => database.close());

test("ten starts racing on one database agree on one id, and it stays", async () => {
  const ids = await Promise.all(Array.from({ length: 10 }, () => installationId(database.sql)));
  expect(new Set(ids).size).toBe(1);
  expect(ids[0]).toMatch(/^[0-9a-f-]{36}$/);
  expect(await installationId(database.sql)).toBe(ids[0] as string);
  expect(await database.sql.all("SELECT key FROM app_state WHERE key = 'installation_id'")).toHaveLength(1);
});
