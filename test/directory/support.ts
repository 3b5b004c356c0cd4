/**
 * A whole gateway with the directory as the server wires it (`testGateway`, which is the server's
 * `compose`: storage asks the directory's `readGrant`/`publicCids`, the app has the directory's
 * routes, an indexer with the directory's consumer runs when `sync` asks). Users get a storage
 * client and a directory client, both talking to the app.
 */
import type { PrivateKeyAccount } from "viem/accounts";
import type { Queryable } from "../../src/db/sql.ts";
import { connectDirectory } from "../../src/sdk/directory.ts";
import { connectStorage, StorageApiError } from "../../src/sdk/storage.ts";
import { appFetch } from "../support/app.ts";
import { BASE, testGateway } from "../support/storage.ts";

/** `env`: the gateway's settings (a test serving it over HTTP names its public URL). */
export async function directoryGateway(o: { ipfs?: boolean; env?: Record<string, string> } = {}) {
  const gw = await testGateway({ ipfs: o.ipfs, env: o.env });
  const sql = gw.database.sql;
  const { directory, indexer, app } = gw;
  const fetch = appFetch(app);

  /** A funded user, logged in to storage, with a directory client. */
  async function user(account?: PrivateKeyAccount) {
    const acct = account ?? (await gw.chain.anvil.newAccount());
    const store = await connectStorage({ baseUrl: BASE, account: acct, fetch });
    await store.login();
    const dir = await connectDirectory(BASE, { account: acct, fetch });
    return { account: acct, address: acct.address, store, dir };
  }

  /** GET /challenge as any client would send it. */
  const challenge = (query: string) => fetch(`${BASE}/challenge${query}`);

  /** The status a download by `reader` gets (403 refused, 200 read), consuming the body. */
  async function downloadStatus(reader: Awaited<ReturnType<typeof user>>, kind: "dfs" | "ipfs", cid: string, size: number) {
    try {
      const res = await reader.store.download(kind, cid, { size });
      await res.arrayBuffer();
      return res.status;
    } catch (err) {
      if (err instanceof StorageApiError) return err.status;
      throw err;
    }
  }

  return { gw, sql, directory, app, fetch, indexer, user, challenge, downloadStatus, sync: () => indexer.syncOnce() };
}

export type DirectoryGateway = Awaited<ReturnType<typeof directoryGateway>>;

/** Everything the index holds, without row ids (which a rebuild may renumber), in a stable order;
 * plus whether the search index's own rows are in step with the entries: on SQLite the FTS5
 * rows, on PostgreSQL the vocabulary `directory_terms` (kept by a trigger) against a recount of
 * the stored search documents (its GIN index is on a column of the entries themselves). */
export async function indexState(sql: Queryable) {
  const entries = await sql.all("SELECT owner, mid, did, cid, name, size, price, public, keywords, block FROM directory_entries ORDER BY owner, mid");
  const grants = await sql.all("SELECT owner, mid, reader, block FROM directory_grants ORDER BY owner, mid, reader");
  const purchases = await sql.all("SELECT owner, mid, reader, paid, block, tx FROM directory_purchases ORDER BY owner, mid, reader");
  const events = await sql.all("SELECT block, log_index, tx, kind, owner, mid, data FROM directory_events ORDER BY block, log_index");
  if (sql.dialect !== "sqlite") {
    // Terms whose count fell to 0 stay in the table: compare the others.
    const kept = await sql.all("SELECT term, docs, name_docs FROM directory_terms WHERE docs <> 0 OR name_docs <> 0 ORDER BY term");
    const recount = await sql.all(
      "SELECT l.lexeme AS term, count(*) AS docs, count(*) FILTER (WHERE 'A' = ANY (l.weights)) AS name_docs FROM directory_entries e, unnest(e.search) AS l GROUP BY l.lexeme ORDER BY l.lexeme COLLATE \"C\"",
    );
    return { entries, grants, purchases, events, ftsInStep: JSON.stringify(kept) === JSON.stringify(recount) };
  }
  const ids = (await sql.all<{ id: number }>("SELECT id FROM directory_entries ORDER BY id")).map((r) => r.id);
  const ftsIds = (await sql.all<{ rowid: number }>("SELECT rowid FROM directory_fts ORDER BY rowid")).map((r) => r.rowid);
  return { entries, grants, purchases, events, ftsInStep: JSON.stringify(ids) === JSON.stringify(ftsIds) };
}

/** The Mids of every entry whose name or keywords have a word starting with `word` (stored or not),
 * straight from the dialect's search index. */
export async function textMatches(sql: Queryable, word: string): Promise<string[]> {
  const rows =
    sql.dialect === "sqlite"
      ? await sql.all<{ mid: string }>("SELECT e.mid FROM directory_fts JOIN directory_entries e ON e.id = directory_fts.rowid WHERE directory_fts MATCH $1", [`"${word}"*`])
      : await sql.all<{ mid: string }>("SELECT e.mid FROM directory_entries e WHERE directory_search_document(e.name, e.keywords) @@ to_tsquery('simple', stowage_fold($1))", [`'${word}':*`]);
  return rows.map((r) => r.mid);
}
