/**
 * Directory search on SQLite: FTS5 (`directory_fts`, rowid = entry id; migration 0008), bm25 with
 * a name match weighing twice a keyword match. The FTS5 rows are kept here too (`sqliteText`),
 * written in the indexer's transaction next to their entry, so the index never disagrees with
 * the table. The PostgreSQL side (search-pg.ts) needs no such rows: its index is on an expression.
 *
 * bun:sqlite is synchronous, so a search holds the event loop for as long as it runs; its cost is
 * kept bounded:
 *
 * 1. bm25 is computed by FTS5 alone, over the match's rowids, and only the best `offset + size`
 *    (plus slack) are joined to entries and checked against `files`; when the stored-filter drops
 *    too many, the candidate list is widened and the step repeated. Joining every match before
 *    sorting, as one plain query would, costs 2–3× as much on broad queries.
 * 2. A query with more than `rankWindow` matches (the document-frequency cutoff for common words)
 *    is ranked among its `rankWindow` newest matches (a rowid range, which FTS5 applies while
 *    reading its lists): computing bm25 for hundreds of thousands of rows (a 3-letter prefix
 *    over a million entries) takes seconds. Narrower queries — nearly all — are ranked over every
 *    match.
 */
import type { Queryable } from "../db/sql.ts";
import { ENTRY_COLUMNS, STORED, type EntryRow } from "./entries.ts";
import { keywordText, matchExpression, normalize } from "./text.ts";

const NTH_NEWEST = "SELECT rowid FROM directory_fts WHERE directory_fts MATCH $1 ORDER BY rowid DESC LIMIT 1 OFFSET $2";
const BEST = "SELECT rowid AS id FROM directory_fts WHERE directory_fts MATCH $1 AND rowid >= $2 ORDER BY rank, rowid LIMIT $3";
const STORED_AMONG = `SELECT e.id, ${ENTRY_COLUMNS} FROM directory_entries e WHERE e.id IN (SELECT value FROM json_each($1)) AND ${STORED}`;
const PUT = "INSERT INTO directory_fts (rowid, name, keywords) VALUES ($1, $2, $3)";
const DROP = "DELETE FROM directory_fts WHERE rowid = $1";

/** The page `offset … offset + size` of a query's stored matches, best first. */
export async function rankedSqlite(q: Queryable, query: string, offset: number, size: number, rankWindow: number): Promise<EntryRow[]> {
  const match = matchExpression(query);
  if (!match) return [];
  const floor = (await q.get<{ rowid: number }>(NTH_NEWEST, [match, rankWindow - 1]))?.rowid ?? 0;
  const wanted = offset + size;
  for (let limit = wanted * 2 + 16; ; limit *= 4) {
    const ids = (await q.all<{ id: number }>(BEST, [match, floor, limit])).map((r) => r.id);
    const rows = new Map((await q.all<EntryRow & { id: number }>(STORED_AMONG, [JSON.stringify(ids)])).map((r) => [r.id, r]));
    const inOrder = ids.flatMap((id) => rows.get(id) ?? []);
    // Enough stored rows for this page, or every candidate seen: done.
    if (inOrder.length >= wanted || ids.length < limit) return inOrder.slice(offset, wanted);
  }
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
