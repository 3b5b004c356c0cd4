/**
 * Directory search on SQLite: FTS5 (`directory_fts`, rowid = entry id; migration 0008), bm25 with
 * a name match weighing twice a keyword match. The FTS5 rows are kept here too (`sqliteText`),
 * written in the indexer's transaction next to their entry, so the index never disagrees with
 * the table. The PostgreSQL side (search-pg.ts) needs no such rows: its index is on a column.
 *
 * bun:sqlite is synchronous, so a search holds the event loop for as long as it runs; its cost is
 * kept bounded (p99 < 10 ms at a million entries):
 *
 * 1. Earlier words are whole words, only the last is a prefix (text.ts): a prefix reads the
 *    lists of every word it begins.
 * 2. The document-frequency cutoff: a query with more than `cutoff` matches (a common word) is
 *    not ranked at all — bm25 costs ≈ 3.5 µs per match, 70 ms for 20,000 — but listed newest
 *    first, its name matches before its keyword-only ones: FTS5 walks its lists from the newest
 *    rowid and stops at the page. Whether there are more than `cutoff` matches is one walk of at
 *    most `cutoff` rowids. Narrower queries — nearly all — are ranked over every match.
 *    The test is made with every word whole first: when that is already over the cutoff, the
 *    last word is listed whole too. FTS5 reads a prefix by merging the whole list of every word
 *    it begins before returning a row (a rowid range does not shorten it): for a common word
 *    that is also the start of others, 10–250 ms at a million entries, where the whole word's
 *    newest rows cost 0.1–0.5 ms. Only a last word that is rare as a whole word (one being
 *    typed) is read as a prefix, which stays costly when it begins many common words.
 * 3. bm25 is computed by FTS5 alone, over the match's rowids, and only the best `offset + size`
 *    (plus slack) are joined to entries and checked against `files`; when the stored-filter drops
 *    too many, the candidate list is widened and the step repeated. Joining every match before
 *    sorting, as one plain query would, costs 2–3× as much on broad queries.
 */
import type { Queryable } from "../db/sql.ts";
import { ENTRY_COLUMNS, STORED, type EntryRow } from "./entries.ts";
import { keywordText, matchExpressions, normalize } from "./text.ts";

const NTH_NEWEST = "SELECT rowid FROM directory_fts WHERE directory_fts MATCH $1 ORDER BY rowid DESC LIMIT 1 OFFSET $2";
const BEST = "SELECT rowid AS id FROM directory_fts WHERE directory_fts MATCH $1 ORDER BY rank, rowid LIMIT $2";
const NEWEST = "SELECT rowid AS id FROM directory_fts WHERE directory_fts MATCH $1 ORDER BY rowid DESC LIMIT $2";
const STORED_AMONG = `SELECT e.id, ${ENTRY_COLUMNS} FROM directory_entries e WHERE e.id IN (SELECT value FROM json_each($1)) AND ${STORED}`;
const PUT = "INSERT INTO directory_fts (rowid, name, keywords) VALUES ($1, $2, $3)";
const DROP = "DELETE FROM directory_fts WHERE rowid = $1";

/** The first `wanted` stored entries among a candidate query's rowids, in its order: candidates
 * are fetched `limit` at a time, widened while the stored-filter leaves too few. */
async function firstStored(q: Queryable, candidates: string, match: string, wanted: number): Promise<EntryRow[]> {
  if (wanted <= 0) return [];
  for (let limit = wanted * 2 + 16; ; limit *= 4) {
    const ids = (await q.all<{ id: number }>(candidates, [match, limit])).map((r) => r.id);
    const rows = new Map((await q.all<EntryRow & { id: number }>(STORED_AMONG, [JSON.stringify(ids)])).map((r) => [r.id, r]));
    const inOrder = ids.flatMap((id) => rows.get(id) ?? []);
    // Enough stored rows, or every candidate seen: done.
    if (inOrder.length >= wanted || ids.length < limit) return inOrder.slice(0, wanted);
  }
}

/** The page `offset … offset + size` of a query's stored matches, best first. */
export async function rankedSqlite(q: Queryable, query: string, offset: number, size: number, cutoff: number): Promise<EntryRow[]> {
  const whole = matchExpressions(query, true);
  const typed = matchExpressions(query);
  if (!whole || !typed) return [];
  const wanted = offset + size;
  const over = async (expression: string) => (await q.get<{ rowid: number }>(NTH_NEWEST, [expression, cutoff])) !== undefined;
  let match = whole;
  if (!(await over(whole.any))) {
    match = typed;
    if (!(await over(typed.any))) return (await firstStored(q, BEST, typed.any, wanted)).slice(offset);
  }
  const named = await firstStored(q, NEWEST, match.name, wanted);
  const keywordOnly = await firstStored(q, NEWEST, match.keywordOnly, wanted - named.length);
  return [...named, ...keywordOnly].slice(offset, wanted);
}

/** The FTS5 row of an entry, changed with it in the same transaction. */
export const sqliteText = {
  async put(tx: Queryable, id: number, name: string, keywords: readonly string[]) {
    await tx.run(PUT, [id, normalize(name), keywordText(keywords)]);
  },
  async drop(tx: Queryable, id: number) {
    await tx.run(DROP, [id]);
  },
};
