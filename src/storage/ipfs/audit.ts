/**
 * What the operator's consistency check and backup (src/ops) read of the ipfs back-end's rows, and
 * the counts it may set right: the back-end keeps its tables to itself (one owner per table), so
 * every look at them from outside goes through here. Reads are paged by key, in constant memory.
 *
 * `ipfs_blocks.refs` (the pinned roots whose DAG holds the block) changes in one transaction with
 * the `ipfs_object_blocks` rows it counts, so `recountBlock` may set it at any time under the
 * block's row lock. `ipfs_pins.refs` counts holders outside this back-end (file rows, S3 parts),
 * which change in other transactions: src/ops sets it only with no gateway running.
 */
import { allInBatches, placeholders, type Queryable, type Sql } from "../../db/sql.ts";

/** A block a row keeps: its blob key (`ipfs/<multihash, base32>`) and size. */
export interface KeptBlock {
  key: string;
  size: number;
}

/** A pinned root as its row says, with how many blocks its DAG's index lists. */
export interface PinShape {
  cid: string;
  refs: number;
  size: number;
  indexed: number;
}

const PAGE = 1000;
const BLOCKS_AFTER = "SELECT key, size FROM ipfs_blocks WHERE key > $1 ORDER BY key LIMIT $2";
const PINS_AFTER = `SELECT p.cid, p.refs, p.size, (SELECT COUNT(*) FROM ipfs_object_blocks o WHERE o.cid = p.cid) AS indexed
  FROM ipfs_pins p WHERE p.cid > $1 ORDER BY p.cid LIMIT $2`;
const BLOCK_COUNTS = `SELECT b.key, b.refs, (SELECT COUNT(*) FROM ipfs_object_blocks o WHERE o.key = b.key) AS actual
  FROM ipfs_blocks b WHERE b.key > $1 ORDER BY b.key LIMIT $2`;
const UNKEPT = `SELECT o.cid, o.key FROM ipfs_object_blocks o WHERE NOT EXISTS (SELECT 1 FROM ipfs_blocks b WHERE b.key = o.key) ORDER BY o.cid, o.key LIMIT $1`;
const ORPHAN_INDEX = `SELECT COUNT(*) AS n FROM ipfs_object_blocks o WHERE NOT EXISTS (SELECT 1 FROM ipfs_pins p WHERE p.cid = o.cid)`;
const INDEX_OF = "SELECT key FROM ipfs_object_blocks WHERE cid = $1";
const SIZES_AMONG = (n: number) => `SELECT key, size FROM ipfs_blocks WHERE key IN (${placeholders(n)})`;
const LOCK_BLOCK = "SELECT refs FROM ipfs_blocks WHERE key = $1 FOR UPDATE";
const COUNT_HOLDING = "SELECT COUNT(*) AS n FROM ipfs_object_blocks WHERE key = $1";
const SET_BLOCK_REFS = "UPDATE ipfs_blocks SET refs = $2 WHERE key = $1";
/** A row at zero never outlives its transaction (schema.ts): its blob is the sweep's then. */
const DROP_ZERO_BLOCK = "DELETE FROM ipfs_blocks WHERE key = $1 AND refs <= 0";
const SET_PIN_REFS = "UPDATE ipfs_pins SET refs = $2 WHERE cid = $1";
const TOTALS = "SELECT COUNT(*) AS blocks, CAST(COALESCE(SUM(size), 0) AS BIGINT) AS bytes FROM ipfs_blocks";

/** Every block a row keeps, in key order, a page at a time. */
export async function* keptBlocks(q: Queryable): AsyncGenerator<KeptBlock> {
  for (let after = ""; ; ) {
    const page = await q.all<KeptBlock>(BLOCKS_AFTER, [after, PAGE]);
    yield* page;
    if (page.length < PAGE) return;
    after = (page[page.length - 1] as KeptBlock).key;
  }
}

/** Every pinned root with the size of its DAG's index, in Cid order, a page at a time. */
export async function* pinShapes(q: Queryable): AsyncGenerator<PinShape> {
  for (let after = ""; ; ) {
    const page = await q.all<PinShape>(PINS_AFTER, [after, PAGE]);
    yield* page;
    if (page.length < PAGE) return;
    after = (page[page.length - 1] as PinShape).cid;
  }
}

/** The block keys a pinned root's index lists. */
export async function indexOf(q: Queryable, cid: string): Promise<Set<string>> {
  return new Set((await q.all<{ key: string }>(INDEX_OF, [cid])).map((r) => r.key));
}

/** The sizes the rows of `keys` say (a key without a row is left out). */
export async function blockSizes(q: Queryable, keys: readonly string[]): Promise<Map<string, number>> {
  return new Map((await allInBatches<KeptBlock>(q, SIZES_AMONG, keys)).map((r) => [r.key, r.size]));
}

/** Blocks whose reference count is not the number of pinned roots whose index lists them. */
export async function* blockRefDrift(q: Queryable): AsyncGenerator<{ key: string; refs: number; actual: number }> {
  for (let after = ""; ; ) {
    const page = await q.all<{ key: string; refs: number; actual: number }>(BLOCK_COUNTS, [after, PAGE]);
    for (const b of page) if (b.refs !== b.actual) yield b;
    if (page.length < PAGE) return;
    after = (page[page.length - 1] as { key: string }).key;
  }
}

/** Index rows naming a block no row keeps (at most `limit`), and index rows of roots not pinned. */
export async function indexGaps(q: Queryable, limit = 100): Promise<{ unkept: { cid: string; key: string }[]; orphans: number }> {
  const unkept = await q.all<{ cid: string; key: string }>(UNKEPT, [limit]);
  const orphans = (await q.get<{ n: number }>(ORPHAN_INDEX))?.n ?? 0;
  return { unkept, orphans };
}

/** Sets a block's count to the roots holding it now, under its row lock (a row none holds goes);
 * the count it had and has. */
export function recountBlock(sql: Sql, key: string): Promise<{ was: number; now: number } | undefined> {
  return sql.tx(
    async (tx) => {
      const row = await tx.get<{ refs: number }>(LOCK_BLOCK, [key]);
      if (!row) return undefined;
      const now = (await tx.get<{ n: number }>(COUNT_HOLDING, [key]))?.n ?? 0;
      await tx.run(SET_BLOCK_REFS, [key, now]);
      if (now === 0) await tx.run(DROP_ZERO_BLOCK, [key]);
      return { was: row.refs, now };
    },
    { isolation: "read committed" },
  );
}

/** Sets a root's reference count (its holders are outside this back-end: see the header). */
export async function setPinRefs(sql: Sql, cid: string, refs: number): Promise<void> {
  await sql.run(SET_PIN_REFS, [cid, refs]);
}

/** Blocks a row keeps, and their bytes. */
export async function blockTotals(q: Queryable): Promise<{ blocks: number; bytes: number }> {
  return (await q.get<{ blocks: number; bytes: number }>(TOTALS)) ?? { blocks: 0, bytes: 0 };
}
