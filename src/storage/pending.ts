/**
 * An upload's content between the back-end's `put` and its file row (backend.ts's PendingPut),
 * the same steps for dfs and ipfs.
 */
import type { Lease } from "../blob/guard.ts";
import { type Queryable, together } from "../db/sql.ts";
import type { Logger } from "../log.ts";
import type { Meter } from "../quota/meter.ts";
import type { AfterRelease, PendingPut } from "./backend.ts";
import type { Expectation, Files, Participant } from "./files.ts";

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
  steps: PendingSteps,
): PendingPut {
  return { cid, size, ...pendingContent(cid, lease, aborted, steps) };
}

/** What a back-end's pending content does at each step (see `pendingPut`). */
export interface PendingSteps {
  commit(): Promise<void>;
  commitIn(tx: Queryable): Promise<void>;
  committed?(): Promise<void>;
  discard(): Promise<void>;
}

/** Pending content's steps, once each, in order (`pendingPut`'s, and a CAR import's of several
 * roots under one lease); `cid` names it in errors. */
export function pendingContent(cid: string, lease: Lease, aborted: () => Error, steps: PendingSteps): Pick<PendingPut, "commit" | "commitIn" | "abort"> {
  /** "written": `commitIn` wrote the rows and dropped the pins in a transaction that is the caller's to commit. */
  let state: "open" | "written" | "committed" | "aborted" = "open";
  return {
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
      // Side by side (one round trip on PostgreSQL): the rows and the pins' release commit together
      // either way, so neither waits for the other's answer.
      await together(steps.commitIn(tx), lease.unpinIn(tx));
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

/** What an authority (who pays, and what they may do) adds to the file row's transaction: its
 * claims (a refusal answers for the upload) and its counts (the voucher's). */
export interface AuthorityParticipants {
  claims?: Participant;
  counts?: Participant;
}

type FileInput = Parameters<Files["addAll"]>[0][number];
type Added = Awaited<ReturnType<Files["addAll"]>>[number];
type RecordOptions = {
  quota?: UploadQuota;
  moved: number;
  authority?: AuthorityParticipants;
  also?: Participant;
  /** Refuses a file by its content's Cid (throws) before anything is recorded: the denylist's
   * check of each write. */
  refuse?: (cid: string) => void;
  /** A conditional write's check of the entry it replaces, under the account's lock (one file only). */
  expect?: Expectation;
  /** The DID's bucket exists (files.ts `bucketLook`): no insert of it is sent. */
  bucketMade?: boolean;
  /** Drops a replaced entry's reference to its content in the transaction (the back-end's
   * `releaseIn`); what it answers runs after the commit. */
  release?: (tx: Queryable, cid: string) => Promise<AfterRelease>;
  log: Logger;
};

/**
 * Records `pending` as the files `rows` (one, or a CAR import's roots: all commit or none) in one
 * transaction (files.ts `addAll`), whose participants run in this order, phase by phase (files.ts
 * Participant):
 *
 * 1. the content's rows, and the release of the pins that kept its blobs meanwhile (prepare);
 * 2. the authority's claims: the requestID's and the voucher's (a refusal comes first);
 * 3. the quota's exact check (D14) with `moved` bytes of traffic: it makes the account's row
 *    (prepare), takes its lock (lock), and checks once the row is in (settle);
 * 4. the authority's counts: the voucher's;
 * 5. `also`: what else reads the row in its transaction (the directory's `Public` of the answer);
 * 6. `release`: each entry a row replaced drops its reference to its content (released).
 *
 * `expect` (a conditional write) tests the entry the file would replace, under the lock.
 *
 * Either all of it commits or none: the bytes count exactly when the file is stored. When it
 * fails, the quota's holds go first (a refused upload never counts against another's check),
 * then nothing of the content is kept unless something else references it. Once it committed,
 * the blobs the replaced content alone kept are deleted (`release`'s after-work), without holding
 * up the answer. Before any of it, `refuse` — the denylist's check of every write (D25) — may
 * refuse the content by its Cid.
 */
export async function recordFiles(files: Pick<Files, "addAll">, rows: readonly FileInput[], pending: Pick<PendingPut, "commit" | "commitIn" | "abort">, opts: RecordOptions): Promise<Added[]> {
  let out: Added[];
  /** The last attempt's (a retried transaction runs the participants again). */
  let after: AfterRelease[] = [];
  const release = opts.release;
  try {
    for (const row of rows) opts.refuse?.(row.cid);
    const content: Participant = { prepare: (tx) => pending.commitIn(tx) };
    const quota = opts.quota?.commit(
      rows.reduce((n, r) => n + r.size, 0),
      opts.moved,
    );
    const released: Participant | undefined = release && {
      async released(tx, cids) {
        const mine: AfterRelease[] = [];
        // One after the other: releases of one Cid (a CAR's roots replacing two entries of it) count in turn.
        for (const cid of cids) mine.push(await release(tx, cid));
        after = mine;
      },
    };
    const participants = [content, opts.authority?.claims, quota, opts.authority?.counts, opts.also, released].filter((p): p is Participant => p !== undefined);
    out = await files.addAll(rows, participants, opts.expect, opts.bucketMade);
  } catch (err) {
    await opts.quota?.release();
    await pending.abort().catch((e) => opts.log.error("dropping a refused upload's content failed", { cids: rows.map((r) => r.cid), err: (e as Error).message }));
    throw err;
  }
  await pending.commit(); // the rows are in: this only lets go of what kept the blobs meanwhile
  // The replaced content's blobs go after the answer: its rows are gone, so no reader can reach
  // them, and they are garbage whether they go now or later (a crash leaves them to the start-up
  // sweep). Their decision rides in a later upload's pin transaction (blob/guard.ts), which a
  // client waiting for this answer would never send.
  const freed = after.filter((d) => d !== undefined);
  if (freed.length > 0)
    void (async () => {
      for (const deleteFreed of freed) await deleteFreed().catch((e) => opts.log.error("deleting released content failed", { err: (e as Error).message }));
    })();
  return out;
}
