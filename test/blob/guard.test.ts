/**
 * The deletion protocol of D15 on a real database (SQLite, or PostgreSQL on the
 * STOWAGE_TEST_DB=postgres pass) and real blob files: pins keep blobs, a
 * tombstone makes an upload wait and write again, a dead deleter's tombstone is finished, and an
 * upload racing deleters over one key never ends with its rows naming a missing blob.
 */
import { afterAll, describe, expect, jest, test } from "bun:test";
import { join } from "node:path";
import { createBlobGuard, LEASE_MS, RIDE_WAIT_MS } from "../../src/blob/guard.ts";
import type { Queryable, Sql } from "../../src/db/sql.ts";
import { LocalBlobStore } from "../../src/blob/local.ts";
import { silentLogger } from "../../src/log.ts";
import { postgresSql, testDatabase } from "../support/db.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";

/** `on`: PostgreSQL whatever this pass's database is, for a race only PostgreSQL can have. */
function databaseFor(dir: string, on?: "postgres") {
  if (on !== "postgres") return testDatabase(dir);
  const sql = postgresSql();
  return { sql, close: () => sql.close() };
}

function setup(clock = { t: Date.now() }, on?: "postgres", rideWaitMs?: number) {
  const dir = tempDir("guard");
  const database = databaseFor(dir, on);
  const { sql } = database;
  const store = new LocalBlobStore(join(dir, "blobs"));
  const writes: Promise<number>[] = [];
  /** The statements the guard reads with outside a transaction. */
  const reads: string[] = [];
  /** Every write the guard makes is kept, so a test can wait for the ones its timers started. */
  const watched: Sql = {
    ...sql,
    all: (text, params) => (reads.push(text), sql.all(text, params)),
    get: (text, params) => (reads.push(text), sql.get(text, params)),
    tx: sql.tx.bind(sql),
    close: sql.close.bind(sql),
    run: (text, params) => {
      const write = sql.run(text, params);
      writes.push(write);
      return write;
    },
  };
  const guard = createBlobGuard({ sql: watched, store, log: silentLogger, now: () => clock.t, rideWaitMs });
  afterAll(async () => {
    await guard.close(); // leases left open on purpose stop renewing before their database closes
    await database.close();
  });
  return { sql, store, guard, clock, writes, reads };
}

const bytes = (s: string) => new TextEncoder().encode(s);
const never = async () => false;
const TOMBSTONE = "INSERT INTO blob_tombstones (key, holder, expires_at) VALUES ($1, $2, $3)";

describe("blob guard (D15)", () => {
  test("an unreferenced, unpinned blob is deleted; a referenced or pinned one is kept", async () => {
    const { store, guard } = setup();
    await store.put("dfs/a", bytes("a"));
    expect(await guard.deleteIfUnused("dfs/a", async () => true)).toBe(false);
    expect(await store.stat("dfs/a")).toBe(1);

    const lease = guard.lease();
    await lease.pin(["dfs/a"]);
    expect(await guard.deleteIfUnused("dfs/a", never)).toBe(false);
    expect(await store.stat("dfs/a")).toBe(1);

    await lease.release();
    expect(await guard.deleteIfUnused("dfs/a", never)).toBe(true);
    expect(await store.stat("dfs/a")).toBeUndefined();
  });

  // On PostgreSQL each transaction and each statement outside one is a commit: a release of
  // many chunks, or the releases of parallel uploads, decide in one and drop their tombstones in
  // one, each key as it would alone (kept when referenced or pinned, deleted once).
  test("deletions asked for at once are decided in one transaction and their tombstones dropped in one statement", async () => {
    const { sql, store, writes } = setup();
    let decisions = 0;
    const tx = sql.tx.bind(sql);
    const guarded = createBlobGuard({ sql: { ...sql, tx: (fn, opts) => (decisions++, tx(fn, opts)), run: (text, params) => { const w = sql.run(text, params); writes.push(w); return w; } }, store, log: silentLogger });
    const keys = ["dfs/m1", "dfs/m2", "dfs/m3", "dfs/m4", "dfs/m5"];
    for (const k of keys) await store.put(k, bytes(k));
    const lease = guarded.lease();
    await lease.pin(["dfs/m4"]);
    decisions = 0;
    const before = writes.length;
    const referenced = async (k: string) => k === "dfs/m3";
    const results = await Promise.all([...keys, "dfs/m1"].map((k) => guarded.deleteIfUnused(k, () => referenced(k))));
    // m1 twice: one of the two deletes it.
    expect(results.slice(0, 5)).toEqual([results[0] as boolean, true, false, false, true]);
    expect([results[0], results[5]].filter(Boolean)).toHaveLength(1);
    expect(decisions).toBe(1);
    expect(writes.length - before).toBe(1); // the tombstones' drop
    expect(await Promise.all(keys.map((k) => store.stat(k)))).toEqual([undefined, undefined, 6, 6, undefined]);
    expect(await sql.all("SELECT key FROM blob_tombstones")).toEqual([]);
    await lease.release();
    guarded.close();
  });

  // Releases that keep coming (parallel uploads replacing files): each batch would be two commits,
  // its decision and its tombstones' drop; the drop rides in the next batch's decision instead.
  test("a deletion asked for while a batch runs: its decision drops that batch's tombstones, none are left", async () => {
    const { sql, store, writes } = setup();
    let decisions = 0;
    const tx = sql.tx.bind(sql);
    const guarded = createBlobGuard({ sql: { ...sql, tx: (fn, opts) => (decisions++, tx(fn, opts)), run: (text, params) => { const w = sql.run(text, params); writes.push(w); return w; } }, store, log: silentLogger });
    for (const k of ["dfs/n1", "dfs/n2"]) await store.put(k, bytes(k));
    decisions = 0;
    const before = writes.length;
    let second: Promise<boolean> | undefined;
    // Asked for inside the first batch's decision: it waits for the next batch.
    const first = guarded.deleteIfUnused("dfs/n1", async () => {
      second ??= guarded.deleteIfUnused("dfs/n2", never);
      return false;
    });
    expect(await first).toBe(true);
    expect(await second).toBe(true);
    expect(decisions).toBe(2);
    expect(writes.length - before).toBe(1); // the last batch's drop alone
    expect(await Promise.all(["dfs/n1", "dfs/n2"].map((k) => store.stat(k)))).toEqual([undefined, undefined]);
    expect(await sql.all("SELECT key FROM blob_tombstones")).toEqual([]);
    guarded.close();
  });

  // Uploads that keep coming (parallel uploads replacing files): each deletion would cost a
  // decision and a drop of its tombstones, two commits; both ride in the pin transactions the
  // uploads make anyway, after their pins.
  test("deletions ride in the next pin transaction, after its pins; their tombstones' drop in the one after", async () => {
    const { sql, store, writes } = setup();
    const transactions: string[] = [];
    const tx = sql.tx.bind(sql);
    const watched: Sql = { ...sql, tx: (fn, opts) => (transactions.push(opts?.durable === false ? "pin" : "other"), tx(fn, opts)), run: (text, params) => { const w = sql.run(text, params); writes.push(w); return w; } };
    // A wait no slow machine outlasts: whatever is decided or dropped here rides in a pin.
    const guarded = createBlobGuard({ sql: watched, store, log: silentLogger, rideWaitMs: 60_000 });
    await guarded.lease().pin(["dfs/earlier"]); // uploads were coming: deletions wait for the next
    transactions.length = 0;
    for (const k of ["dfs/r1", "dfs/r2", "dfs/r3"]) await store.put(k, bytes(k));
    const before = writes.length;
    const deleted = ["dfs/r1", "dfs/r2", "dfs/r3"].map((k) => guarded.deleteIfUnused(k, never, { ride: true }));
    // An upload pins r3 (content it found present) and another key: its pins come first, so the
    // decision it carries keeps r3.
    const lease = guarded.lease();
    await lease.pin(["dfs/r3", "dfs/fresh"]);
    expect(await Promise.all(deleted)).toEqual([true, true, false]);
    expect(await Promise.all(["dfs/r1", "dfs/r2", "dfs/r3"].map((k) => store.stat(k)))).toEqual([undefined, undefined, 6]);
    expect(lease.clearOf("dfs/r3")).toBe(true);
    // The DELETEs went; their tombstones wait for the next transaction: another upload's pin.
    expect((await sql.all<{ key: string }>("SELECT key FROM blob_tombstones ORDER BY key")).map((r) => r.key)).toEqual(["dfs/r1", "dfs/r2"]);
    const next = guarded.lease();
    await next.pin(["dfs/r1"]); // the same content again: the drop goes first, so no tombstone holds it up
    expect(next.clearOf("dfs/r1")).toBe(true);
    expect(await sql.all("SELECT key FROM blob_tombstones")).toEqual([]);
    expect(transactions).toEqual(["pin", "pin"]);
    expect(writes.length - before).toBe(0); // not a statement of their own either
    await lease.release();
    await next.release();
    await guarded.close();
  });

  // A gateway that goes quiet: no pin to ride in comes, so the decision runs by itself; right
  // away when none came lately, after a short wait while uploads were coming.
  test("with no pin transaction coming, a deletion is decided by itself", async () => {
    const { sql, store } = setup();
    const guarded = createBlobGuard({ sql, store, log: silentLogger });
    for (const k of ["dfs/q1", "dfs/q2"]) await store.put(k, bytes(k));
    expect(await guarded.deleteIfUnused("dfs/q1", never)).toBe(true);
    const lease = guarded.lease();
    await lease.pin(["dfs/busy"]); // an upload just now
    const started = performance.now();
    expect(await guarded.deleteIfUnused("dfs/q2", never, { ride: true })).toBe(true);
    expect(performance.now() - started).toBeGreaterThanOrEqual(RIDE_WAIT_MS / 2); // it waited for a pin that never came
    expect(await Promise.all(["dfs/q1", "dfs/q2"].map((k) => store.stat(k)))).toEqual([undefined, undefined]);
    expect(await sql.all("SELECT key FROM blob_tombstones")).toEqual([]);
    await lease.release();
    await guarded.close();
  });

  // A DELETE's answer, a refused upload's clean-up: someone waits for these, so they do not wait
  // for a pin to ride in, however busy the gateway.
  test("a deletion someone waits for is decided at once, while uploads are coming", async () => {
    const { sql, store } = setup();
    const guarded = createBlobGuard({ sql, store, log: silentLogger, rideWaitMs: 60_000 });
    await store.put("dfs/w", bytes("w"));
    const lease = guarded.lease();
    await lease.pin(["dfs/busy"]); // an upload just now: a rider would wait for the next
    const started = performance.now();
    expect(await guarded.deleteIfUnused("dfs/w", never)).toBe(true);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(await store.stat("dfs/w")).toBeUndefined();
    expect(await sql.all("SELECT key FROM blob_tombstones")).toEqual([]);
    await lease.release();
    await guarded.close();
  });

  // The decision's part of a pin transaction fails it whole (PostgreSQL aborts the transaction at
  // the failed statement): the pin goes again without it, the deletion is decided by itself.
  test("a decision that fails inside a pin transaction fails neither the upload nor the deletion", async () => {
    const { sql, store, guard } = setup();
    await store.put("dfs/s", bytes("s"));
    let calls = 0;
    const deleted = guard.deleteIfUnused(
      "dfs/s",
      async (tx) => {
        if (calls++ === 0) await tx.get("SELECT nope FROM no_such_table");
        return false;
      },
      { ride: true },
    );
    const lease = guard.lease();
    await lease.pin(["dfs/other"]);
    expect(lease.clearOf("dfs/other")).toBe(true);
    expect(await sql.all<{ key: string }>("SELECT key FROM blob_pins WHERE holder = $1", [lease.holder])).toEqual([{ key: "dfs/other" }]);
    expect(await deleted).toBe(true);
    // Decided again after the failure: once by itself, or more when PostgreSQL retries it (its
    // predicate locks and the pin's share the tables' one index page here).
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(await store.stat("dfs/s")).toBeUndefined();
    await lease.release();
  });

  test("close() decides and finishes the deletions still waiting for a pin transaction", async () => {
    const { sql, store } = setup();
    const guarded = createBlobGuard({ sql, store, log: silentLogger });
    await store.put("dfs/c", bytes("c"));
    const deleted = guarded.deleteIfUnused("dfs/c", never, { ride: true });
    await guarded.close();
    expect(await deleted).toBe(true);
    expect(await store.stat("dfs/c")).toBeUndefined();
    expect(await sql.all("SELECT key FROM blob_tombstones")).toEqual([]);
  });

  test("a pin whose holder stopped renewing stops counting once it expires", async () => {
    const { store, guard, clock } = setup();
    await store.put("dfs/b", bytes("b"));
    await guard.lease().pin(["dfs/b"]); // never released: its gateway died
    expect(await guard.deleteIfUnused("dfs/b", never)).toBe(false);
    clock.t += LEASE_MS + 1;
    expect(await guard.deleteIfUnused("dfs/b", never)).toBe(true);
    expect(await guard.dropExpiredPins()).toBe(1);
  });

  test("an open lease renews its pins every 10 s; once the guard is closed none renews and no lease starts", async () => {
    const { store, guard, clock, writes } = setup();
    await store.put("dfs/r", bytes("r"));
    jest.useFakeTimers();
    try {
      await guard.lease().pin(["dfs/r"]); // an upload still running
      const renewedBy = async (ms: number) => {
        const before = writes.length;
        jest.advanceTimersByTime(ms);
        await Promise.all(writes.slice(before));
        return writes.length - before;
      };
      clock.t += LEASE_MS - 1_000;
      expect(await renewedBy(10_000)).toBe(1);
      clock.t += 2_000; // past the first expiry: the renewal keeps it
      expect(await guard.deleteIfUnused("dfs/r", never)).toBe(false);

      await guard.close();
      expect(await renewedBy(60_000)).toBe(0);
      expect(() => guard.lease()).toThrow("blob guard closed");
      clock.t += LEASE_MS; // its pins lapse as a dead gateway's do
      expect(await guard.deleteIfUnused("dfs/r", never)).toBe(true);
    } finally {
      jest.useRealTimers();
    }
  });

  test("a lease released while a pin is still being written leaves no pin behind", async () => {
    const { sql, guard } = setup();
    const lease = guard.lease();
    const pinning = lease.pin(["dfs/p1", "dfs/p2"]);
    await lease.release(); // an upload that failed at once: it does not wait for its own pin
    await pinning;
    expect(await sql.all("SELECT key FROM blob_pins")).toEqual([]);
  });

  // unseen: the caller's rows do not name the key, so ensure() writes without looking first; it
  // still waits the deletion out, or the deleter's DELETE could land after its PUT.
  test.each([false, true])("an upload that meets a deletion in progress waits for it, then writes the blob again (unseen: %p)", async (unseen) => {
    const { sql, store, guard, clock } = setup();
    await store.put("dfs/c", bytes("c"));
    // A deleter decided and wrote its tombstone; its DELETE has not been sent yet.
    await sql.run(TOMBSTONE, ["dfs/c", "other", clock.t + LEASE_MS]);
    const lease = guard.lease();
    await lease.pin(["dfs/c"]);
    let wrote: boolean | undefined;
    // Its lease's pin met the tombstone: handing it over changes nothing.
    const ensuring = guard.ensure("dfs/c", () => bytes("c"), 1, { unseen, lease }).then((w) => (wrote = w));
    await Bun.sleep(100);
    expect(wrote).toBeUndefined(); // still waiting: the blob may vanish at any moment
    await store.delete("dfs/c");
    await sql.run("DELETE FROM blob_tombstones WHERE key = $1", ["dfs/c"]);
    await ensuring;
    expect(wrote).toBe(true);
    expect(await store.stat("dfs/c")).toBe(1);
    await lease.release();
  });

  // A deleter decides by reading the pins (in one transaction with its tombstone): once a pin has
  // committed and found no tombstone, none can appear while it holds.
  test.each([false, true])("an upload whose pin found no deletion in progress does not look for one again (unseen: %p)", async (unseen) => {
    const { store, guard, reads } = setup();
    if (!unseen) await store.put("dfs/k", bytes("k"));
    const lease = guard.lease();
    await lease.pin(["dfs/k"]);
    expect(lease.clearOf("dfs/k")).toBe(true);
    expect(lease.clearOf("dfs/other")).toBe(false); // not pinned by it
    expect(await guard.ensure("dfs/k", () => bytes("k"), 1, { unseen, lease })).toBe(unseen);
    expect(await store.stat("dfs/k")).toBe(1);
    expect(reads.filter((text) => text.includes("blob_tombstones"))).toEqual([]);
    // Without the lease, ensure cannot know: it looks.
    await guard.ensure("dfs/k", () => bytes("k"), 1, { unseen });
    expect(reads.filter((text) => text.includes("blob_tombstones"))).toHaveLength(1);
    await lease.release();
    expect(lease.clearOf("dfs/k")).toBe(false);
  });

  // dfs reads whether a row references the chunk this way: no round trip of its own on PostgreSQL.
  test("what a pin runs alongside reads in the pin's transaction, after the pins, and answers with it", async () => {
    const { guard, reads } = setup();
    const lease = guard.lease();
    const look = async (q: Queryable) => (await q.get<{ n: number }>("SELECT COUNT(*) AS n FROM blob_pins WHERE holder = $1", [lease.holder]))?.n;
    expect(await lease.pin(["dfs/x", "dfs/y"], look)).toBe(2); // the transaction's own pins
    expect(reads).toEqual([]); // nothing read outside it
    expect(lease.clearOf("dfs/x")).toBe(true);
    // Nothing fresh to pin: it runs by itself.
    expect(await lease.pin(["dfs/x"], look)).toBe(2);
    expect(reads).toHaveLength(1);
    await lease.release();
  });

  test("a tombstone whose deleter died is finished by the next one to meet it", async () => {
    const { sql, store, guard, clock } = setup();
    await store.put("dfs/d", bytes("d"));
    await sql.run(TOMBSTONE, ["dfs/d", "dead", clock.t - 1]);
    expect(await guard.present("dfs/d")).toBeUndefined(); // the decision to delete stands
    expect(await sql.all("SELECT key FROM blob_tombstones")).toEqual([]);
    expect(await guard.ensure("dfs/d", () => bytes("d"), 1)).toBe(true);
    expect(await store.stat("dfs/d")).toBe(1);
  });

  test("finishStaleTombstones completes only expired deletions", async () => {
    const { sql, store, guard, clock } = setup();
    await store.put("dfs/e", bytes("e"));
    await store.put("dfs/f", bytes("f"));
    await sql.run(TOMBSTONE, ["dfs/e", "dead", clock.t - 1]);
    await sql.run(TOMBSTONE, ["dfs/f", "live", clock.t + LEASE_MS]);
    expect(await guard.finishStaleTombstones()).toBe(1);
    expect(await store.stat("dfs/e")).toBeUndefined();
    expect(await store.stat("dfs/f")).toBe(1);
  });

  test("a deleter held up past half a lease leaves the DELETE to a later pass", async () => {
    const { sql, store } = setup();
    const clock = { t: Date.now() };
    let calls = 0;
    // The clock jumps while the decision is being made, as a stalled process would see it.
    const guard = createBlobGuard({ sql, store, log: silentLogger, now: () => (calls++ === 0 ? clock.t : clock.t + LEASE_MS) });
    await store.put("dfs/g", bytes("g"));
    expect(await guard.deleteIfUnused("dfs/g", never)).toBe(false);
    expect(await store.stat("dfs/g")).toBe(1);
    expect(await sql.all("SELECT key FROM blob_tombstones")).toHaveLength(1);
  });

  // On PostgreSQL in every pass: on SQLite the pin would wait for the open decision (writers run
  // one at a time), so there is nothing to race.
  test("on PostgreSQL, a pin taken while a deleter is deciding: the deleter keeps the blob the upload found", async () => {
    const { sql, store, guard } = setup(undefined, "postgres");
    await store.put("dfs/h", bytes("h"));
    let paused = false;
    let found: number | undefined;
    const deleted = await guard.deleteIfUnused("dfs/h", async (tx) => {
      await tx.get("SELECT 1 AS one FROM dfs_chunks WHERE hash = $1", ["dfs/h"]); // the decision's snapshot
      if (!paused) {
        paused = true;
        // An upload pins the key and looks, while the decision is open: no tombstone yet.
        await guard.lease().pin(["dfs/h"]);
        found = await guard.present("dfs/h");
      }
      return false;
    });
    expect(found).toBe(1); // the upload relies on the blob...
    expect(deleted).toBe(false); // ...so the decision, run again, sees the pin
    expect(await store.stat("dfs/h")).toBe(1);
    expect(await sql.all("SELECT key FROM blob_tombstones")).toEqual([]);
  });

  test("uploads racing deleters over one key: whenever the rows name the blob, it is there", async () => {
    // A short wait for a pin to ride in: some decisions ride in the upload's pin, others run by themselves.
    const { sql, store, guard } = setup(undefined, undefined, 5);
    const key = "dfs/shared";
    // The back-end's rows for this key, as dfs keeps them (a chunk row with a reference count).
    const referenced = async (q: Queryable) => (await q.get("SELECT 1 AS one FROM dfs_chunks WHERE hash = $1", [key])) !== undefined;
    const commit = () => sql.run("INSERT INTO dfs_chunks (hash, size, refs) VALUES ($1, 6, 1) ON CONFLICT (hash) DO UPDATE SET refs = dfs_chunks.refs + 1", [key]);
    const release = () =>
      sql.tx(async (tx) => {
        await tx.run("UPDATE dfs_chunks SET refs = refs - 1 WHERE hash = $1", [key]);
        await tx.run("DELETE FROM dfs_chunks WHERE hash = $1 AND refs <= 0", [key]);
      }, { isolation: "read committed" });
    for (let round = 0; round < 60; round++) {
      const upload = (async () => {
        const lease = guard.lease();
        await lease.pin([key]);
        await guard.ensure(key, () => bytes("shared"), 6, { unseen: round % 2 === 0 }); // both ways of writing
        await commit(); // the rows reference the blob now
        await lease.release();
        await Bun.sleep(round % 3);
        expect(await store.stat(key)).toBe(6);
        await release(); // by the file's owner, then a delete attempt as release() makes
        await guard.deleteIfUnused(key, referenced);
      })();
      const deleters = Array.from({ length: 3 }, async (_, i) => {
        await Bun.sleep(i);
        await guard.deleteIfUnused(key, referenced);
      });
      await Promise.all([upload, ...deleters]);
      expect(await sql.all("SELECT key FROM blob_pins")).toEqual([]);
      // A decision that rode in the upload's pin hands its tombstones' drop on: it comes.
      await until("tombstones dropped", () => sql.all("SELECT key FROM blob_tombstones"), (rows) => rows.length === 0, 5_000);
    }
  });
});
