/**
 * Reference counts of pinned roots and of their blocks (schema.ts), on one SQL text for SQLite and
 * PostgreSQL (D16). Counts change only by relative updates (`refs = refs + 1`, `refs - 1`) in
 * READ COMMITTED transactions, so parallel commits and releases on many gateways never lose a
 * count (each update waits for the other's row lock and applies to what it left), and a block's
 * row and its root's row change together: a block is referenced exactly while some pinned root's
 * DAG contains it.
 */
import { allInBatches, batches, placeholders, type Queryable, type Sql, together } from "../../db/sql.ts";
import type { BlockSizes } from "./put.ts";

/** One more reference, or the root's row; `refs` 1 means this commit made it. */
const ADD_PIN = "INSERT INTO ipfs_pins (cid, refs, size) VALUES ($1, 1, $2) ON CONFLICT (cid) DO UPDATE SET refs = ipfs_pins.refs + 1";
/**
 * Whether the commit in this transaction made the root's row ($1: its Cid), as a condition of the
 * statements that only that commit runs: they go out with ADD_PIN instead of after its answer
 * (one round trip on PostgreSQL). Read after ADD_PIN in the same transaction, `refs` is what it
 * left: a row at zero never outlives its transaction, and another commit or release of the same
 * Cid waits for this one's row lock.
 */
const MADE_HERE = "EXISTS (SELECT 1 FROM ipfs_pins WHERE cid = $1 AND refs = 1)";
/** True, naming $1 (the Cid), which ADD_BLOCKS binds without using otherwise: PostgreSQL must infer its type. */
const ALWAYS = "CAST($1 AS TEXT) IS NOT NULL";
// INSERT … SELECT from VALUES (columns column1… on both databases) so that a WHERE can apply
// (`when`: MADE_HERE, or ALWAYS when indexing an existing root's DAG); SQLite needs that WHERE
// anyway to read the ON CONFLICT of an INSERT … SELECT.
const ADD_OBJECT_BLOCKS = (n: number, when: string) =>
  `INSERT INTO ipfs_object_blocks (cid, key) SELECT CAST($1 AS TEXT), column1 FROM (VALUES ${Array.from({ length: n }, (_, i) => `($${i + 2})`).join(", ")}) AS v WHERE ${when}
   ON CONFLICT (cid, key) DO NOTHING`;
const ADD_BLOCKS = (n: number, when: string) =>
  `INSERT INTO ipfs_blocks (key, size, refs)
   SELECT column1, column2, 1 FROM (VALUES ${Array.from({ length: n }, (_, i) => `($${2 * i + 2}, CAST($${2 * i + 3} AS BIGINT))`).join(", ")}) AS v WHERE ${when}
   ON CONFLICT (key) DO UPDATE SET refs = ipfs_blocks.refs + 1`;
const DROP_REF = "UPDATE ipfs_pins SET refs = refs - 1 WHERE cid = $1 RETURNING refs";
/** Whether the root's last reference went in this transaction ($1: its Cid): the condition of what
 * follows DROP_REF, sent with it rather than after its answer (one round trip on PostgreSQL). */
const GONE_HERE = "EXISTS (SELECT 1 FROM ipfs_pins WHERE cid = $1 AND refs <= 0)";
const UNREF_BLOCKS = `UPDATE ipfs_blocks SET refs = refs - 1 WHERE key IN (SELECT key FROM ipfs_object_blocks WHERE cid = $1) AND ${GONE_HERE}`;
const DROP_ZERO_BLOCKS = `DELETE FROM ipfs_blocks WHERE refs <= 0 AND key IN (SELECT key FROM ipfs_object_blocks WHERE cid = $1) AND ${GONE_HERE} RETURNING key`;
const DROP_OBJECT_BLOCKS = `DELETE FROM ipfs_object_blocks WHERE cid = $1 AND ${GONE_HERE}`;
/** Last: the statements before it read the root's row. */
const DROP_PIN = "DELETE FROM ipfs_pins WHERE cid = $1 AND refs <= 0";
const BLOCK_REFERENCED = "SELECT 1 AS one FROM ipfs_blocks WHERE key = $1 AND refs > 0";
const BLOCKS_AMONG = (n: number) => `SELECT key FROM ipfs_blocks WHERE key IN (${placeholders(n)}) AND refs > 0`;
const UNINDEXED = "SELECT cid FROM ipfs_pins p WHERE NOT EXISTS (SELECT 1 FROM ipfs_object_blocks o WHERE o.cid = p.cid)";
const LOCK_PIN = "SELECT 1 AS one FROM ipfs_pins WHERE cid = $1 FOR UPDATE";
const INDEXED = "SELECT 1 AS one FROM ipfs_object_blocks WHERE cid = $1 LIMIT 1";
const PINNED = "SELECT refs, size FROM ipfs_pins WHERE cid = $1";
const PIN_COUNT = "SELECT COUNT(*) AS n FROM ipfs_pins";

/** See the header. */
const LOCKED = { isolation: "read committed" } as const;

/** One more reference to `cid`; the first one also makes its blocks referenced. Two first
 * commits at once: the second's insert waits for the first's row, then only counts. */
export function addRef(sql: Sql, cid: string, size: number, blocks: BlockSizes): Promise<void> {
  return sql.tx((tx) => addRefIn(tx, cid, size, blocks), LOCKED);
}

/** `addRef`'s statements in the caller's READ COMMITTED transaction (an upload's file row's):
 * relative updates only, so a retried transaction may run them again. */
export async function addRefIn(tx: Queryable, cid: string, size: number, blocks: BlockSizes): Promise<void> {
  // All sent at once, in this order; the DAG's rows only when this commit made the root's row.
  await together(tx.run(ADD_PIN, [cid, size]), referenceBlocks(tx, cid, blocks, MADE_HERE));
}

/** Writes the DAG's rows of a root whose pin row exists and that has none yet, when `when` holds. */
function referenceBlocks(tx: Queryable, cid: string, blocks: BlockSizes, when = ALWAYS): Promise<unknown> {
  // Sorted: two commits sharing blocks lock their rows in one order (no deadlock).
  const entries = [...blocks].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  // Sent together, in order: one round trip on PostgreSQL.
  return together(
    ...[...batches(entries)].flatMap((part) => [
      tx.run(ADD_OBJECT_BLOCKS(part.length, when), [cid, ...part.map(([key]) => key)]),
      tx.run(ADD_BLOCKS(part.length, when), [cid, ...part.flatMap(([key, size]) => [key, size])]),
    ]),
  );
}

/**
 * One reference less. At zero the root's row and its block rows go, and every block no other
 * root contains loses its row: those keys are returned, for the caller to delete through the
 * guard. `left` is undefined when there was no reference.
 */
export function dropRef(sql: Sql, cid: string): Promise<{ left: number | undefined; freed: string[] }> {
  return sql.tx((tx) => dropRefIn(tx, cid), LOCKED);
}

/** `dropRef`'s statements in the caller's READ COMMITTED transaction (the file row's that
 * replaced an entry): relative updates only, so a retried transaction may run them again. */
export async function dropRefIn(tx: Queryable, cid: string): Promise<{ left: number | undefined; freed: string[] }> {
  // All sent at once, in this order; those after DROP_REF act only when it took the last reference.
  const [row, , freed] = await together(
    tx.get<{ refs: number }>(DROP_REF, [cid]),
    tx.run(UNREF_BLOCKS, [cid]),
    tx.all<{ key: string }>(DROP_ZERO_BLOCKS, [cid]),
    tx.run(DROP_OBJECT_BLOCKS, [cid]),
    tx.run(DROP_PIN, [cid]),
  );
  if (!row) return { left: undefined, freed: [] };
  if (row.refs > 0) return { left: row.refs, freed: [] };
  return { left: 0, freed: freed.map((r) => r.key) };
}

/** Whether a pinned root contains the block (for the guard's deciding transaction). */
export async function blockReferenced(q: Queryable, key: string): Promise<boolean> {
  return (await q.get(BLOCK_REFERENCED, [key])) !== undefined;
}

/** The keys among `keys` that a pinned root contains (an upload's: read in its pin's transaction). */
export async function referencedAmong(q: Queryable, keys: readonly string[]): Promise<Set<string>> {
  return new Set((await allInBatches<{ key: string }>(q, BLOCKS_AMONG, keys)).map((r) => r.key));
}

/** Pinned roots whose blocks are not indexed yet (content from before migration 0012). */
export async function unindexedRoots(sql: Sql): Promise<string[]> {
  return (await sql.all<{ cid: string }>(UNINDEXED)).map((r) => r.cid);
}

/**
 * Indexes an existing pin's DAG once (a no-op if the pin is gone or already indexed). The pin's
 * row lock makes two gateways migrating at once index it once: the second waits, then finds rows.
 */
export function indexRoot(sql: Sql, cid: string, blocks: BlockSizes): Promise<void> {
  return sql.tx(async (tx) => {
    if (!(await tx.get(LOCK_PIN, [cid]))) return;
    if (await tx.get(INDEXED, [cid])) return;
    await referenceBlocks(tx, cid, blocks);
  }, LOCKED);
}

export function pinned(sql: Sql, cid: string): Promise<{ refs: number; size: number } | undefined> {
  return sql.get(PINNED, [cid]);
}

/** Up to `limit` pinned roots whose DAG contains the block stored under `key` (the block → root
 * index): whose content a served block is part of. */
export async function rootsOfBlock(q: Queryable, key: string, limit: number): Promise<string[]> {
  return (await q.all<{ cid: string }>(`${rootsOfBlockSql("$1")} ORDER BY cid LIMIT $2`, [key, limit])).map((r) => r.cid);
}

export async function pinnedCount(sql: Sql): Promise<number> {
  return (await sql.get<{ n: number }>(PIN_COUNT))?.n ?? 0;
}

/**
 * The pinned roots whose DAG holds the block stored under `key` (an SQL expression of the
 * caller's), as a subquery: how the trustless gateway asks which roots a block belongs to inside
 * its one query, without naming this table.
 */
export const rootsOfBlockSql = (key: string) => `SELECT cid FROM ipfs_object_blocks WHERE key = ${key}`;

/** A stored block's size (for HEAD), without reading it. */
export async function blockSize(q: Queryable, key: string): Promise<number | undefined> {
  return (await q.get<{ size: number }>("SELECT size FROM ipfs_blocks WHERE key = $1", [key]))?.size;
}
