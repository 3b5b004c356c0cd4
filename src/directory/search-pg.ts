/**
 * Directory search on PostgreSQL (D16): the GIN index over the stored search document
 * `directory_entries.search` (migrations-pg 0001: NFKC + unaccent + the `simple` configuration,
 * names weighted A and keywords B; 0010: the stored column and its index). The same invariants
 * as FTS5 on SQLite (search-sqlite.ts), not the same scores:
 *
 * - accent-, case- and width-insensitive: the query goes through the same `stowage_fold`;
 * - earlier words are whole words and the last one a prefix (`'word':*`), OR-ed, so entries
 *   matching more words rank first;
 * - a name match ranks above a keyword-only one (ts_rank: A = 1.0, B = 0.4);
 * - the same document-frequency cutoff: a query with more than `cutoff` matches is not ranked
 *   but listed newest first, name matches (`'word':A`) before keyword-only ones; each tier is a
 *   walk down the primary key that stops at the page, testing the stored document of each row.
 *   As on SQLite, the test is made with every word whole first, and when that is already over
 *   the cutoff the last word is listed whole too (GIN reads a prefix by scanning every word it
 *   begins into one bitmap, as FTS5 merges them).
 * - the test reads the vocabulary (`directory_terms`, migrations-pg 0014: each lexeme's number of
 *   entries, kept by a trigger) instead of counting matches: GIN cannot count without visiting
 *   each match's heap row, 2–15 ms for the 1,001 of a common word at a million entries (issue
 *   10). The counts bound the query's matches — at least the most of any one word, at most their
 *   sum — and only a query whose bounds straddle the cutoff (several words, none common alone)
 *   is counted as before. The answer is the count's, so the results are too.
 *
 * User text never reaches tsquery syntax: words hold only letters, digits and marks (text.ts
 * `queryTerms`), and each is quoted.
 */
import type { Queryable } from "../db/sql.ts";
import { ENTRY_COLUMNS, STORED, type EntryRow } from "./entries.ts";
import { queryTerms } from "./text.ts";

const QUERY = "to_tsquery('simple', stowage_fold($1))";
const upTo = (n: number) => `(SELECT count(*) FROM (SELECT 1 FROM directory_entries e WHERE e.search @@ to_tsquery('simple', stowage_fold($${n})) LIMIT $3) m)`;
/** The document-frequency test in one round trip: 2 when the query with its last word whole
 * ($1) has more than $3 − 1 matches, else 1 when it has with the last word a prefix ($2), else 0.
 * Counted from the index, at most $3 heap rows each; the second count runs only when needed. */
export const COMMONNESS = `SELECT CASE WHEN ${upTo(1)} >= $3 THEN 2 WHEN ${upTo(2)} >= $3 THEN 1 ELSE 0 END AS c`;
/** The best $2 matches by rank (from the index, ts_rank over the stored document), then those
 * whose owner stores the Cid: checking `files` for every match first costs ≈ 35 µs a match. */
export const RANKED = `WITH best AS (
    SELECT e.id, ts_rank(e.search, ${QUERY}) AS r FROM directory_entries e WHERE e.search @@ ${QUERY}
    ORDER BY r DESC, e.id LIMIT $2)
  SELECT e.id, ${ENTRY_COLUMNS} FROM best JOIN directory_entries e ON e.id = best.id
  WHERE ${STORED}
  ORDER BY best.r DESC, best.id`;
/** $1 the query, $2 the same with every word restricted to names (weight A), $3 offset + size. */
export const NEWEST = `SELECT ${ENTRY_COLUMNS} FROM (
    (SELECT e.id, 0 AS tier FROM directory_entries e WHERE e.search @@ to_tsquery('simple', stowage_fold($2)) AND ${STORED} ORDER BY e.id DESC LIMIT $3)
    UNION ALL
    (SELECT e.id, 1 AS tier FROM directory_entries e WHERE e.search @@ ${QUERY} AND NOT e.search @@ to_tsquery('simple', stowage_fold($2)) AND ${STORED} ORDER BY e.id DESC LIMIT $3)
  ) page JOIN directory_entries e ON e.id = page.id
  ORDER BY page.tier, page.id DESC
  LIMIT $4 OFFSET $5`;

/** The vocabulary's bounds on a query's matches, in one round trip. $1: the query's words as a
 * JSON array, the last one last. Per form of the query — `whole` (every word whole) and `typed`
 * (the last word a prefix: every lexeme it begins) — the most entries any one word has and their
 * sum; `exact` is false when a word does not fold to exactly one lexeme (then only counting
 * tells). The prefix range is byte order (the column is COLLATE "C"), as tsquery's `:*` is. */
export const VOCABULARY = `WITH words AS (
    SELECT x.n = json_array_length($1::text::json) AS last, tsvector_to_array(to_tsvector('simple', stowage_fold(x.word))) AS lex
    FROM json_array_elements_text($1::text::json) WITH ORDINALITY AS x(word, n)),
  whole AS (
    SELECT w.last, coalesce((SELECT t.docs FROM directory_terms t WHERE t.term = w.lex[1]), 0) AS docs FROM words w),
  begun AS (
    SELECT b.most, b.total FROM words w CROSS JOIN LATERAL (
      SELECT max(t.docs) AS most, sum(t.docs) AS total FROM directory_terms t
      WHERE t.term >= w.lex[1] AND t.term < w.lex[1] || chr(1114111) AND starts_with(t.term, w.lex[1])) b
    WHERE w.last)
  SELECT (SELECT bool_and(cardinality(lex) = 1) FROM words) AS exact,
    (SELECT max(docs) FROM whole) AS "wholeMost", CAST((SELECT sum(docs) FROM whole) AS BIGINT) AS "wholeSum",
    greatest((SELECT max(docs) FROM whole WHERE NOT last), (SELECT max(most) FROM begun), 0) AS "typedMost",
    CAST((SELECT coalesce(sum(docs), 0) FROM whole WHERE NOT last) + (SELECT coalesce(sum(total), 0) FROM begun) AS BIGINT) AS "typedSum"`;

interface Bounds {
  exact: boolean;
  wholeMost: number;
  wholeSum: number;
  typedMost: number;
  typedSum: number;
}

/** Whether a query with matches between `most` and `sum` has more than `cutoff`; undefined when
 * the bounds do not tell. */
export function overCutoff(most: number, sum: number, cutoff: number): boolean | undefined {
  if (most > cutoff) return true;
  if (sum <= cutoff) return false;
  return undefined;
}

/** The COMMONNESS answer (2, 1 or 0) from the vocabulary, counting only when it cannot tell. */
async function commonness(q: Queryable, query: string, whole: string, typed: string, cutoff: number): Promise<number> {
  const b = await q.get<Bounds>(VOCABULARY, [JSON.stringify(queryTerms(query).map((t) => t.word))]);
  if (b?.exact) {
    const wholeOver = overCutoff(b.wholeMost, b.wholeSum, cutoff);
    if (wholeOver === true) return 2;
    const typedOver = overCutoff(b.typedMost, b.typedSum, cutoff);
    if (wholeOver === false && typedOver !== undefined) return typedOver ? 1 : 0;
  }
  return (await q.get<{ c: number }>(COMMONNESS, [whole, typed, cutoff + 1]))?.c ?? 0;
}

/** A tsquery (before folding) for a user's query: earlier words whole, the last a prefix (unless
 * `wholeLast`), OR-ed; with `weights`, each word restricted to those weights ("A": names). */
export function tsqueryText(query: string, weights = "", wholeLast = false): string | undefined {
  const terms = queryTerms(query);
  return terms.length === 0 ? undefined : terms.map((t) => `'${t.word}':${t.prefix && !wholeLast ? "*" : ""}${weights}`).join(" | ");
}

/** The page `offset … offset + size` of a query's stored matches, best first. */
export async function rankedPg(q: Queryable, query: string, offset: number, size: number, cutoff: number): Promise<EntryRow[]> {
  const typed = tsqueryText(query);
  const whole = tsqueryText(query, "", true);
  if (!typed || !whole) return [];
  const c = await commonness(q, query, whole, typed, cutoff);
  const wanted = offset + size;
  if (c === 0) {
    // Widened while the stored-filter leaves too few of the best candidates for the page.
    for (let limit = wanted * 2 + 16; ; limit *= 4) {
      const rows = await q.all<EntryRow>(RANKED, [typed, limit]);
      if (rows.length >= wanted || limit > cutoff) return rows.slice(offset, wanted);
    }
  }
  const wholeLast = c === 2;
  return q.all<EntryRow>(NEWEST, [wholeLast ? whole : typed, tsqueryText(query, "A", wholeLast) as string, wanted, size, offset]);
}

/** No rows to keep: the stored document follows `directory_entries` by itself. */
export const pgText = {
  async put(_tx: Queryable, _id: number, _name: string, _keywords: readonly string[]) {},
  async drop(_tx: Queryable, _id: number) {},
};
