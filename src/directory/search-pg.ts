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
 *   but listed newest first, name matches (`'word':A`) before keyword-only ones (each tier read
 *   as the last bullet says).
 *   As on SQLite, the test is made with every word whole first, and when that is already over
 *   the cutoff the last word is listed whole too (GIN reads a prefix by scanning every word it
 *   begins into one bitmap, as FTS5 merges them).
 * - the test reads the vocabulary (`directory_terms`, migrations-pg 0014: each lexeme's number of
 *   entries, kept by a trigger) instead of counting matches: GIN cannot count without visiting
 *   each match's heap row, 2–15 ms for the 1,001 of a common word at a million entries (issue
 *   10). The counts bound the query's matches — at least the most of any one word, at most their
 *   sum — and only a query whose bounds straddle the cutoff (several words, none common alone)
 *   is counted as before. The answer is the count's, so the results are too.
 * - a listing reads its tiers one after the other (the keyword-only one only when the names do
 *   not fill the page), each either as a walk down the primary key or, when the vocabulary says
 *   the tier's matches are too sparse for that (a word just over the cutoff: a walk of tens of
 *   thousands of rows for its page), as the GIN bitmap AND-ed with the newest ids that should hold
 *   the page, widened when they do not. The newest stored matches either way: the same rows.
 *
 * User text never reaches tsquery syntax: words hold only letters, digits and marks (text.ts
 * `queryTerms`), and each is quoted.
 */
import type { Queryable } from "../db/sql.ts";
import { ENTRY_COLUMNS, STORED, type EntryRow } from "./entries.ts";
import { queryTerms } from "./text.ts";

const QUERY = "to_tsquery('simple', stowage_fold($1))";
const upTo = (n: number) => `(SELECT count(*) FROM (SELECT 1 FROM directory_entries e WHERE e.search @@ to_tsquery('simple', stowage_fold($${n})) LIMIT $3) m)`;
/** The document-frequency test by counting, for a query the vocabulary cannot bound (a word that
 * folds to no lexeme or to several): 2 when the query with its last word whole ($1) has more than
 * $3 − 1 matches, else 1 when it has with the last word a prefix ($2), else 0. Counted from the
 * index, at most $3 heap rows each; the second count runs only when needed. */
export const COMMONNESS = `SELECT CASE WHEN ${upTo(1)} >= $3 THEN 2 WHEN ${upTo(2)} >= $3 THEN 1 ELSE 0 END AS c`;
/** Whether a query ($1) has $2 matches or more: counted from the index, at most $2 heap rows. */
export const AT_LEAST = `SELECT count(*) >= $2 AS over FROM (SELECT FROM directory_entries e WHERE e.search @@ ${QUERY} LIMIT $2) m`;
/** The best $2 matches by rank (from the index, ts_rank over the stored document), then those
 * whose owner stores the Cid: checking `files` for every match first costs ≈ 35 µs a match. */
export const RANKED = `WITH best AS (
    SELECT e.id, ts_rank(e.search, ${QUERY}) AS r FROM directory_entries e WHERE e.search @@ ${QUERY}
    ORDER BY r DESC, e.id LIMIT $2)
  SELECT e.id, ${ENTRY_COLUMNS} FROM best JOIN directory_entries e ON e.id = best.id
  WHERE ${STORED}
  ORDER BY best.r DESC, best.id`;
/** The listing of such a query (no vocabulary counts to plan with): both tiers in one statement,
 * as the planner reads them. $1 the query, $2 the same with every word restricted to names
 * (weight A), $3 offset + size. */
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
 * tells); the sums of the entries holding each in their name, for the listing's plan; and the
 * highest entry id. The prefix range is byte order (the column is COLLATE "C"), as tsquery's `:*`
 * is. LIMIT 1 on a primary-key lookup keeps the planner from turning the per-word lookups into a
 * hash join over the whole vocabulary. */
export const VOCABULARY = `WITH words AS (
    SELECT x.n = json_array_length($1::text::json) AS last, tsvector_to_array(to_tsvector('simple', stowage_fold(x.word))) AS lex
    FROM json_array_elements_text($1::text::json) WITH ORDINALITY AS x(word, n)),
  whole AS (
    SELECT w.last, coalesce(t.docs, 0) AS docs, coalesce(t.name_docs, 0) AS names FROM words w
    LEFT JOIN LATERAL (SELECT t.docs, t.name_docs FROM directory_terms t WHERE t.term = w.lex[1] LIMIT 1) t ON true),
  begun AS (
    SELECT b.most, b.total, b.names FROM words w CROSS JOIN LATERAL (
      SELECT max(t.docs) AS most, sum(t.docs) AS total, sum(t.name_docs) AS names FROM directory_terms t
      WHERE t.term >= w.lex[1] AND t.term < w.lex[1] || chr(1114111) AND starts_with(t.term, w.lex[1])) b
    WHERE w.last)
  SELECT (SELECT bool_and(cardinality(lex) = 1) FROM words) AS exact,
    (SELECT max(docs) FROM whole) AS "wholeMost", CAST((SELECT sum(docs) FROM whole) AS BIGINT) AS "wholeSum",
    CAST((SELECT sum(names) FROM whole) AS BIGINT) AS "wholeNames",
    greatest((SELECT max(docs) FROM whole WHERE NOT last), (SELECT max(most) FROM begun), 0) AS "typedMost",
    CAST((SELECT coalesce(sum(docs), 0) FROM whole WHERE NOT last) + (SELECT coalesce(sum(total), 0) FROM begun) AS BIGINT) AS "typedSum",
    CAST((SELECT coalesce(sum(names), 0) FROM whole WHERE NOT last) + (SELECT coalesce(sum(names), 0) FROM begun) AS BIGINT) AS "typedNames",
    coalesce((SELECT max(id) FROM directory_entries), 0) AS "lastId"`;

interface Bounds {
  exact: boolean;
  wholeMost: number;
  wholeSum: number;
  /** The sum over the words of the entries holding each in their name. */
  wholeNames: number;
  typedMost: number;
  typedSum: number;
  typedNames: number;
  /** The highest entry id: the listing's ranges count down from it. */
  lastId: number;
}

/** Whether a query with matches between `most` and `sum` has more than `cutoff`; undefined when
 * the bounds do not tell. */
export function overCutoff(most: number, sum: number, cutoff: number): boolean | undefined {
  if (most > cutoff) return true;
  if (sum <= cutoff) return false;
  return undefined;
}

/** The COMMONNESS answer (2, 1 or 0) from the vocabulary, counting only when it cannot tell; and
 * the vocabulary's counts when every word is one lexeme (for the listing's plan). */
async function commonness(q: Queryable, query: string, whole: string, typed: string, cutoff: number): Promise<{ c: number; b?: Bounds }> {
  const b = await q.get<Bounds>(VOCABULARY, [JSON.stringify(queryTerms(query).map((t) => t.word))]);
  if (!b?.exact) return { c: (await q.get<{ c: number }>(COMMONNESS, [whole, typed, cutoff + 1]))?.c ?? 0 };
  // Only a form whose bounds do not tell is counted, and only that form.
  const over = async (tsquery: string) => Boolean((await q.get<{ over: boolean }>(AT_LEAST, [tsquery, cutoff + 1]))?.over);
  if (overCutoff(b.wholeMost, b.wholeSum, cutoff) ?? (await over(whole))) return { c: 2, b };
  return { c: (overCutoff(b.typedMost, b.typedSum, cutoff) ?? (await over(typed))) ? 1 : 0, b };
}

/** One tier of a listing, its newest stored matches: $1 the tsquery, (keyword-only) $2 the names'
 * tsquery to leave out, then the limit, then (`range`) the id the matches lie above. A walk
 * orders by the primary key, so the planner reads it newest first and stops at the limit; a
 * range sorts on `e.id + 0`, which no index gives, so the planner AND-s the GIN bitmap with the
 * primary key's range instead of walking it. */
function tier(keywordOnly: boolean, range: boolean): string {
  const except = keywordOnly ? " AND NOT e.search @@ to_tsquery('simple', stowage_fold($2))" : "";
  const limit = keywordOnly ? "$3" : "$2";
  const above = range ? ` AND e.id > ${keywordOnly ? "$4" : "$3"}` : "";
  return `SELECT ${ENTRY_COLUMNS} FROM directory_entries e WHERE e.search @@ ${QUERY}${except}${above} AND ${STORED} ORDER BY ${range ? "e.id + 0" : "e.id"} DESC LIMIT ${limit}`;
}
export const TIERS = {
  names: { walk: tier(false, false), range: tier(false, true) },
  keywordOnly: { walk: tier(true, false), range: tier(true, true) },
} as const;

/** How to read a tier: undefined for a walk of the newest rows, else the span of newest ids to
 * read first (twice what should hold `need` matches). `matches` (an estimate) of the tier's
 * entries are spread over ids 1 … lastId; `postings` is the length of the words' GIN lists, whose
 * entries in the span are all fetched (GIN cannot tell a name from a keyword: the heap row does).
 * Costs measured at a million entries (bench corpus, EXPLAIN ANALYZE, warm): a walk ≈ 0.5 µs a
 * row; a range ≈ 0.04 µs an id of its span, ≈ 0.2 µs a posting, ≈ 10 µs a fetched row. */
export function tierSpan(need: number, matches: number, postings: number, lastId: number): number | undefined {
  const walkRows = (need * lastId) / Math.max(matches, 1);
  const span = Math.ceil(2 * walkRows);
  const fetched = (postings * Math.min(span, lastId)) / Math.max(lastId, 1);
  const range = 0.04 * Math.min(span, lastId) + 0.2 * postings + 10 * fetched;
  return 0.5 * walkRows <= range ? undefined : span;
}

/** The newest `need` stored matches of one tier: a walk (`span` undefined), or the range of the
 * `span` newest ids, widened while it holds fewer — the ids above `from` are the newest, so once
 * they hold `need` stored matches those are the answer. */
export async function newestOfTier(q: Queryable, sqls: { walk: string; range: string }, match: string[], need: number, lastId: number, span: number | undefined): Promise<EntryRow[]> {
  if (need <= 0) return [];
  if (span === undefined) return q.all<EntryRow>(sqls.walk, [...match, need]);
  for (let s = Math.max(1, span); ; s *= 4) {
    const from = Math.max(0, lastId - s);
    const rows = await q.all<EntryRow>(sqls.range, [...match, need, from]);
    if (rows.length >= need || from === 0) return rows;
  }
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
  const { c, b } = await commonness(q, query, whole, typed, cutoff);
  const wanted = offset + size;
  if (c === 0) {
    // Widened while the stored-filter leaves too few of the best candidates for the page.
    for (let limit = wanted * 2 + 16; ; limit *= 4) {
      const rows = await q.all<EntryRow>(RANKED, [typed, limit]);
      if (rows.length >= wanted || limit > cutoff) return rows.slice(offset, wanted);
    }
  }
  const wholeLast = c === 2;
  const match = wholeLast ? whole : typed;
  const names = tsqueryText(query, "A", wholeLast) as string;
  if (!b) return q.all<EntryRow>(NEWEST, [match, names, wanted, size, offset]);
  const [sum, named] = wholeLast ? [b.wholeSum, b.wholeNames] : [b.typedSum, b.typedNames];
  const first = await newestOfTier(q, TIERS.names, [names], wanted, b.lastId, tierSpan(wanted, named, sum, b.lastId));
  const need = wanted - first.length;
  const rest = await newestOfTier(q, TIERS.keywordOnly, [match, names], need, b.lastId, tierSpan(need, sum - named, sum, b.lastId));
  return [...first, ...rest].slice(offset, wanted);
}

/** No rows to keep: the stored document follows `directory_entries` by itself. */
export const pgText = {
  async put(_tx: Queryable, _id: number, _name: string, _keywords: readonly string[]) {},
  async drop(_tx: Queryable, _id: number) {},
};
