/**
 * An upload's content between the back-end's `put` and its file row (backend.ts's PendingPut),
 * the same steps for dfs and ipfs.
 */
import type { Lease } from "../blob/guard.ts";
import { type Queryable, together } from "../db/sql.ts";
import type { Logger } from "../log.ts";
import type { Meter } from "../quota/meter.ts";
import type { PendingPut } from "./backend.ts";
import type { AddHook } from "./files.ts";

/**
 * The PendingPut of content whose blobs `lease` keeps until its rows reference them (dfs's put and
 * compose, ipfs's put): `commit` writes its rows once (in a transaction of its own, or `commitIn`
 * the caller's, with the lease's pins dropped there too), then lets the lease go (a second commit
 * after a failure there must not count the content twice); `abort` runs `discard` once; a commit
 * after an abort is refused with `aborted()`.
 */
export function pendingPut(
  cid: string,
  size: number,
  lease: Lease,
  aborted: () => Error,
  steps: { commit(): Promise<void>; commitIn(tx: Queryable): Promise<void>; committed?(): Promise<void>; discard(): Promise<void> },
): PendingPut {
  /** "written": `commitIn` wrote the rows and dropped the pins in a transaction that is the caller's to commit. */
  let state: "open" | "written" | "committed" | "aborted" = "open";
  return {
    cid,
    size,
    async commit() {
      if (state === "committed") return;
      if (state === "aborted") throw aborted();
      const unpinned = state === "written";
      if (!unpinned) await steps.commit();
      state = "committed";
      await lease.release({ unpinned });
      await steps.committed?.();
    },
    async commitIn(tx) {
      if (state === "aborted") throw aborted();
      if (state === "committed") throw new Error(`content ${cid} is committed already`);
      await steps.commitIn(tx);
      await lease.unpinIn(tx);
      state = "written";
    },
    async abort() {
      if (state === "committed" || state === "aborted") return;
      state = "aborted";
      await steps.discard();
    },
  };
}

/** What the file row's transaction uses of an upload's quota meter. */
type UploadQuota = Pick<Awaited<ReturnType<Meter["beginUpload"]>>, "commit" | "release">;

/**
 * Records `pending` as a file: `add` writes the file row in a transaction and runs the hook it is
 * handed there, so the content's rows (and the release of its pins), `claim` (an upload's claims),
 * the quota's exact check (D14) with `moved` bytes of traffic, and `settle` (an upload's voucher
 * count) commit with the file row, or not at all (issue 10: an upload commits twice where it
 * committed seven). A refusal of `claim` comes before the quota's. When it fails, the quota's
 * holds go first (a refused upload never counts against another's check), then nothing of the
 * content is kept unless something else references it.
 */
export async function recordFile<T>(pending: PendingPut, add: (hook: AddHook) => Promise<T>, opts: { quota?: UploadQuota; moved: number; claim?: (tx: Queryable) => Promise<void>; settle?: (tx: Queryable) => Promise<void>; log: Logger }): Promise<T> {
  const counted = opts.quota?.commit(pending.size, opts.moved);
  let out: T;
  try {
    out = await add({
      // The content's rows touch no row the account's lock guards: they go before it (AddHook).
      prepare: async (tx) => void (await together(pending.commitIn(tx), counted?.prepare(tx))),
      ...(counted && { lock: counted.lock }),
      // Under the lock, in the row's round trip: the claims lock only their session's row, after
      // the account's, as every transaction that takes both does. The voucher's count needs
      // nothing the quota's check answers (a refusal rolls it back).
      settle: async (tx) => void (await together(opts.claim?.(tx), counted?.settle(tx), opts.settle?.(tx))),
    });
  } catch (err) {
    await opts.quota?.release();
    await pending.abort().catch((e) => opts.log.error("dropping a refused upload's content failed", { cid: pending.cid, err: (e as Error).message }));
    throw err;
  }
  await pending.commit(); // the rows are in: this only lets go of what kept the blobs meanwhile
  return out;
}
