/**
 * Who may delete a blob, and when (D15). A blob (a `dfs` chunk, an `ipfs` block) is shared by every
 * file whose content contains it, so deleting one must never race an upload that has just found it
 * present and counts on it. Age proves nothing (an upload can find a blob written a year ago), so
 * the decision is made in the database, with the same code for local files and S3:
 *
 * - An upload takes a `Lease` and pins each key BEFORE it checks whether the blob exists; the lease
 *   renews its pins while the upload runs and drops them once its rows reference the blobs.
 * - A deleter decides in one transaction: nothing references the key (the back-end's rows say),
 *   no live pin holds it; it writes a tombstone in that same transaction, then sends the DELETE,
 *   then drops the tombstone.
 * - An upload that meets a tombstone waits until it is gone (finishing it itself when its deleter
 *   died), then looks again, and writes the blob when it is missing.
 *
 * Either the deleter's transaction came first (the upload then sees the tombstone or the missing
 * blob) or the pin did (the deleter sees it and keeps the blob): no interleaving loses data.
 *
 * @example
 *   const lease = guard.lease()
 *   lease.pin([key])                          // before looking
 *   await guard.ensure(key, () => bytes)      // waits out a deletion, writes if missing
 *   commitRows(); lease.release()             // the rows keep it now
 *   await guard.deleteIfUnused(key, (tx) => isReferenced(tx, key))
 */
import { randomBytes } from "node:crypto";
import { and, eq, gt, lte, sql } from "drizzle-orm";
import type { Db } from "../db/open.ts";
import type { Logger } from "../log.ts";
import { blobPins, blobTombstones } from "./schema.ts";
import type { BlobSource, BlobStore } from "./store.ts";

type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** How long a pin or tombstone outlives its last renewal: a dead gateway's claims lapse after this. */
export const LEASE_MS = 60_000;
const RENEW_EVERY_MS = 10_000;
/** How often an upload waiting on a tombstone looks again. */
const TOMBSTONE_POLL_MS = 25;

export interface Lease {
  readonly holder: string;
  /** Claims keys (idempotent); call before looking whether they exist. */
  pin(keys: readonly string[]): void;
  /** Drops this lease's pins: the referencing rows have committed, or the upload gave up. */
  release(): void;
}

export interface BlobGuard {
  readonly store: BlobStore;
  lease(): Lease;
  /** Makes sure the blob exists, writing `source()` when it does not; the caller holds a pin on
   * `key`. Answers whether it wrote. `size` (when known) must match an existing blob's. */
  ensure(key: string, source: () => BlobSource, size?: number): Promise<boolean>;
  /** Waits out a deletion in progress; then whether the blob exists (its size, or undefined). */
  present(key: string): Promise<number | undefined>;
  /** Deletes the blob when nothing references it and no live pin holds it; true if it did. */
  deleteIfUnused(key: string, isReferenced: (tx: Tx) => boolean): Promise<boolean>;
  /** Finishes deletions whose deleter died; returns how many. */
  finishStaleTombstones(): Promise<number>;
  /** Drops expired pins (they no longer count either way; this only keeps the table small). */
  dropExpiredPins(): number;
}

export function createBlobGuard({ db, store, log, now = Date.now }: { db: Db; store: BlobStore; log: Logger; now?: () => number }): BlobGuard {
  const gateway = randomBytes(6).toString("hex");
  let seq = 0;

  const tombstoneOf = (key: string) => db.select().from(blobTombstones).where(eq(blobTombstones.key, key)).get();

  /** DELETE, then the tombstone: a crash in between leaves a tombstone someone finishes later. */
  async function finish(key: string, holder: string) {
    await store.delete(key);
    db.delete(blobTombstones).where(and(eq(blobTombstones.key, key), eq(blobTombstones.holder, holder))).run();
  }

  async function present(key: string): Promise<number | undefined> {
    for (let stone = tombstoneOf(key); stone; stone = tombstoneOf(key)) {
      // The deleter died between its decision and its DELETE: the decision stands, finish it.
      if (stone.expiresAt <= now()) {
        log.warn("blob: finishing a deletion its deleter left", { key });
        await finish(key, stone.holder);
      } else await Bun.sleep(TOMBSTONE_POLL_MS);
    }
    return store.stat(key);
  }

  return {
    store,
    lease() {
      const holder = `${gateway}-${++seq}`;
      const keys = new Set<string>();
      let released = false;
      const renew = () => db.update(blobPins).set({ expiresAt: now() + LEASE_MS }).where(eq(blobPins.holder, holder)).run();
      const timer = setInterval(renew, RENEW_EVERY_MS);
      timer.unref();
      return {
        holder,
        pin(list) {
          if (released) throw new Error("blob lease already released");
          const fresh = list.filter((k) => !keys.has(k));
          if (fresh.length === 0) return;
          const expiresAt = now() + LEASE_MS;
          db.insert(blobPins)
            .values(fresh.map((key) => ({ key, holder, expiresAt })))
            .onConflictDoUpdate({ target: [blobPins.key, blobPins.holder], set: { expiresAt } })
            .run();
          for (const k of fresh) keys.add(k);
        },
        release() {
          if (released) return;
          released = true;
          clearInterval(timer);
          if (keys.size > 0) db.delete(blobPins).where(eq(blobPins.holder, holder)).run();
          keys.clear();
        },
      };
    },

    present,

    async ensure(key, source, size) {
      const found = await present(key);
      if (found !== undefined && (size === undefined || found === size)) return false;
      await store.put(key, source());
      return true;
    },

    async deleteIfUnused(key, isReferenced) {
      const holder = `${gateway}-del-${++seq}`;
      const decidedAt = now();
      const decided = db.transaction(
        (tx) => {
          if (isReferenced(tx)) return false;
          const pinned = tx.select({ n: sql<number>`1` }).from(blobPins).where(and(eq(blobPins.key, key), gt(blobPins.expiresAt, now()))).get();
          if (pinned) return false;
          // A tombstone already there means another deleter is on it.
          const stone = tx.insert(blobTombstones).values({ key, holder, expiresAt: decidedAt + LEASE_MS }).onConflictDoNothing().returning({ key: blobTombstones.key }).all();
          return stone.length === 1;
        },
        { behavior: "immediate" },
      );
      if (!decided) return false;
      // Others finish a tombstone only after LEASE_MS; a deleter that was held up past half of it
      // leaves the DELETE to them rather than racing an upload that has finished it and written
      // the blob again.
      if (now() > decidedAt + LEASE_MS / 2) {
        log.warn("blob: deletion decided too long ago, left to a later pass", { key });
        return false;
      }
      await finish(key, holder);
      return true;
    },

    async finishStaleTombstones() {
      const stale = db.select().from(blobTombstones).where(lte(blobTombstones.expiresAt, now())).all();
      for (const stone of stale) await finish(stone.key, stone.holder);
      return stale.length;
    },

    dropExpiredPins() {
      return db.delete(blobPins).where(lte(blobPins.expiresAt, now())).returning({ key: blobPins.key }).all().length;
    },
  };
}

/** Deletions in flight at once: each is a round trip to S3 (a few ms), so one at a time would
 * make releasing a 10 GiB file take a minute. */
const DELETE_CONCURRENCY = 8;

/**
 * Runs `deleteOne` (a `deleteIfUnused` with the back-end's reference check) over `items`, a few
 * at a time; returns how many it deleted. A failure goes to `failed` and the rest go on: the rows
 * are gone already, so the next sweep finds the object and tries again.
 */
export async function deleteEach<T>(items: Iterable<T>, deleteOne: (item: T) => Promise<boolean>, failed: (item: T, err: unknown) => void): Promise<number> {
  const todo = [...items];
  let next = 0;
  let deleted = 0;
  const worker = async () => {
    while (next < todo.length) {
      const item = todo[next++] as T;
      try {
        if (await deleteOne(item)) deleted++;
      } catch (err) {
        failed(item, err);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(DELETE_CONCURRENCY, todo.length) }, worker));
  return deleted;
}
