/**
 * Directory search, `GET /challenge?query=&page=&size=` (spec 4.1 row 7, D10): the entries whose
 * owner stores that Cid at this gateway (on either back-end), matching the query's words as
 * prefixes of words in names and keywords, best bm25 first (a name match weighs twice a keyword
 * match; see migration 0008) — a query with more than RANK_WINDOW matches is ranked among its
 * RANK_WINDOW newest. No query, or a blank one, lists the stored entries newest first.
 *
 * Answers spec 2.7 objects, plus `Owner`: the same Mid can be published by several owners, and
 * buying read permission (`buyRead(owner, mid)`) needs to know whose entry it is.
 */
import type { Database } from "bun:sqlite";
import { storageError } from "../http/errors.ts";
import { matchExpression } from "./text.ts";

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

interface Row {
  owner: string;
  mid: string;
  name: string;
  size: string;
  price: string;
  public: number;
  keywords: string;
}

const COLUMNS = "e.owner, e.mid, e.name, e.size, e.price, e.public, e.keywords";
/** The entry's owner keeps that Cid here: `files` by (backend, cid, did), its index's order. */
const STORED = "EXISTS (SELECT 1 FROM files f WHERE f.backend IN ('dfs', 'ipfs') AND f.cid = e.cid AND f.did = e.did)";

const toResult = (r: Row): SearchResult => ({
  Mid: r.mid,
  Name: r.name,
  Size: Number(r.size),
  Public: r.public === 1,
  Price: Number(r.price),
  keywords: JSON.parse(r.keywords) as string[],
  Owner: r.owner,
});

/** Broad queries are ranked among this many of their newest matches (see `directorySearch`). */
export const RANK_WINDOW = 20_000;

/**
 * The search behind GET /challenge. bun:sqlite is synchronous, so a search holds the event loop
 * for as long as it runs; its cost is kept bounded:
 *
 * 1. bm25 is computed by FTS5 alone, over the match's rowids, and only the best
 *    `offset + size` (plus slack) are joined to entries and checked against `files`; when the
 *    stored-filter drops too many, the candidate list is widened and the step repeated. Joining
 *    every match before sorting, as one plain query would, costs 2–3× as much on broad queries.
 * 2. A query with more than `rankWindow` matches is ranked among its `rankWindow` newest matches
 *    (a rowid range, which FTS5 applies while reading its lists): computing bm25 for hundreds of
 *    thousands of rows (a 3-letter prefix over a million entries) takes seconds. Narrower
 *    queries — nearly all — are ranked over every match.
 */
export function directorySearch(sqlite: Database, opts: { rankWindow?: number } = {}) {
  const rankWindow = opts.rankWindow ?? RANK_WINDOW;
  const nthNewest = sqlite.prepare<{ rowid: number }, [string, number]>("SELECT rowid FROM directory_fts WHERE directory_fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?");
  const best = sqlite.prepare<{ id: number }, [string, number, number]>(
    "SELECT rowid AS id FROM directory_fts WHERE directory_fts MATCH ? AND rowid >= ? ORDER BY rank, rowid LIMIT ?",
  );
  const stored = sqlite.prepare<Row & { id: number }, [string]>(`SELECT e.id, ${COLUMNS} FROM directory_entries e WHERE e.id IN (SELECT value FROM json_each(?)) AND ${STORED}`);
  const newest = sqlite.prepare<Row, [number, number]>(`SELECT ${COLUMNS} FROM directory_entries e WHERE ${STORED} ORDER BY e.id DESC LIMIT ? OFFSET ?`);

  function ranked(match: string, offset: number, size: number): Row[] {
    const floor = nthNewest.get(match, rankWindow - 1)?.rowid ?? 0;
    const wanted = offset + size;
    for (let limit = wanted * 2 + 16; ; limit *= 4) {
      const ids = best.all(match, floor, limit).map((r) => r.id);
      const rows = new Map(stored.all(JSON.stringify(ids)).map((r) => [r.id, r]));
      const inOrder = ids.flatMap((id) => rows.get(id) ?? []);
      // Enough stored rows for this page, or every candidate seen: done.
      if (inOrder.length >= wanted || ids.length < limit) return inOrder.slice(offset, wanted);
    }
  }

  return function search(p: SearchQuery): SearchResult[] {
    const { text, page, size } = parseSearch(p);
    const offset = (page - 1) * size;
    if (!text) return newest.all(size, offset).map(toResult);
    const match = matchExpression(text);
    if (!match) return [];
    return ranked(match, offset, size).map(toResult);
  };
}
