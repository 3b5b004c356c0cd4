/**
 * Directory search, `GET /challenge?query=&page=&size=` (spec 4.1 row 7, D10): the entries whose
 * owner stores that Cid at this gateway (on either back-end), matching the query's words as
 * words in names and keywords (the last word as a prefix), best first (a name match above a
 * keyword-only one) — a query with more than DF_CUTOFF matches (a common word) is not ranked but
 * listed newest first, name matches before keyword-only ones. No query, or a blank one, lists
 * the stored entries newest first. The SQL is per dialect (D16): FTS5 + bm25 in
 * search-sqlite.ts, tsvector + GIN + ts_rank in search-pg.ts.
 *
 * Answers spec 2.7 objects, plus `Owner`: the same Mid can be published by several owners, and
 * buying read permission (`buyRead(owner, mid)`) needs to know whose entry it is.
 */
import type { Queryable } from "../db/sql.ts";
import { storageError } from "../http/errors.ts";
import { ENTRY_COLUMNS, STORED, toResult, type EntryRow } from "./entries.ts";
import { pgText, rankedPg } from "./search-pg.ts";
import { rankedSqlite, sqliteText } from "./search-sqlite.ts";

export interface SearchResult {
  Mid: string;
  Name: string;
  Size: number;
  Public: boolean;
  /** Gwei to buy read permission. */
  Price: number;
  keywords: string[];
  /** The entry's owner (EIP-55 address): an extension of spec 2.7. */
  Owner: string;
}

export interface SearchQuery {
  query?: string;
  page?: string;
  size?: string;
}

export const SEARCH_LIMITS = { maxPage: 1000, defaultSize: 20, maxSize: 100, maxQueryChars: 1024 } as const;

function bounded(name: string, raw: string | undefined, fallback: number, max: number): number {
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d{1,7}$/.test(raw)) throw storageError.badRequest(`${name} must be a whole number from 1 to ${max}`);
  const n = Number(raw);
  if (n < 1 || n > max) throw storageError.badRequest(`${name} must be a whole number from 1 to ${max}`);
  return n;
}

/** Validates the query string; 400 (storage error model) for anything out of bounds. */
export function parseSearch(p: SearchQuery) {
  const page = bounded("page", p.page, 1, SEARCH_LIMITS.maxPage);
  const size = bounded("size", p.size, SEARCH_LIMITS.defaultSize, SEARCH_LIMITS.maxSize);
  const text = (p.query ?? "").trim();
  if (text.length > SEARCH_LIMITS.maxQueryChars) throw storageError.badRequest(`query is at most ${SEARCH_LIMITS.maxQueryChars} characters`);
  return { text, page, size };
}

const NEWEST = `SELECT ${ENTRY_COLUMNS} FROM directory_entries e WHERE ${STORED} ORDER BY e.id DESC LIMIT $1 OFFSET $2`;

/** The document-frequency cutoff: queries with more matches than this are listed newest first
 * instead of ranked (search-sqlite.ts, search-pg.ts; ranking costs per match). */
export const DF_CUTOFF = 1_000;

/** The search SQL that differs by dialect, and the text index that goes with it. */
export const searchDialects = {
  sqlite: { ranked: rankedSqlite, text: sqliteText },
  postgres: { ranked: rankedPg, text: pgText },
} as const;

/** The search behind GET /challenge, on either database. */
export function directorySearch(sql: Queryable, opts: { cutoff?: number } = {}) {
  const cutoff = opts.cutoff ?? DF_CUTOFF;
  const { ranked } = searchDialects[sql.dialect];
  return async function search(p: SearchQuery): Promise<SearchResult[]> {
    const { text, page, size } = parseSearch(p);
    const offset = (page - 1) * size;
    const rows = text ? await ranked(sql, text, offset, size, cutoff) : await sql.all<EntryRow>(NEWEST, [size, offset]);
    return rows.map(toResult);
  };
}
