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
import { closedEntriesSql, freePublicNameSql, freePublicOwnersSql } from "../directory/access.ts";
import { blockSize, rootsOfBlockSql } from "../storage/ipfs/pins.ts";

export { blockSize };

/** At most this many owners are tried for one read (any one of them pays). */
const OWNERS_TRIED = 8;

// One query: the block's roots (the ipfs back-end's index), their free public entries and that
// their owners store them (the directory's and the catalog's conditions). `public` is compared
// with a bound true: a boolean on PostgreSQL, 1 on SQLite.
const PUBLIC_OWNERS = freePublicOwnersSql(rootsOfBlockSql("$1"), "$2", OWNERS_TRIED);

/** The owners whose free public content contains the block stored under `key`; empty = not public. */
export async function publicOwners(q: Queryable, key: string): Promise<Address[]> {
  const rows = await q.all<{ owner: string }>(PUBLIC_OWNERS, [key, true]);
  return rows.map((r) => getAddress(r.owner));
}

// The path gateway's own questions, on the same conditions (the directory's and the catalog's):
// the name a free public entry gives its root, and, for a refusal that says how to read it, the
// entries of a Cid that are not free.
const PUBLIC_NAME = freePublicNameSql("$1", "$2");
const CLOSED_ENTRIES = closedEntriesSql("$1", "$2", OWNERS_TRIED);

/** The name a free public entry of the root `cid` (canonical) is published under, if any. */
export async function publicName(q: Queryable, cid: string): Promise<string | undefined> {
  return (await q.get<{ name: string }>(PUBLIC_NAME, [cid, true]))?.name;
}

/** Entries of `cid` (canonical) stored here that are not free to read: sold (a price) or for
 * chosen readers (not public). Their existence is the directory's public record. */
export async function closedEntries(q: Queryable, cid: string): Promise<{ priced: boolean; price: string }[]> {
  const rows = await q.all<{ price: string }>(CLOSED_ENTRIES, [cid, true]);
  return rows.map((r) => ({ priced: r.price !== "0", price: r.price }));
}
