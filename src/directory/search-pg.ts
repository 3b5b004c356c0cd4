/**
 * Directory search on PostgreSQL (D16): the GIN index over `directory_search_document(name,
 * keywords)` (migrations-pg/0001_directory_search.sql: NFKC + unaccent + the `simple`
 * configuration, names weighted A and keywords B). The same invariants as FTS5 on SQLite
 * (search-sqlite.ts), not the same scores:
 *
 * - accent-, case- and width-insensitive: the query goes through the same `stowage_fold`;
 * - every word is a prefix (`'word':*`), OR-ed, so entries matching more words rank first (FTS5
 *   does the same; D16's "prefix on the last word" is the least of it);
 * - a name match ranks above a keyword-only one (ts_rank: A = 1.0, B = 0.4);
 * - the same document-frequency cutoff: a query with more than `rankWindow` matches is ranked
 *   among its `rankWindow` newest ones, so a common word over millions of entries costs a
 *   bounded ts_rank.
 *
 * User text never reaches tsquery syntax: words hold only letters, digits and marks (text.ts
 * `queryWords`), and each is quoted.
 */
import type { Queryable } from "../db/sql.ts";
import { ENTRY_COLUMNS, STORED, type EntryRow } from "./entries.ts";
import { queryWords } from "./text.ts";

const QUERY = "to_tsquery('simple', stowage_fold($1))";
/** The index's own expression: the planner uses the GIN index only for this exact text. */
const DOC = "directory_search_document(e.name, e.keywords)";
// The matches come from the GIN index (MATERIALIZED keeps the planner from walking the primary
// key backwards and testing every entry instead); ts_rank runs over the window's stored rows only.
export const RANKED = `WITH matched AS MATERIALIZED (SELECT e.id FROM directory_entries e WHERE ${DOC} @@ ${QUERY}),
  recent AS (SELECT id FROM matched ORDER BY id DESC LIMIT $2)
  SELECT ${ENTRY_COLUMNS} FROM directory_entries e
  WHERE e.id IN (SELECT id FROM recent) AND ${STORED}
  ORDER BY ts_rank(${DOC}, ${QUERY}) DESC, e.id
  LIMIT $3 OFFSET $4`;

/** A tsquery (before folding) for a user's query: each word a quoted prefix, OR-ed. */
export function tsqueryText(query: string): string | undefined {
  const words = queryWords(query);
  return words.length === 0 ? undefined : words.map((w) => `'${w}':*`).join(" | ");
}

/** The page `offset … offset + size` of a query's stored matches, best first. */
export async function rankedPg(q: Queryable, query: string, offset: number, size: number, rankWindow: number): Promise<EntryRow[]> {
  const text = tsqueryText(query);
  if (!text) return [];
  return q.all<EntryRow>(RANKED, [text, rankWindow, size, offset]);
}

/** No rows to keep: the index follows `directory_entries` by itself. */
export const pgText = {
  async put(_tx: Queryable, _id: number, _name: string, _keywords: readonly string[]) {},
  async drop(_tx: Queryable, _id: number) {},
};
