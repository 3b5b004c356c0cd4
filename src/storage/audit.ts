/**
 * What the operator's commands (src/ops: the consistency check, the usage report) read of the file
 * catalog, and the one total they may set right. The catalog keeps its tables to itself (one owner
 * per table): every look at `files` and `stored_totals` from outside goes
 * through here, and so do the joins of a file with its back-end's content row (both this
 * capability's). Reads are set-based or paged by key, in constant memory.
 *
 * `stored_totals` is kept by triggers on `files` (relative updates in the file's own transaction),
 * so `recountStoredTotal` may set a row at any time: it locks the row first, so a file of that DID
 * written meanwhile waits (its trigger updates the same row) and the sum read after the lock is
 * current. Content reference counts (`dfs_objects.refs`, `ipfs_pins.refs`) also count holders
 * outside the catalog (S3 parts), which the caller adds.
 */
import type { Queryable, Sql } from "../db/sql.ts";
import type { BackendKind } from "./backend.ts";

/** A file whose content row is missing, or holds another size. */
export interface FileWithoutContent {
  id: number;
  did: string;
  backend: BackendKind;
  name: string;
  cid: string;
  size: number;
  /** The content row's size, or null when there is none. */
  contentSize: number | null;
}

/** A content row with its reference count and the file rows naming it. */
export interface ContentHolders {
  cid: string;
  refs: number;
  files: number;
}

/** Per account and back-end: files and their bytes. */
export interface StoredUsage {
  did: string;
  backend: BackendKind;
  files: number;
  bytes: number;
}

const PAGE = 1000;
const CONTENT_TABLE: Record<BackendKind, string> = { dfs: "dfs_objects", ipfs: "ipfs_pins" };

const WITHOUT_CONTENT = (backend: BackendKind) =>
  `SELECT f.id, f.did, f.backend, f.name, f.cid, f.size, c.size AS "contentSize" FROM files f
   LEFT JOIN ${CONTENT_TABLE[backend]} c ON c.cid = f.cid
   WHERE f.backend = '${backend}' AND (c.cid IS NULL OR c.size <> f.size) AND f.id > $1 ORDER BY f.id LIMIT $2`;
const HOLDERS = (backend: BackendKind) =>
  `SELECT c.cid, c.refs, (SELECT COUNT(*) FROM files f WHERE f.backend = '${backend}' AND f.cid = c.cid) AS files
   FROM ${CONTENT_TABLE[backend]} c WHERE c.cid > $1 ORDER BY c.cid LIMIT $2`;
const HOLDERS_OF = (backend: BackendKind) =>
  `SELECT c.cid, c.refs, (SELECT COUNT(*) FROM files f WHERE f.backend = '${backend}' AND f.cid = c.cid) AS files
   FROM ${CONTENT_TABLE[backend]} c WHERE c.cid = $1`;
const FILE_COUNTS = `SELECT backend, COUNT(*) AS files, CAST(COALESCE(SUM(size), 0) AS BIGINT) AS bytes FROM files GROUP BY backend`;
/** Accounts whose stored total is not the sum of their files (either side may be missing). */
const TOTALS_DRIFT = `SELECT d.did, COALESCE(t.bytes, 0) AS recorded, COALESCE(s.bytes, 0) AS actual
  FROM (SELECT did FROM stored_totals UNION SELECT did FROM files) d
  LEFT JOIN stored_totals t ON t.did = d.did
  LEFT JOIN (SELECT did, CAST(SUM(size) AS BIGINT) AS bytes FROM files GROUP BY did) s ON s.did = d.did
  WHERE COALESCE(t.bytes, 0) <> COALESCE(s.bytes, 0) ORDER BY d.did`;
const LOCK_TOTAL = "SELECT bytes FROM stored_totals WHERE did = $1 FOR UPDATE";
const MAKE_TOTAL = "INSERT INTO stored_totals (did, bytes) VALUES ($1, 0) ON CONFLICT (did) DO NOTHING";
const SUM_OF = "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) AS n FROM files WHERE did = $1";
const SET_TOTAL = "UPDATE stored_totals SET bytes = $2 WHERE did = $1";
const STORED_BY_ACCOUNT = `SELECT did, backend, COUNT(*) AS files, CAST(COALESCE(SUM(size), 0) AS BIGINT) AS bytes FROM files GROUP BY did, backend ORDER BY did, backend`;
const ADDED_SINCE = `SELECT did, backend, COUNT(*) AS files, CAST(COALESCE(SUM(size), 0) AS BIGINT) AS bytes FROM files WHERE mod_time >= $1 GROUP BY did, backend ORDER BY did, backend`;
const ACCOUNTS_STORING = "SELECT COUNT(DISTINCT did) AS n FROM files";

/** Files whose content row is missing or holds another size, in id order. */
export async function* filesWithoutContent(q: Queryable, backend: BackendKind): AsyncGenerator<FileWithoutContent> {
  for (let after = 0; ; ) {
    const page = await q.all<FileWithoutContent>(WITHOUT_CONTENT(backend), [after, PAGE]);
    yield* page;
    if (page.length < PAGE) return;
    after = (page[page.length - 1] as FileWithoutContent).id;
  }
}

/** Every content row of `backend` with its count and the file rows naming it, in Cid order. */
export async function* contentHolders(q: Queryable, backend: BackendKind): AsyncGenerator<ContentHolders> {
  for (let after = ""; ; ) {
    const page = await q.all<ContentHolders>(HOLDERS(backend), [after, PAGE]);
    yield* page;
    if (page.length < PAGE) return;
    after = (page[page.length - 1] as ContentHolders).cid;
  }
}

/** One content row's count and file rows now (undefined when it is gone). */
export function holdersOf(q: Queryable, backend: BackendKind, cid: string): Promise<ContentHolders | undefined> {
  return q.get<ContentHolders>(HOLDERS_OF(backend), [cid]);
}

/** Files and bytes per back-end. */
export async function fileCounts(q: Queryable): Promise<Record<BackendKind, { files: number; bytes: number }>> {
  const out: Record<BackendKind, { files: number; bytes: number }> = { dfs: { files: 0, bytes: 0 }, ipfs: { files: 0, bytes: 0 } };
  for (const r of await q.all<{ backend: BackendKind; files: number; bytes: number }>(FILE_COUNTS)) out[r.backend] = { files: r.files, bytes: r.bytes };
  return out;
}

/** Accounts whose `stored_totals` row is not the sum of their files' sizes. */
export function storedTotalsDrift(q: Queryable): Promise<{ did: string; recorded: number; actual: number }[]> {
  return q.all(TOTALS_DRIFT);
}

/** Sets an account's stored total to the sum of its files, under the row's lock; the total it had. */
export function recountStoredTotal(sql: Sql, did: string): Promise<{ was: number; now: number }> {
  return sql.tx(
    async (tx) => {
      await tx.run(MAKE_TOTAL, [did]);
      const was = (await tx.get<{ bytes: number }>(LOCK_TOTAL, [did]))?.bytes ?? 0;
      const now = (await tx.get<{ n: number }>(SUM_OF, [did]))?.n ?? 0;
      await tx.run(SET_TOTAL, [did, now]);
      return { was, now };
    },
    { isolation: "read committed" },
  );
}

/** Files and bytes per account and back-end now. */
export function storedByAccount(q: Queryable): Promise<StoredUsage[]> {
  return q.all(STORED_BY_ACCOUNT);
}

/** Files (still there) stored or replaced since `since` (epoch ms), per account and back-end. */
export function storedSince(q: Queryable, since: number): Promise<StoredUsage[]> {
  return q.all(ADDED_SINCE, [since]);
}

/** Accounts with at least one file. */
export async function accountsStoring(q: Queryable): Promise<number> {
  return (await q.get<{ n: number }>(ACCOUNTS_STORING))?.n ?? 0;
}

const USING_CHUNK = `SELECT f.id, f.did, f.name FROM files f JOIN dfs_object_chunks m ON m.cid = f.cid WHERE f.backend = 'dfs' AND m.hash = $1 ORDER BY f.id LIMIT $2`;
const USING_BLOCK = `SELECT f.id, f.did, f.name FROM files f JOIN ipfs_object_blocks o ON o.cid = f.cid WHERE f.backend = 'ipfs' AND o.key = $1 ORDER BY f.id LIMIT $2`;
const USING_CONTENT = `SELECT id, did, name FROM files WHERE backend = $1 AND cid = $2 ORDER BY id LIMIT $3`;

/** Files whose content holds a chunk (dfs, by SHA-256), a block (ipfs, by key) or is a Cid: the first `limit`. */
export function filesUsing(q: Queryable, what: { chunk: string } | { block: string } | { backend: BackendKind; cid: string }, limit = 5): Promise<{ id: number; did: string; name: string }[]> {
  if ("chunk" in what) return q.all(USING_CHUNK, [what.chunk, limit]);
  if ("block" in what) return q.all(USING_BLOCK, [what.block, limit]);
  return q.all(USING_CONTENT, [what.backend, what.cid, limit]);
}
