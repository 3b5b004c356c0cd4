/**
 * The hold a backup puts on every blob deletion (src/blob/guard.ts `holdDeletions`), on this
 * pass's database and blob store: while it is live no deleter decides to delete, whatever the
 * blob; once released, or once its holder died and it lapsed, deletions go on as before. This is
 * what lets a backup copy every blob its database snapshot names after taking the snapshot.
 */
import { afterAll, expect, test } from "bun:test";
import { createBlobGuard, holdDeletions, LEASE_MS } from "../../src/blob/guard.ts";
import { silentLogger } from "../../src/log.ts";
import { blobStoreOf } from "../support/blobs.ts";
import { testDatabase } from "../support/db.ts";
import { tempDir } from "../support/tmp.ts";

const dataDir = tempDir("ops-hold");
const db = testDatabase(dataDir);
afterAll(() => db.close());
// Opened here, outside any test's timeout (PostgreSQL starts on first use).
await db.sql.get("SELECT 1 AS one");
const store = blobStoreOf(dataDir);
let clock = Date.now();
const guard = createBlobGuard({ sql: db.sql, store, log: silentLogger, now: () => clock });
const unreferenced = async () => false;

test("no blob is deleted while a backup holds deletions; after it, deletions go on", async () => {
  const keys = ["dfs/held-a", "ipfs/held-b"];
  for (const k of keys) await store.put(k, new TextEncoder().encode(k));
  const hold = await holdDeletions(db.sql, "backup-test", () => clock);
  for (const k of keys) expect(await guard.deleteIfUnused(k, unreferenced)).toBe(false);
  for (const k of keys) expect(await store.stat(k)).toBe(k.length);
  await hold.release();
  for (const k of keys) expect(await guard.deleteIfUnused(k, unreferenced)).toBe(true);
  for (const k of keys) expect(await store.stat(k)).toBeUndefined();
});

test("a hold whose holder died lapses: deletions go on a lease's time after its last renewal", async () => {
  await store.put("dfs/held-c", new Uint8Array([1, 2, 3]));
  const hold = await holdDeletions(db.sql, "backup-killed", () => clock);
  expect(await guard.deleteIfUnused("dfs/held-c", unreferenced)).toBe(false);
  clock += LEASE_MS + 1; // no renewal came (a kill -9): the pin has lapsed
  expect(await guard.deleteIfUnused("dfs/held-c", unreferenced)).toBe(true);
  expect(await store.stat("dfs/held-c")).toBeUndefined();
  await hold.release();
});
