/**
 * What the operator's consistency check and backup (src/ops) read of the dfs store's rows, and
 * the counts it may set right: the store keeps its tables to itself (one owner per table), so
 * every look at them from outside goes through here. Reads are paged by key (an index walk, no
 * sort, no offset) so a store of millions of chunks is read in constant memory.
 *
 * The counts kept in one transaction with the rows they count (`dfs_chunks.refs`, the distinct
 * objects whose manifest names the chunk; `dfs_objects.chunks`, its manifest's rows) can be
 * recounted at any time: `recountChunk` locks the chunk's row, so a commit or release of an object
 * naming it waits, and counts after. `dfs_objects.refs` counts holders outside this store (file
 * rows, S3 parts), which change in other transactions: src/ops sets it only with no gateway running.
 */
import type { Queryable, Sql } from "../../db/sql.ts";
import { chunkKey } from "./cid.ts";

/** A chunk a row keeps: its blob key, SHA-256 (hex) and size. */
export interface KeptChunk {
  key: string;
  hash: string;
  size: number;
}

/** An object as its row says, with what its manifest says. */
export interface ObjectShape {
  cid: string;
  size: number;
  chunks: number;
  refs: number;
  manifestRows: number;
  manifestBytes: number;
}

const PAGE = 1000;
const CHUNKS_AFTER = "SELECT hash, size FROM dfs_chunks WHERE hash > $1 ORDER BY hash LIMIT $2";
const OBJECTS_AFTER = `SELECT o.cid, o.size, o.chunks, o.refs,
    (SELECT COUNT(*) FROM dfs_object_chunks m WHERE m.cid = o.cid) AS "manifestRows",
    (SELECT CAST(COALESCE(SUM(m.size), 0) AS BIGINT) FROM dfs_object_chunks m WHERE m.cid = o.cid) AS "manifestBytes"
  FROM dfs_objects o WHERE o.cid > $1 ORDER BY o.cid LIMIT $2`;
const MANIFEST = "SELECT hash, size FROM dfs_object_chunks WHERE cid = $1 ORDER BY idx";
/** Chunks with their count and the number of distinct objects naming them (a page, by hash). */
const CHUNK_COUNTS = `SELECT c.hash, c.refs, (SELECT COUNT(DISTINCT m.cid) FROM dfs_object_chunks m WHERE m.hash = c.hash) AS actual
  FROM dfs_chunks c WHERE c.hash > $1 ORDER BY c.hash LIMIT $2`;
const LOCK_CHUNK = "SELECT refs FROM dfs_chunks WHERE hash = $1 FOR UPDATE";
const COUNT_NAMING = "SELECT COUNT(DISTINCT cid) AS n FROM dfs_object_chunks WHERE hash = $1";
const SET_CHUNK_REFS = "UPDATE dfs_chunks SET refs = $2 WHERE hash = $1";
/** A row at zero never outlives its transaction (schema.ts): its blob is the sweep's then. */
const DROP_ZERO_CHUNK = "DELETE FROM dfs_chunks WHERE hash = $1 AND refs <= 0";
const LOCK_OBJECT = "SELECT refs FROM dfs_objects WHERE cid = $1 FOR UPDATE";
const SET_OBJECT_CHUNKS = "UPDATE dfs_objects SET chunks = (SELECT COUNT(*) FROM dfs_object_chunks m WHERE m.cid = $1) WHERE cid = $1";
const SET_OBJECT_REFS = "UPDATE dfs_objects SET refs = $2 WHERE cid = $1";
const TOTALS = "SELECT COUNT(*) AS chunks, CAST(COALESCE(SUM(size), 0) AS BIGINT) AS bytes FROM dfs_chunks";

/** Every chunk a row keeps, in hash order, a page at a time. */
export async function* keptChunks(q: Queryable): AsyncGenerator<KeptChunk> {
  for (let after = ""; ; ) {
    const page = await q.all<{ hash: string; size: number }>(CHUNKS_AFTER, [after, PAGE]);
    for (const c of page) yield { key: chunkKey(c.hash), hash: c.hash, size: c.size };
    if (page.length < PAGE) return;
    after = (page[page.length - 1] as { hash: string }).hash;
  }
}

/** Every object with its manifest's row count and bytes, in Cid order, a page at a time. */
export async function* objectShapes(q: Queryable): AsyncGenerator<ObjectShape> {
  for (let after = ""; ; ) {
    const page = await q.all<ObjectShape>(OBJECTS_AFTER, [after, PAGE]);
    yield* page;
    if (page.length < PAGE) return;
    after = (page[page.length - 1] as ObjectShape).cid;
  }
}

/** An object's chunks in file order (empty for an unknown Cid). */
export function manifestOf(q: Queryable, cid: string): Promise<{ hash: string; size: number }[]> {
  return q.all(MANIFEST, [cid]);
}

/** Chunks whose reference count is not the number of distinct objects naming them. */
export async function* chunkRefDrift(q: Queryable): AsyncGenerator<{ hash: string; refs: number; actual: number }> {
  for (let after = ""; ; ) {
    const page = await q.all<{ hash: string; refs: number; actual: number }>(CHUNK_COUNTS, [after, PAGE]);
    for (const c of page) if (c.refs !== c.actual) yield c;
    if (page.length < PAGE) return;
    after = (page[page.length - 1] as { hash: string }).hash;
  }
}

/** Sets a chunk's count to the objects naming it now, under its row lock (a row none names goes);
 * the count it had and has. */
export function recountChunk(sql: Sql, hash: string): Promise<{ was: number; now: number } | undefined> {
  return sql.tx(
    async (tx) => {
      const row = await tx.get<{ refs: number }>(LOCK_CHUNK, [hash]);
      if (!row) return undefined;
      const now = (await tx.get<{ n: number }>(COUNT_NAMING, [hash]))?.n ?? 0;
      await tx.run(SET_CHUNK_REFS, [hash, now]);
      if (now === 0) await tx.run(DROP_ZERO_CHUNK, [hash]);
      return { was: row.refs, now };
    },
    { isolation: "read committed" },
  );
}

/** Sets an object's `chunks` to its manifest's rows (written once, with the manifest). */
export async function recountObjectChunks(sql: Sql, cid: string): Promise<void> {
  await sql.tx(
    async (tx) => {
      if (await tx.get(LOCK_OBJECT, [cid])) await tx.run(SET_OBJECT_CHUNKS, [cid]);
    },
    { isolation: "read committed" },
  );
}

/** Sets an object's reference count (its holders are outside this store: see the header). */
export async function setObjectRefs(sql: Sql, cid: string, refs: number): Promise<void> {
  await sql.run(SET_OBJECT_REFS, [cid, refs]);
}

/** Chunks a row keeps, and their bytes. */
export async function chunkTotals(q: Queryable): Promise<{ chunks: number; bytes: number }> {
  return (await q.get<{ chunks: number; bytes: number }>(TOTALS)) ?? { chunks: 0, bytes: 0 };
}
