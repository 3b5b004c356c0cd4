/**
 * Which blocks the trustless gateway serves without a voucher (D17): a block is public when it
 * belongs to the DAG of a root that some owner stores here on `ipfs` and has published in the
 * directory as public and free (a priced entry is sold, so not free to read). The block → root
 * index is the ipfs back-end's `ipfs_object_blocks` (every block of a pinned root, written in the
 * commit transaction, removed when the pin goes; roots pinned before it existed are indexed at
 * start by src/storage/ipfs/migrate.ts), so a block of a deleted or unpublished file stops being
 * served at once.
 *
 * The answer names the owners whose allowance may pay for the read, in a fixed order.
 */
import { getAddress, type Address } from "viem";
import type { Queryable } from "../db/sql.ts";

/** At most this many owners are tried for one read (any one of them pays). */
const OWNERS_TRIED = 8;

// `public` is compared with a bound true: a boolean on PostgreSQL, 1 on SQLite.
const PUBLIC_OWNERS = `SELECT DISTINCT e.owner AS owner FROM ipfs_object_blocks o
  JOIN directory_entries e ON e.cid = o.cid
  WHERE o.key = $1 AND e.public = $2 AND e.price = '0'
    AND EXISTS (SELECT 1 FROM files f WHERE f.backend = 'ipfs' AND f.cid = e.cid AND f.did = e.did)
  ORDER BY e.owner LIMIT ${OWNERS_TRIED}`;
const BLOCK_SIZE = "SELECT size FROM ipfs_blocks WHERE key = $1";

/** The owners whose free public content contains the block stored under `key`; empty = not public. */
export async function publicOwners(q: Queryable, key: string): Promise<Address[]> {
  const rows = await q.all<{ owner: string }>(PUBLIC_OWNERS, [key, true]);
  return rows.map((r) => getAddress(r.owner));
}

/** A stored block's size (for HEAD), without reading it. */
export async function blockSize(q: Queryable, key: string): Promise<number | undefined> {
  return (await q.get<{ size: number }>(BLOCK_SIZE, [key]))?.size;
}
