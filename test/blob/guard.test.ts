/**
 * The deletion protocol of D15 on a real SQLite file and real blob files: pins keep blobs, a
 * tombstone makes an upload wait and write again, a dead deleter's tombstone is finished, and an
 * upload racing deleters over one key never ends with its rows naming a missing blob.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { createBlobGuard, LEASE_MS } from "../../src/blob/guard.ts";
import { LocalBlobStore } from "../../src/blob/local.ts";
import { blobPins, blobTombstones } from "../../src/blob/schema.ts";
import { openDatabase } from "../../src/db/open.ts";
import { silentLogger } from "../../src/log.ts";
import { tempDir } from "../support/tmp.ts";

function setup(clock = { t: Date.now() }) {
  const dir = tempDir("guard");
  const { db } = openDatabase(join(dir, "stowage.db"));
  const store = new LocalBlobStore(join(dir, "blobs"));
  const guard = createBlobGuard({ db, store, log: silentLogger, now: () => clock.t });
  return { db, store, guard, clock };
}

const bytes = (s: string) => new TextEncoder().encode(s);
const never = () => false;

describe("blob guard (D15)", () => {
  test("an unreferenced, unpinned blob is deleted; a referenced or pinned one is kept", async () => {
    const { store, guard } = setup();
    await store.put("dfs/a", bytes("a"));
    expect(await guard.deleteIfUnused("dfs/a", () => true)).toBe(false);
    expect(await store.stat("dfs/a")).toBe(1);

    const lease = guard.lease();
    lease.pin(["dfs/a"]);
    expect(await guard.deleteIfUnused("dfs/a", never)).toBe(false);
    expect(await store.stat("dfs/a")).toBe(1);

    lease.release();
    expect(await guard.deleteIfUnused("dfs/a", never)).toBe(true);
    expect(await store.stat("dfs/a")).toBeUndefined();
  });

  test("a pin whose holder stopped renewing stops counting once it expires", async () => {
    const { store, guard, clock } = setup();
    await store.put("dfs/b", bytes("b"));
    guard.lease().pin(["dfs/b"]); // never released: its gateway died
    expect(await guard.deleteIfUnused("dfs/b", never)).toBe(false);
    clock.t += LEASE_MS + 1;
    expect(await guard.deleteIfUnused("dfs/b", never)).toBe(true);
    expect(guard.dropExpiredPins()).toBe(1);
  });

  test("an upload that meets a deletion in progress waits for it, then writes the blob again", async () => {
    const { db, store, guard, clock } = setup();
    await store.put("dfs/c", bytes("c"));
    // A deleter decided and wrote its tombstone; its DELETE has not been sent yet.
    db.insert(blobTombstones).values({ key: "dfs/c", holder: "other", expiresAt: clock.t + LEASE_MS }).run();
    const lease = guard.lease();
    lease.pin(["dfs/c"]);
    let wrote: boolean | undefined;
    const ensuring = guard.ensure("dfs/c", () => bytes("c"), 1).then((w) => (wrote = w));
    await Bun.sleep(100);
    expect(wrote).toBeUndefined(); // still waiting: the blob may vanish at any moment
    await store.delete("dfs/c");
    db.delete(blobTombstones).where(eq(blobTombstones.key, "dfs/c")).run();
    await ensuring;
    expect(wrote).toBe(true);
    expect(await store.stat("dfs/c")).toBe(1);
    lease.release();
  });

  test("a tombstone whose deleter died is finished by the next one to meet it", async () => {
    const { db, store, guard, clock } = setup();
    await store.put("dfs/d", bytes("d"));
    db.insert(blobTombstones).values({ key: "dfs/d", holder: "dead", expiresAt: clock.t - 1 }).run();
    expect(await guard.present("dfs/d")).toBeUndefined(); // the decision to delete stands
    expect(db.select().from(blobTombstones).all()).toEqual([]);
    expect(await guard.ensure("dfs/d", () => bytes("d"), 1)).toBe(true);
    expect(await store.stat("dfs/d")).toBe(1);
  });

  test("finishStaleTombstones completes only expired deletions", async () => {
    const { db, store, guard, clock } = setup();
    await store.put("dfs/e", bytes("e"));
    await store.put("dfs/f", bytes("f"));
    db.insert(blobTombstones).values([
      { key: "dfs/e", holder: "dead", expiresAt: clock.t - 1 },
      { key: "dfs/f", holder: "live", expiresAt: clock.t + LEASE_MS },
    ]).run();
    expect(await guard.finishStaleTombstones()).toBe(1);
    expect(await store.stat("dfs/e")).toBeUndefined();
    expect(await store.stat("dfs/f")).toBe(1);
  });

  test("a deleter held up past half a lease leaves the DELETE to a later pass", async () => {
    const { db, store } = setup();
    const clock = { t: Date.now() };
    let calls = 0;
    // The clock jumps while the decision is being made, as a stalled process would see it.
    const guard = createBlobGuard({ db, store, log: silentLogger, now: () => (calls++ === 0 ? clock.t : clock.t + LEASE_MS) });
    await store.put("dfs/g", bytes("g"));
    expect(await guard.deleteIfUnused("dfs/g", never)).toBe(false);
    expect(await store.stat("dfs/g")).toBe(1);
    expect(db.select().from(blobTombstones).all()).toHaveLength(1);
  });

  test("uploads racing deleters over one key: whenever the rows name the blob, it is there", async () => {
    const { db, store, guard } = setup();
    let refs = 0; // the back-end's rows for this key, as a count
    const key = "dfs/shared";
    for (let round = 0; round < 60; round++) {
      const upload = (async () => {
        const lease = guard.lease();
        lease.pin([key]);
        await guard.ensure(key, () => bytes("shared"), 6);
        refs++; // "commit": the rows reference the blob now
        lease.release();
        await Bun.sleep(round % 3);
        expect(await store.stat(key)).toBe(6);
        refs--; // "release" by the file's owner, then a delete attempt like release() makes
        await guard.deleteIfUnused(key, () => refs > 0);
      })();
      const deleters = Array.from({ length: 3 }, async (_, i) => {
        await Bun.sleep(i);
        await guard.deleteIfUnused(key, () => refs > 0);
      });
      await Promise.all([upload, ...deleters]);
      expect(db.select().from(blobPins).all()).toEqual([]);
      expect(db.select().from(blobTombstones).all()).toEqual([]);
    }
  });
});
