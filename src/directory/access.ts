/**
 * Read access that the directory gives (D9, D10), from the indexed state in the database:
 *
 * - `readGrant(reader, kind, cid)` — the storage service's hook for downloads by someone who does
 *   not own the file: the owner of some directory entry for that Cid, whose owner stores that Cid on
 *   that back-end here, is public, or grants the reader read permission, or was bought by the
 *   reader. An entry for a Cid its owner does not store grants nothing, so publishing someone
 *   else's Cid as public opens nothing.
 * - `publicCids(owner, cids, q?)` — an upload's and listobjects' `Public`: those Cids whose
 *   owner's own entry is public, for a whole page in one query; in `q`, a transaction, when given
 *   (an upload's file row's: no round trip of its own on PostgreSQL).
 * - `bought(owner, mid, reader)` — a purchase indexed, for the buyer's key share of an encrypted entry.
 * - `published(owner, mid)` — an entry indexed: what the escrow status answers for, and nothing else.
 */
import { getAddress, type Address } from "viem";
import { allInBatches, placeholders, type Queryable } from "../db/sql.ts";
import type { BackendKind } from "../storage/backend.ts";
import type { ReadGrant } from "../storage/service.ts";
import { storesSql } from "../storage/files.ts";

// `public` is compared with a bound true: a boolean on PostgreSQL, 1 on SQLite.
const READABLE = `SELECT e.owner AS owner FROM directory_entries e
  WHERE e.cid = $1
    AND ${storesSql({ cid: "$1", did: "e.did", backend: "$2" })}
    AND (e.public = $4 OR e.owner = $3
      OR EXISTS (SELECT 1 FROM directory_grants g WHERE g.owner = e.owner AND g.mid = e.mid AND g.reader = $3)
      OR EXISTS (SELECT 1 FROM directory_purchases p WHERE p.owner = e.owner AND p.mid = e.mid AND p.reader = $3))
  LIMIT 1`;
/**
 * Whether `owner`'s own entry publishes `cid` as public (`yes` bound to true), as an SQL condition
 * over the caller's expressions: the catalog's listing embeds it (storage/files.ts PublicSql), so a
 * page and each file's `Public` are one query. Several entries may name one Cid: EXISTS answers once.
 */
export const publicSql = (at: { cid: string; owner: string; yes: string }) =>
  `EXISTS (SELECT 1 FROM directory_entries e WHERE e.cid = ${at.cid} AND e.owner = ${at.owner} AND e.public = ${at.yes})`;

/**
 * The owners (at most `limit`, in order) whose free public entries name one of the Cids `cids`
 * selects (an SQL subquery of the caller's) and who store that Cid on ipfs here (`yes` bound to
 * true): whose allowance may pay for a public read of a block of those Cids (the trustless gateway).
 */
export const freePublicOwnersSql = (cids: string, yes: string, limit: number) => `SELECT DISTINCT e.owner AS owner FROM directory_entries e
  WHERE e.cid IN (${cids}) AND e.public = ${yes} AND e.price = '0'
    AND ${storesSql({ cid: "e.cid", did: "e.did", backend: "'ipfs'" })}
  ORDER BY e.owner LIMIT ${limit}`;

/** The name the first free public entry of the Cid `cid` publishes it under, its owner storing it
 * on ipfs here (`yes` bound to true): a path gateway's file name for a bare CID. */
export const freePublicNameSql = (cid: string, yes: string) => `SELECT e.name AS name FROM directory_entries e
  WHERE e.cid = ${cid} AND e.public = ${yes} AND e.price = '0'
    AND ${storesSql({ cid: "e.cid", did: "e.did", backend: "'ipfs'" })}
  ORDER BY e.id LIMIT 1`;

/** The prices (at most `limit`) of the entries of the Cid `cid` that are not free to read — sold,
 * or for readers their owner chose — their owners storing it on ipfs here (`yes` bound to true). */
export const closedEntriesSql = (cid: string, yes: string, limit: number) => `SELECT e.price AS price FROM directory_entries e
  WHERE e.cid = ${cid} AND NOT (e.public = ${yes} AND e.price = '0')
    AND ${storesSql({ cid: "e.cid", did: "e.did", backend: "'ipfs'" })}
  ORDER BY e.id LIMIT ${limit}`;

const BOUGHT = "SELECT 1 AS one FROM directory_purchases WHERE owner = $1 AND mid = $2 AND reader = $3";
const PUBLISHED = "SELECT 1 AS one FROM directory_entries WHERE owner = $1 AND mid = $2";
const publicOwn = (n: number) => `SELECT DISTINCT cid FROM directory_entries WHERE owner = $1 AND public = $2 AND cid IN (${placeholders(n, 3)})`;

export function directoryAccess(sql: Queryable) {
  const readGrant: ReadGrant = async (reader: Address, kind: BackendKind, cid: string) => {
    const row = await sql.get<{ owner: string }>(READABLE, [cid, kind, getAddress(reader), true]);
    return row ? getAddress(row.owner) : undefined;
  };

  const publicCids = async (owner: Address, cids: readonly string[], q: Queryable = sql): Promise<ReadonlySet<string>> => {
    const rows = await allInBatches<{ cid: string }>(q, publicOwn, [...new Set(cids)], [getAddress(owner), true]);
    return new Set(rows.map((r) => r.cid));
  };

  /** Whether `reader` bought `owner`'s entry `mid` (D20: the gateway then writes the buyer's key share). */
  const bought = async (owner: Address, mid: string, reader: Address) => Boolean(await sql.get(BOUGHT, [getAddress(owner), mid, getAddress(reader)]));

  /** Whether `owner` has published the entry `mid` (the index's view of the chain). */
  const published = async (owner: Address, mid: string) => Boolean(await sql.get(PUBLISHED, [getAddress(owner), mid]));

  return { readGrant, publicCids, bought, published };
}
