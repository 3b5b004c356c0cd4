/**
 * Cluster leases (src/db/leases.ts, D16) on the database of this pass (SQLite or PostgreSQL): one
 * holder at a time, renewals keep the term, a takeover starts a new epoch no sooner than the
 * expiry and no later than 10 s after the last renewal, a fenced write of a former holder changes
 * nothing, and `singleton` runs its work only while it holds the lease. Clocks are injected: no
 * test waits for a lease to expire.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { aborted, acquire, currentLease, fenceCondition, fenceParams, LEASE_DEFAULTS, release, singleton, type Lease } from "../../src/db/leases.ts";
import { TEST_DB, testDatabase } from "../support/db.ts";
import { postgres } from "../support/postgres.ts";
import { tempDir } from "../support/tmp.ts";

if (TEST_DB === "postgres") await postgres(); // its start takes seconds: not inside a test's timeout
const db = testDatabase(tempDir("leases"));
const sql = db.sql;
afterAll(() => db.close());

let names = 0;
const fresh = () => `lease-${++names}`;

describe(`leases on ${TEST_DB}`, () => {
  test("one holder at a time; renewing keeps the epoch; an expired lease is taken over with the next epoch", async () => {
    const name = fresh();
    const a = await acquire(sql, name, "a", { now: 1_000 });
    expect(a).toEqual({ name, holder: "a", epoch: 1, expiresAt: 1_000 + LEASE_DEFAULTS.ttlMs });
    expect(await acquire(sql, name, "b", { now: 1_001 })).toBeUndefined();
    const ttl = LEASE_DEFAULTS.ttlMs;
    expect(await acquire(sql, name, "a", { now: 4_000 })).toEqual({ name, holder: "a", epoch: 1, expiresAt: 4_000 + ttl });
    // Still a's until the very millisecond its renewal runs out.
    expect(await acquire(sql, name, "b", { now: 4_000 + ttl - 1 })).toBeUndefined();
    expect(await acquire(sql, name, "b", { now: 4_000 + ttl })).toEqual({ name, holder: "b", epoch: 2, expiresAt: 4_000 + 2 * ttl });
    expect(await acquire(sql, name, "a", { now: 4_000 + ttl + 1 })).toBeUndefined();
    expect(await currentLease(sql, name)).toEqual({ holder: "b", epoch: 2, expiresAt: 4_000 + 2 * ttl });
  });

  test("release hands the lease over at once, as a new term; a stale release changes nothing", async () => {
    const name = fresh();
    const a = (await acquire(sql, name, "a", { now: 0 })) as Lease;
    await release(sql, a);
    const b = (await acquire(sql, name, "b", { now: 1 })) as Lease;
    expect(b.epoch).toBe(2);
    await release(sql, a); // a's term is over: this must not free b's lease
    expect(await acquire(sql, name, "c", { now: 2 })).toBeUndefined();
  });

  test("holders racing for a free lease: exactly one wins", async () => {
    const name = fresh();
    const holders = Array.from({ length: 12 }, (_, i) => `h${i}`);
    const won = (await Promise.all(holders.map((h) => acquire(sql, name, h, { now: 100 })))).filter((l) => l !== undefined);
    expect(won).toHaveLength(1);
    expect(won[0]?.epoch).toBe(1);
    expect((await currentLease(sql, name))?.holder).toBe(won[0]?.holder as string);
  });

  test("a fenced write is refused once the lease changed hands, and only then", async () => {
    const name = fresh();
    const key = `fenced-${name}`;
    const write = (lease: Lease, value: string) =>
      sql.run(`INSERT INTO app_state (key, value, updated_at) SELECT CAST($1 AS TEXT), CAST($2 AS TEXT), 0 WHERE ${fenceCondition(3)} ON CONFLICT (key) DO UPDATE SET value = excluded.value`, [key, value, ...fenceParams(lease)]);
    const a = (await acquire(sql, name, "a", { now: 0 })) as Lease;
    expect(await write(a, "by a")).toBe(1);
    const b = (await acquire(sql, name, "b", { now: 60_000 })) as Lease;
    expect(await write(a, "by a, too late")).toBe(0);
    expect(await write(b, "by b")).toBe(1);
    expect(await sql.get("SELECT value FROM app_state WHERE key = $1", [key])).toEqual({ value: "by b" });
  });
});

describe(`singleton on ${TEST_DB}`, () => {
  /** A gateway's runner on the shared fake clock; `runs` lists the epochs it ran in, `live` whether it runs now. */
  function gateway(name: string, holder: string, now: () => number) {
    const state = { runs: [] as number[], live: false };
    const runner = singleton(
      sql,
      name,
      holder,
      async ({ lease, signal }) => {
        state.runs.push(lease.epoch);
        state.live = true;
        await aborted(signal);
        state.live = false;
      },
      { now },
    );
    return Object.assign(state, { runner });
  }

  test("two gateways: only one runs; when it dies the other runs within 10 s, and the dead one stops when it wakes", async () => {
    const name = fresh();
    let clock = 1_000_000;
    const now = () => clock;
    const a = gateway(name, "a", now);
    const b = gateway(name, "b", now);
    expect(await a.runner.tick()).toBe(LEASE_DEFAULTS.renewMs);
    await b.runner.tick();
    expect([a.live, b.live, a.runs, b.runs]).toEqual([true, false, [1], []]);
    expect(b.runner.held()).toBeUndefined();

    // Renewals keep the one term going.
    for (let i = 0; i < 3; i++) {
      clock += LEASE_DEFAULTS.renewMs;
      await a.runner.tick();
      await b.runner.tick();
    }
    expect([a.runs, b.runs, a.runner.held()?.epoch]).toEqual([[1], [], 1]);

    // a dies (no more renewals); b tries again when it says to.
    const death = clock;
    let waited = 0;
    for (let i = 0; i < 10 && !b.live; i++) {
      const wait = await b.runner.tick();
      if (!b.live) {
        clock += wait;
        waited += wait;
      }
    }
    expect(b.runs).toEqual([2]);
    expect(clock - death).toBeLessThanOrEqual(10_000);
    expect(waited).toBeGreaterThanOrEqual(LEASE_DEFAULTS.ttlMs); // not before a's lease ran out
    // a comes back: its renewal fails, its run ends; b runs on.
    expect(a.live).toBe(true);
    await a.runner.tick();
    expect([a.live, a.runner.held(), b.live]).toEqual([false, undefined, true]);
    await Promise.all([a.runner.stop(), b.runner.stop()]);
    expect(b.live).toBe(false);
  });

  test("held() ends by the holder's own clock even before anyone takes over", async () => {
    const name = fresh();
    let clock = 0;
    const a = gateway(name, "a", () => clock);
    await a.runner.tick();
    clock = LEASE_DEFAULTS.ttlMs - 1;
    expect(a.runner.held()?.epoch).toBe(1);
    clock = LEASE_DEFAULTS.ttlMs;
    expect(a.runner.held()).toBeUndefined();
    await a.runner.stop();
  });

  test("stop ends the run and releases: another gateway takes over at once", async () => {
    const name = fresh();
    const clock = 50;
    const a = gateway(name, "a", () => clock);
    const b = gateway(name, "b", () => clock);
    await a.runner.tick();
    await a.runner.stop();
    expect(a.live).toBe(false);
    await b.runner.tick();
    expect([b.live, b.runs]).toEqual([true, [2]]);
    await b.runner.stop();
  });

  test("a run that fails is started again at the next renewal, in the same term", async () => {
    const name = fresh();
    let calls = 0;
    const runner = singleton(sql, name, "a", async () => {
      calls++;
      throw new Error("boom");
    }, { now: () => 0 });
    await runner.tick();
    await Bun.sleep(0); // let the failed run settle (it is not awaited by tick)
    await runner.tick();
    expect(calls).toBe(2);
    expect(runner.held()?.epoch).toBe(1);
    await runner.stop();
  });

  test("start() renews on its own timer and runs the work; stop() ends it", async () => {
    const name = fresh();
    let started!: (epoch: number) => void;
    const running = new Promise<number>((ok) => (started = ok));
    let ended = false;
    const runner = singleton(
      sql,
      name,
      "timer",
      async ({ lease, signal }) => {
        started(lease.epoch);
        await aborted(signal);
        ended = true;
      },
      { renewMs: 20, ttlMs: 1_000 },
    );
    runner.start();
    expect(await running).toBe(1);
    await runner.stop();
    expect(ended).toBe(true);
    expect((await currentLease(sql, name))?.expiresAt).toBe(0);
  });
});
