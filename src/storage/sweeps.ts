/**
 * The orphan sweeps of both back-ends as one cluster singleton (D15, D16): they run on the gateway
 * holding the "blob-sweeps" lease, never on two at once. A pass at once when the lease is taken
 * (a start, or a takeover from a dead gateway), one more a guard lease later when the first kept
 * blobs for their pins (a killed upload's pins lapse by then; a live upload's have committed or
 * aborted), then one pass every `everyMs`. A pass stops listing as soon as the lease is lost.
 *
 * @example
 *   const sweeps = clusterSweeps({ sql, holder: gatewayId(dataDir), backends: [dfs, ipfs], log })
 *   sweeps.start()
 *   await sweeps.stop()
 */
import { LEASE_MS } from "../blob/guard.ts";
import { singleton, type Singleton } from "../db/leases.ts";
import type { Queryable } from "../db/sql.ts";
import type { Logger } from "../log.ts";

/** One back-end's pass, reduced to what this runner needs: how many blobs it kept for a live pin. */
export interface Sweepable {
  readonly kind: string;
  sweep(opts: { stopped: () => boolean }): Promise<{ held: number }>;
}

export const SWEEP_LEASE = "blob-sweeps";
const DEFAULT_EVERY_MS = 60 * 60_000;

export function clusterSweeps(o: { sql: Queryable; holder: string; backends: readonly Sweepable[]; log: Logger; everyMs?: number }): Singleton {
  const everyMs = o.everyMs ?? DEFAULT_EVERY_MS;
  return singleton(
    o.sql,
    SWEEP_LEASE,
    o.holder,
    async ({ signal }) => {
      const stopped = () => signal.aborted;
      let first = true;
      while (!signal.aborted) {
        let kept = 0;
        for (const b of o.backends) {
          if (signal.aborted) return;
          try {
            kept += (await b.sweep({ stopped })).held;
          } catch (err) {
            o.log.error("sweep failed", { backend: b.kind, err: (err as Error).message });
          }
        }
        await pause(first && kept > 0 ? LEASE_MS + 1_000 : everyMs, signal);
        first = false;
      }
    },
    { log: o.log },
  );
}

/** Resolves after `ms`, or at once when `signal` is (or gets) aborted: an abort event that
 * already fired will not fire again. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((ok) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      ok();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
