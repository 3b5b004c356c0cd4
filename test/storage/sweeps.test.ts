/**
 * The blob sweeps as one cluster singleton (src/storage/sweeps.ts, D16) over a real database of
 * this pass: of two gateways, one sweeps; a stop that arrives while a pass runs ends the run
 * once the pass returns, instead of waiting for the next pass's hour.
 */
import { afterAll, expect, test } from "bun:test";
import { silentLogger } from "../../src/log.ts";
import { clusterSweeps, type Sweepable } from "../../src/storage/sweeps.ts";
import { testDatabase } from "../support/db.ts";
import { tempDir } from "../support/tmp.ts";

const db = testDatabase(tempDir("sweeps"));
afterAll(() => db.close());

/** A back-end whose passes are counted and, when `gate` is set, wait for it. */
function backend(kind: string) {
  const b = { kind, passes: 0, gate: undefined as Promise<void> | undefined, started: Promise.withResolvers<void>() };
  const sweepable: Sweepable = {
    kind,
    async sweep() {
      b.passes++;
      b.started.resolve();
      await b.gate;
      return { held: 0 };
    },
  };
  return { b, sweepable };
}

test("of two gateways over one database, one sweeps; a stop during its pass ends it once the pass returns", async () => {
  const one = backend("dfs");
  const two = backend("dfs");
  let open!: () => void;
  one.b.gate = two.b.gate = new Promise<void>((ok) => (open = ok));
  const a = clusterSweeps({ sql: db.sql, holder: "gateway-a", backends: [one.sweepable], log: silentLogger });
  const b = clusterSweeps({ sql: db.sql, holder: "gateway-b", backends: [two.sweepable], log: silentLogger });
  await a.tick();
  await b.tick();
  await one.b.started.promise; // a's pass runs and waits at the gate
  expect(two.b.passes).toBe(0);

  const stopped = a.stop();
  open(); // the pass returns after the stop began
  await stopped;
  expect(one.b.passes).toBe(1);
  // b takes over at its next attempt, the lease released by a's stop.
  await b.tick();
  await two.b.started.promise;
  expect(two.b.passes).toBe(1);
  await b.stop();
});
