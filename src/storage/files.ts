/**
 * The file catalog (D9): buckets named by canonical DID, files unique by (bucket, back-end,
 * name) — an upload with an existing name replaces that entry — and the entries of spec 2.5.
 */
import { ReadCache } from "../db/read-cache.ts";
import { type Fragment, type Look, type Queryable, type Sql, together } from "../db/sql.ts";
import { failure } from "../failure.ts";
import type { FileEntry } from "../http/model.ts";
import type { BackendKind } from "./backend.ts";
import type { files } from "./schema.ts";

export type FileRow = typeof files.$inferSelect;

/**
 * A conditional write's test of the entry it would replace (undefined: none), run under the
 * account's lock in the transaction that records the new one: throwing refuses the write and
 * keeps nothing. The caller says what the condition is (S3's If-Match / If-None-Match).
 */
export type Expectation = (current: FileRow | undefined) => void;

/**
 * One participant of the transaction that records a file. The transaction runs in phases, and
 * within a phase the participants in the order of the list it is given (storage/pending.ts
 * `recordFiles` documents the list: the content's rows, the authority's claims, the quota's exact
 * check, the authority's counts, the directory's `Public`):
 *
 * 1. `prepare`, every participant's with the bucket's insert: statements before any lock of the
 *    account's, on rows no other transaction writes under that lock (the content's, by relative
 *    updates). On PostgreSQL the lock serializes one account's uploads until their COMMIT; what
 *    runs before it is out of that wait.
 * 2. `lock`, the first participant's that has one (the quota's: D16's lock on the account's row;
 *    with none, the DID's bucket row), then the file row's statements, then every `settle`.
 *    Phases 1 and 2 are sent at once, each statement waiting behind the last, so none needs an
 *    answer before the next goes out: the row the lock takes exists (a `prepare` made it), and
 *    what a `settle` reads includes the file row. One round trip on PostgreSQL, its statements
 *    before the lock's outside its span. A `prepare` sends its statements before it first awaits.
 *    Throwing undoes it all.
 * 3. `released`, only when the rows replaced entries, with those entries' Cids (one per entry):
 *    their content's references dropped in the commit that drops the rows (a round trip more,
 *    for a replacement only; it needs the Cids the rows' statements answered).
 */
export interface Participant {
  prepare?(tx: Queryable): Promise<void>;
  lock?(tx: Queryable): Promise<void>;
  settle?(tx: Queryable): Promise<void>;
  released?(tx: Queryable, cids: readonly string[]): Promise<void>;
}

const COLUMNS = `id, did, backend, name, cid, size, encryption, mod_time AS "modTime", etag, metadata, checksum, parts`;
// One row each (stored_totals is kept by triggers on files, migration 0023 / pg 0013), not a SUM
// over every file of the account: the quota reads it twice per upload, and an account may hold
// 100k files. The entry an upload would replace is one lookup by files_name.
// As expressions (Fragment): the quota embeds them in its one read of an account's usage.
const STORED = "COALESCE((SELECT bytes FROM stored_totals WHERE did = $1), 0)";
const STORED_EXCEPT = `(${STORED} - COALESCE((SELECT size FROM files WHERE did = $1 AND backend = $2 AND name = $3), 0))`;
const ADD_BUCKET = "INSERT INTO buckets (did, created_at) VALUES ($1, $2) ON CONFLICT (did) DO NOTHING";
const LOCK_BUCKET = "SELECT did FROM buckets WHERE did = $1 FOR UPDATE";
const BUCKET_MADE = "EXISTS (SELECT 1 FROM buckets WHERE did = $1)";
const DROP_NAMED = "DELETE FROM files WHERE did = $1 AND backend = $2 AND name = $3 RETURNING cid";
const INSERT_FILE = `INSERT INTO files (did, backend, name, cid, size, encryption, mod_time, etag, metadata, checksum, parts) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING ${COLUMNS}`;
// By name, in byte order (PostgreSQL's name column is COLLATE "C", SQLite compares bytes): the S3 API's listing (D18).
const NAMED = `SELECT ${COLUMNS} FROM files WHERE did = $1 AND backend = $2 AND name = $3`;
const LIST_NAMES = `SELECT ${COLUMNS} FROM files WHERE did = $1 AND backend = $2 AND name > $3 AND substr(name, 1, length($4)) = $4 ORDER BY name LIMIT $5`;
const REMOVE_NAMED = `DELETE FROM files WHERE did = $1 AND backend = $2 AND name = $3 RETURNING ${COLUMNS}`;
const NAMED_LOCKED = `${NAMED} FOR UPDATE`;
const REMOVE_ID = `DELETE FROM files WHERE id = $1 RETURNING ${COLUMNS}`;
// A page in id order (index files_listing: no sort) with listobjects' `Public` in the same read:
// whether the owner publishes the Cid as public (the directory's condition, PublicSql; without a
// directory nothing is). Only the columns an entry shows: did and backend are the query's own,
// etag is not shown.
// Both parameters named all the same (PostgreSQL types every parameter from its use).
const NOT_PUBLIC = "(FALSE AND CAST($5 AS TEXT) = CAST($6 AS TEXT))";
const listSql = (publicSql?: PublicSql) => `SELECT id, name, cid, size, encryption, mod_time AS "modTime",
    ${publicSql ? publicSql({ cid: "files.cid", owner: "$5", yes: "$6" }) : NOT_PUBLIC} AS "isPublic"
  FROM files WHERE did = $1 AND backend = $2 AND id > $3 ORDER BY id LIMIT $4`;
const REMOVE = `DELETE FROM files WHERE id = $1 AND backend = $2 AND did = $3 RETURNING ${COLUMNS}`;
const OWNER_OF = "SELECT did FROM files WHERE id = $1 AND backend = $2";
const OWNS = `SELECT ${COLUMNS} FROM files WHERE backend = $1 AND cid = $2 AND did = $3 LIMIT 1`;

/**
 * Whether `did` stores the Cid `cid` (on `backend`, else on either back-end), as an SQL condition
 * over the caller's own expressions (columns or placeholders): how the directory and the trustless
 * gateway ask the catalog inside their own one query, without naming its table. Served by the
 * index files_cid (backend, cid, did).
 */
export function storesSql(at: { cid: string; did: string; backend?: string }): string {
  const backend = at.backend ?? "f.backend IN ('dfs', 'ipfs')";
  return `EXISTS (SELECT 1 FROM files f WHERE ${at.backend ? `f.backend = ${backend}` : backend} AND f.cid = ${at.cid} AND f.did = ${at.did})`;
}

/**
 * Whether `owner` publishes the Cid `cid` as public, as an SQL condition over the listing's own
 * expressions (`yes` a placeholder bound to true): the directory's to say (its `publicSql`),
 * handed to the catalog so a listing reads its page and each file's `Public` in one query.
 */
export type PublicSql = (at: { cid: string; owner: string; yes: string }) => string;

/** What a listing reads of a file: what its entry shows. */
export type ListedFile = Pick<FileRow, "id" | "name" | "cid" | "size" | "encryption" | "modTime">;

/** A listing's row: what its entry shows and its `Public`. */
export type ListedRow = ListedFile & { isPublic: boolean };

/** A file entry as spec 2.5 names its fields. */
export function fileEntry(row: ListedFile, isPublic = false): FileEntry {
  return {
    ID: row.id,
    Name: row.name,
    Size: row.size,
    Cid: row.cid,
    ModTime: new Date(row.modTime).toISOString(),
    Public: isPublic,
    UserDefined: { encryption: row.encryption, etag: row.cid },
  };
}

/** A file name as a client may give it: the last path part, no control characters, ≤ 255 bytes. */
export function cleanName(raw: string | undefined): string {
  const base = (raw ?? "").split(/[\\/]/).pop() ?? "";
  const name = base.replace(/[\u0000-\u001f\u007f]/g, "").trim();
  if (!name || name === "." || name === "..") throw failure("bad-input", "the file part needs a file name");
  if (Buffer.byteLength(name) > 255) throw failure("bad-input", "file names are at most 255 bytes");
  return name;
}

/**
 * The names of a CAR import's files, one per root (in the roots' order): with one root, the name
 * given (a file part's, or an S3 key) less a `.car` ending — `photo.jpg.car` holds `photo.jpg` —
 * or the root's Cid when nothing is left; with several, each root's Cid, under the given name as
 * a folder when it may hold one (`sep` "/": an S3 key), else alone.
 */
export function importedNames(given: string, roots: readonly { cid: string }[], sep?: "/"): string[] {
  if (roots.length === 1) {
    const stem = sep ? given : given.replace(/\.car$/i, "");
    return [stem || (roots[0] as { cid: string }).cid];
  }
  return roots.map((r) => (sep ? `${given.replace(/\/+$/, "")}/${r.cid}` : r.cid));
}

/**
 * Bytes `did` stores on both back-ends (one space pool, D7), leaving out the file named `except`
 * (the entry an upload would replace), as an expression: the quota meter embeds it in its one
 * read of what an account uses, inside its transactions. There the total includes the file row
 * the transaction has just written (the trigger runs in its statement), and, the quota's row lock
 * held, every other writer's committed change.
 */
export function storedBytesSql(did: string, except?: { backend: string; name: string }): Fragment {
  return except ? { text: STORED_EXCEPT, params: [did, except.backend, except.name] } : { text: STORED, params: [did] };
}

/** The same number read by itself (the catalog's tests and benches). */
export async function storedBytes(q: Queryable, did: string, except?: { backend: string; name: string }): Promise<number> {
  const { text, params } = storedBytesSql(did, except);
  return (await q.get<{ n: number }>(`SELECT ${text} AS n`, params))?.n ?? 0;
}

/** A file row to record (files.ts `add`). */
export type NewFile = { did: string; backend: BackendKind; name: string; cid: string; size: number; encryption: string; etag?: string; metadata?: string | null; checksum?: string; parts?: string };

export function createFiles(sql: Sql, now: () => number = Date.now, publicSql?: PublicSql) {
  const LIST = listSql(publicSql);
  // listobjects' pages while nothing is committed (its statement was a third of the
  // request's CPU); the version is SQLite's, so PostgreSQL reads every time.
  const pages = new ReadCache<ListedRow>(() => sql.dataVersion?.());
  /** `add` of several files of one DID in one transaction (a CAR import's roots): all or none.
   * `bucketMade`: the DID's bucket exists (`bucketLook`; buckets are never deleted), so its insert is not sent. */
  function addAll(fs: readonly NewFile[], participants: readonly Participant[] = [], expect?: Expectation, bucketMade = false): Promise<{ row: FileRow; replaced?: string }[]> {
    const did = fs[0]?.did;
    if (did === undefined || fs.some((f) => f.did !== did)) throw new Error("addAll records files of one DID, at least one");
    if (expect && fs.length !== 1) throw new Error("a conditional write records one file");
    const locker = participants.find((p) => p.lock);
    return sql.tx(
      async (tx) => {
        // Every participant's `prepare` and the bucket's insert (which takes no lock on a row
        // that exists), then the lock, then under it the rows' statements and the participants'
        // `settle`s, which so see the rows: all sent at once, each after the last, one round trip
        // on PostgreSQL. The statements before the lock run before it all the same.
        const prepared = together(together(...participants.map((p) => p.prepare?.(tx))), bucketMade ? undefined : tx.run(ADD_BUCKET, [did, now()]));
        const lock = () => (locker?.lock ? locker.lock(tx) : tx.get(LOCK_BUCKET, [did]));
        // A conditional write reads the entry it would replace under the account's lock, which
        // every write of the account's names takes: two such writes of one name see each other
        // in turn, and only one finds the name as it expected (a round trip more, for them alone).
        // The entry's own lock orders it with a conditional delete (`removeNamed`), which takes
        // no account lock: the write then finds the name gone, or the delete finds it replaced.
        if (expect) {
          const f = fs[0] as NewFile;
          const [, , current] = await together(prepared, lock(), tx.get<FileRow>(NAMED_LOCKED, [f.did, f.backend, f.name]));
          expect(current);
        }
        const [, , added] = await together(
          expect ? undefined : prepared,
          expect ? undefined : lock(),
          together(
            ...fs.map((f) =>
              together(
                tx.get<{ cid: string }>(DROP_NAMED, [f.did, f.backend, f.name]),
                tx.get<FileRow>(INSERT_FILE, [f.did, f.backend, f.name, f.cid, f.size, f.encryption, now(), f.etag ?? null, f.metadata ?? null, f.checksum ?? null, f.parts ?? null]),
              ),
            ),
          ),
          together(...participants.map((p) => p.settle?.(tx))),
        );
        const out = added.map(([old, row]) => {
          if (!row) throw new Error("INSERT … RETURNING gave no row");
          return { row, replaced: old?.cid };
        });
        const replaced = out.flatMap((o) => (o.replaced === undefined ? [] : [o.replaced]));
        if (replaced.length > 0) await together(...participants.map((p) => p.released?.(tx, replaced)));
        return out;
      },
      // With the quota's lock held, or else the bucket's, every read of the DID's rows is current
      // and two uploads of one name replace each other in turn (D16). SERIALIZABLE did that
      // without a lock, by retries: with the voucher's count in the transaction (one row per
      // payer, storage/service.ts), ten parallel uploads of one payer retried past its 12 attempts.
      { isolation: "read committed" },
    );
  }

  return {
    /**
     * Records a stored file; returns the new row and the Cid of an entry it replaced. The
     * `participants` run in the same transaction, phase by phase in list order (Participant);
     * throwing undoes it all.
     */
    async add(f: NewFile, participants: readonly Participant[] = [], expect?: Expectation): Promise<{ row: FileRow; replaced?: string }> {
      return (await addAll([f], participants, expect))[0] as { row: FileRow; replaced?: string };
    },

    addAll,

    /** Whether `did`'s bucket exists, as a look (db/sql.ts): an upload reads it with its other
     * first looks, and its file row's transaction then sends no insert of it. */
    bucketLook(did: string): Look<boolean> {
      return { columns: { bucketMade: BUCKET_MADE }, params: [did], read: (row) => Boolean(row.bucketMade) }; // 0/1 on SQLite
    },

    /** A page of `did`'s files on `backend`, each with whether `owner` (the DID's address)
     * publishes its Cid as public in the directory (D9, spec 2.5 `Public`). */
    async list(did: string, owner: string, backend: BackendKind, page: { limit?: number; after?: number } = {}): Promise<readonly ListedRow[]> {
      const key = `${did}\0${owner}\0${backend}\0${page.after ?? ""}\0${page.limit ?? ""}`;
      return pages.read(key, async () => {
        const rows = await sql.all<ListedFile & { isPublic: boolean | number }>(LIST, [did, backend, page.after ?? -1, page.limit ?? Number.MAX_SAFE_INTEGER, owner, true]);
        // 0/1 on SQLite, a boolean on PostgreSQL.
        for (const r of rows) r.isPublic = Boolean(r.isPublic);
        return rows as ListedRow[];
      });
    },

    /** Deletes a file of `did` on `backend`: 404 unknown id, 403 someone else's. */
    async remove(did: string, backend: BackendKind, id: number): Promise<FileRow> {
      // One conditional statement: two deletes of one file (on two gateways) remove it once.
      const row = await sql.get<FileRow>(REMOVE, [id, backend, did]);
      if (row) return row;
      const other = await sql.get<{ did: string }>(OWNER_OF, [id, backend]);
      if (other) throw failure("forbidden", "Permission denied: the file belongs to another account");
      throw failure("not-found", "File not found");
    },

    /** The file of `did` named `name` on `backend`. */
    named(did: string, backend: BackendKind, name: string): Promise<FileRow | undefined> {
      return sql.get<FileRow>(NAMED, [did, backend, name]);
    },

    /** Files of `did` whose names start with `prefix`, after the name `after`, in byte order. */
    listNames(did: string, backend: BackendKind, page: { prefix: string; after: string; limit: number }): Promise<FileRow[]> {
      return sql.all<FileRow>(LIST_NAMES, [did, backend, page.after, page.prefix, page.limit]);
    },

    /**
     * Deletes the file of `did` named `name` (one statement: two deletes remove it once); its row,
     * if there was one. With `expect` (a conditional delete), the entry is read locked in the
     * transaction that removes it, and removed only as `expect` saw it: a write that replaces it
     * meanwhile waits for the delete, or the delete sees it gone; throwing removes nothing.
     */
    removeNamed(did: string, backend: BackendKind, name: string, expect?: Expectation): Promise<FileRow | undefined> {
      if (!expect) return sql.get<FileRow>(REMOVE_NAMED, [did, backend, name]);
      return sql.tx(
        async (tx) => {
          // A write that replaced the entry while this read waited for its lock leaves it empty
          // (on PostgreSQL the new row is newer than the statement): read once more, so the
          // delete is tested against the entry as it is now, not refused as if there were none.
          const current = (await tx.get<FileRow>(NAMED_LOCKED, [did, backend, name])) ?? (await tx.get<FileRow>(NAMED_LOCKED, [did, backend, name]));
          expect(current);
          return current && tx.get<FileRow>(REMOVE_ID, [current.id]);
        },
        { isolation: "read committed" },
      );
    },

    /** Whether `did` stores a file with this Cid on this back-end. */
    owns(did: string, backend: BackendKind, cid: string): Promise<FileRow | undefined> {
      return sql.get<FileRow>(OWNS, [backend, cid, did]);
    },
  };
}

export type Files = ReturnType<typeof createFiles>;
