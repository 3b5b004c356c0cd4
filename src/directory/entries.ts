/**
 * A directory entry as searches read it, shared by both dialects' search files (search-sqlite.ts,
 * search-pg.ts) and the newest-first listing (search.ts), so they select the same columns, keep
 * the same rows and answer the same shape.
 */
import type { SearchResult } from "./search.ts";

export interface EntryRow {
  owner: string;
  mid: string;
  name: string;
  size: string;
  price: string;
  /** 0/1 on SQLite, a boolean on PostgreSQL. */
  public: number | boolean;
  /** JSON text. */
  keywords: string;
}

export const ENTRY_COLUMNS = "e.owner, e.mid, e.name, e.size, e.price, e.public, e.keywords";

/** The entry's owner keeps that Cid here: `files` by (backend, cid, did), its index's order. */
export const STORED = "EXISTS (SELECT 1 FROM files f WHERE f.backend IN ('dfs', 'ipfs') AND f.cid = e.cid AND f.did = e.did)";

export const toResult = (r: EntryRow): SearchResult => ({
  Mid: r.mid,
  Name: r.name,
  Size: Number(r.size),
  Public: Boolean(r.public),
  Price: Number(r.price),
  keywords: JSON.parse(r.keywords) as string[],
  Owner: r.owner,
});
