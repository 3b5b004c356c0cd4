/**
 * The store's rows (D16: one SQL text for SQLite and PostgreSQL). Reference counts change only by
 * relative updates (`refs = refs + 1`, `refs - 1`) in READ COMMITTED transactions, so commits and
 * releases on many gateways never lose a count: each such update waits for the row lock of the
 * other and applies to the value it left. `chunkReferenced` also runs inside the blob guard's
 * deciding transaction (D15).
 */
import { allInBatches, batches, placeholders, type Queryable, type Sql, together } from "../../db/sql.ts";

/** One position of a manifest. */
export interface ChunkRef {
  hash: string;
  size: number;
}

const OBJECT = "SELECT size, chunks, refs FROM dfs_objects WHERE cid = $1";
const CHUNK_AT = "SELECT hash, size FROM dfs_object_chunks WHERE cid = $1 AND idx = $2";
const MANIFEST = "SELECT hash, size FROM dfs_object_chunks WHERE cid = $1 ORDER BY idx";
const CHUNK_REFERENCED = "SELECT 1 AS one FROM dfs_chunks WHERE hash = $1";
const CHUNKS_AMONG = (n: number) => `SELECT hash FROM dfs_chunks WHERE hash IN (${placeholders(n)})`;
/** One more reference, or the object's row; `refs` 1 means this commit made it. */
const ADD_OBJECT = `INSERT INTO dfs_objects (cid, size, chunks, refs, created_at) VALUES ($1, $2, $3, 1, $4)
  ON CONFLICT (cid) DO UPDATE SET refs = dfs_objects.refs + 1`;
/**
 * Whether the commit in this transaction made the object's row ($1: its Cid), as a condition of
 * the statements that only that commit runs: they go out with ADD_OBJECT instead of after its
 * answer (one round trip on PostgreSQL). Read after ADD_OBJECT in the same transaction, `refs` is
 * what it left: a row at zero never outlives its transaction, and another commit or release of
 * the same Cid waits for this one's row lock.
 */
const MADE_HERE = "EXISTS (SELECT 1 FROM dfs_objects WHERE cid = $1 AND refs = 1)";
// INSERT … SELECT from VALUES (columns column1… on both databases) so that a WHERE can apply;
// SQLite needs that WHERE anyway to read the ON CONFLICT of an INSERT … SELECT.
const ADD_CHUNKS = (n: number) =>
  `INSERT INTO dfs_chunks (hash, size, refs)
   SELECT column1, column2, 1 FROM (VALUES ${Array.from({ length: n }, (_, i) => `($${2 * i + 2}, CAST($${2 * i + 3} AS BIGINT))`).join(", ")}) AS v WHERE ${MADE_HERE}
   ON CONFLICT (hash) DO UPDATE SET refs = dfs_chunks.refs + 1`;
const ADD_MANIFEST = (n: number) =>
  `INSERT INTO dfs_object_chunks (cid, idx, hash, size)
   SELECT CAST($1 AS TEXT), column1, column2, column3 FROM (VALUES ${Array.from({ length: n }, (_, i) => `(CAST($${3 * i + 2} AS INTEGER), $${3 * i + 3}, CAST($${3 * i + 4} AS BIGINT))`).join(", ")}) AS v WHERE ${MADE_HERE}`;
const DROP_REF = "UPDATE dfs_objects SET refs = refs - 1 WHERE cid = $1 RETURNING refs";
const MANIFEST_HASHES = "SELECT DISTINCT hash FROM dfs_object_chunks WHERE cid = $1";
/** The manifest's chunks when the object's last reference went in this transaction (sent with
 * DROP_REF, not after its answer: one round trip on PostgreSQL). */
const FREED_MANIFEST_HASHES = `${MANIFEST_HASHES} AND EXISTS (SELECT 1 FROM dfs_objects WHERE cid = $1 AND refs <= 0)`;
const DROP_MANIFEST = "DELETE FROM dfs_object_chunks WHERE cid = $1";
const DROP_OBJECT = "DELETE FROM dfs_objects WHERE cid = $1";
const UNREF_CHUNKS = (n: number) => `UPDATE dfs_chunks SET refs = refs - 1 WHERE hash IN (${placeholders(n)})`;
const DROP_ZERO_CHUNKS = (n: number) => `DELETE FROM dfs_chunks WHERE hash IN (${placeholders(n)}) AND refs <= 0 RETURNING hash`;
const DEAD_OBJECTS = "SELECT cid FROM dfs_objects WHERE refs <= 0 FOR UPDATE";
const DEAD_CHUNKS = "DELETE FROM dfs_chunks WHERE refs <= 0 RETURNING hash";
const OBJECT_COUNT = "SELECT COUNT(*) AS n FROM dfs_objects";
const CHUNK_COUNT = "SELECT COUNT(*) AS n, CAST(COALESCE(SUM(size), 0) AS BIGINT) AS bytes FROM dfs_chunks";

/** Commits and releases: relative updates under row locks (see the header). */
const LOCKED = { isolation: "read committed" } as const;

/** Whether a row keeps this chunk (rows at zero refs never outlive their transaction). */
export async function chunkReferenced(q: Queryable, hash: string): Promise<boolean> {
  return (await q.get(CHUNK_REFERENCED, [hash])) !== undefined;
}

/**
 * `Rows.commit`'s statements in the caller's READ COMMITTED transaction (an upload's file row's):
 * relative updates only, so a retried transaction may run them again.
 */
export async function commitIn(tx: Queryable, cid: string, size: number, manifest: readonly ChunkRef[]): Promise<void> {
  // Sorted: two commits sharing chunks lock their rows in one order (no deadlock).
  const chunks = distinct(manifest).sort((a, b) => (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0));
  // All sent at once, in this order (the manifest's rows name the object and the chunks); those
  // after the object's only write when it made the row (MADE_HERE).
  await together(
    tx.run(ADD_OBJECT, [cid, size, manifest.length, Date.now()]),
    ...[...batches(chunks)].map((part) => tx.run(ADD_CHUNKS(part.length), [cid, ...part.flatMap((c) => [c.hash, c.size])])),
    ...[...batches(manifest.map((c, idx) => [idx, c] as const))].map((part) => tx.run(ADD_MANIFEST(part.length), [cid, ...part.flatMap(([idx, c]) => [idx, c.hash, c.size])])),
  );
}

/**
 * `Rows.release`'s statements in the caller's READ COMMITTED transaction (the file row's that
 * replaced an entry): relative updates only, so a retried transaction may run them again.
 */
export async function releaseIn(tx: Queryable, cid: string): Promise<string[] | undefined> {
  const [row, hashes] = await together(tx.get<{ refs: number }>(DROP_REF, [cid]), tx.all<{ hash: string }>(FREED_MANIFEST_HASHES, [cid]));
  if (!row) return undefined;
  if (row.refs > 0) return [];
  return dropObject(tx, cid, hashes.map((r) => r.hash));
}

export class Rows {
  constructor(private readonly sql: Sql) {}

  object(cid: string): Promise<{ size: number; chunks: number; refs: number } | undefined> {
    return this.sql.get(OBJECT, [cid]);
  }

  chunkAt(cid: string, idx: number): Promise<ChunkRef | undefined> {
    return this.sql.get(CHUNK_AT, [cid, idx]);
  }

  /** An object's chunks in file order (empty for an unknown Cid). */
  manifest(cid: string): Promise<ChunkRef[]> {
    return this.sql.all(MANIFEST, [cid]);
  }

  isReferenced(hash: string): Promise<boolean> {
    return chunkReferenced(this.sql, hash);
  }

  /** Those of `hashes` a row keeps (for sweeps, which look at many keys at once). */
  async referencedAmong(hashes: readonly string[]): Promise<Set<string>> {
    return new Set((await allInBatches<{ hash: string }>(this.sql, CHUNKS_AMONG, hashes)).map((r) => r.hash));
  }

  /**
   * One more reference to `cid`: the first commit writes the manifest and gives each distinct
   * chunk one more reference; later commits of the same Cid only count (same Cid, same chunks).
   * Two first commits at once: the second's insert waits for the first's row, then counts.
   */
  async commit(cid: string, size: number, manifest: readonly ChunkRef[]): Promise<void> {
    await this.sql.tx((tx) => commitIn(tx, cid, size, manifest), LOCKED);
  }

  /**
   * One reference fewer. Returns undefined for an unknown Cid, else the chunks whose last
   * reference went (their rows are gone; their blobs are for the caller to delete).
   */
  release(cid: string): Promise<string[] | undefined> {
    return this.sql.tx((tx) => releaseIn(tx, cid), LOCKED);
  }

  /** Removes rows at zero references (none exist unless written by hand or by a bug). */
  dropDeadRows(): Promise<{ objects: number; chunks: string[] }> {
    return this.sql.tx(async (tx) => {
      const dead = await tx.all<{ cid: string }>(DEAD_OBJECTS);
      const chunks: string[] = [];
      for (const o of dead) chunks.push(...(await dropObject(tx, o.cid, (await tx.all<{ hash: string }>(MANIFEST_HASHES, [o.cid])).map((r) => r.hash))));
      const zero = await tx.all<{ hash: string }>(DEAD_CHUNKS);
      return { objects: dead.length, chunks: [...chunks, ...zero.map((z) => z.hash)] };
    }, LOCKED);
  }

  async counts(): Promise<{ objects: number; chunks: number; bytes: number }> {
    const objects = (await this.sql.get<{ n: number }>(OBJECT_COUNT))?.n ?? 0;
    const chunks = await this.sql.get<{ n: number; bytes: number }>(CHUNK_COUNT);
    return { objects, chunks: chunks?.n ?? 0, bytes: chunks?.bytes ?? 0 };
  }
}

function distinct(manifest: readonly ChunkRef[]): ChunkRef[] {
  return [...new Map(manifest.map((c) => [c.hash, c] as const)).values()];
}

/**
 * Deletes an object whose count reached zero (its row is locked by the caller's update) and its
 * manifest (`hashes`: its distinct chunks, read under that lock); its chunks lose a reference.
 * Returns the chunks now at zero, whose rows go too. All sent at once: one round trip on PostgreSQL.
 */
async function dropObject(tx: Queryable, cid: string, hashes: readonly string[]): Promise<string[]> {
  const dropped = together(tx.run(DROP_MANIFEST, [cid]), tx.run(DROP_OBJECT, [cid]));
  // Sorted: two transactions sharing chunks lock their rows in one order (no deadlock).
  const zeroes = [...batches([...hashes].sort())].map((batch) => together(tx.run(UNREF_CHUNKS(batch.length), batch), tx.all<{ hash: string }>(DROP_ZERO_CHUNKS(batch.length), batch)));
  const [, freed] = await together(dropped, together(...zeroes));
  return freed.flatMap(([, rows]) => rows.map((z) => z.hash));
}
