/**
 * A directory entry as searches read it, shared by both dialects' search files (search-sqlite.ts,
 * search-pg.ts) and the newest-first listing (search.ts), so they select the same columns, keep
 * the same rows and answer the same shape.
 */
import type { SearchResult } from "./search.ts";
import { storesSql } from "../storage/files.ts";

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

/** The entry's owner keeps that Cid here, on either back-end: the catalog's condition. */
export const STORED = storesSql({ cid: "e.cid", did: "e.did" });

export const toResult = (r: EntryRow): SearchResult => ({
  Mid: r.mid,
  Name: r.name,
  Size: Number(r.size),
  Public: Boolean(r.public),
  Price: Number(r.price),
  keywords: JSON.parse(r.keywords) as string[],
  Owner: r.owner,
});
