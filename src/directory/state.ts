/**
 * The directory's current state (entries, their search text, grants, purchases) and the one place
 * that changes it: `applyEvent`. Callers run it inside a transaction; an entry and its search text
 * (FTS5 rows on SQLite; nothing to keep on PostgreSQL, whose index is on an expression) always
 * change together, so the index never disagrees with the table.
 *
 * Plain statements, one text for both databases (src/db/sql.ts): the indexer runs these for every
 * event.
 */
import type { Address } from "viem";
import type { Queryable } from "../db/sql.ts";
import { canonicalDid } from "../identity/did.ts";
import type { DirectoryEvent, EntryFields } from "./events.ts";
import { searchDialects } from "./search.ts";
import { canonicalCid } from "./text.ts";

const ENTRY_ID = "SELECT id FROM directory_entries WHERE owner = $1 AND mid = $2";
const INSERT_ENTRY = "INSERT INTO directory_entries (owner, mid, did, cid, name, size, price, public, keywords, block) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id";
const UPDATE_ENTRY = "UPDATE directory_entries SET name = $1, size = $2, price = $3, public = $4, keywords = $5, block = $6 WHERE id = $7";
const DELETE_ENTRY = "DELETE FROM directory_entries WHERE id = $1";
const GRANT = "INSERT INTO directory_grants (owner, mid, reader, block) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING";
const REVOKE = "DELETE FROM directory_grants WHERE owner = $1 AND mid = $2 AND reader = $3";
const BUY = "INSERT INTO directory_purchases (owner, mid, reader, paid, block, tx) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING";
const DROP_GRANTS = "DELETE FROM directory_grants WHERE owner = $1 AND mid = $2";
const DROP_PURCHASES = "DELETE FROM directory_purchases WHERE owner = $1 AND mid = $2";

export function directoryState(chainId: number) {
  async function putEntry(tx: Queryable, owner: Address, mid: string, f: EntryFields, block: number) {
    const text = searchDialects[tx.dialect].text;
    const keywords = JSON.stringify(f.keywords);
    const found = await tx.get<{ id: number }>(ENTRY_ID, [owner, mid]);
    let id: number;
    if (found) {
      id = found.id;
      await text.drop(tx, id);
      await tx.run(UPDATE_ENTRY, [f.name, f.size, f.price, f.isPublic, keywords, block, id]);
    } else {
      const row = await tx.get<{ id: number }>(INSERT_ENTRY, [owner, mid, canonicalDid(owner, chainId), canonicalCid(mid), f.name, f.size, f.price, f.isPublic, keywords, block]);
      if (!row) throw new Error("directory: inserting an entry returned no id");
      id = row.id;
    }
    await text.put(tx, id, f.name, f.keywords);
  }

  /** Removes an entry with everything that hangs on it (the contract's generation bump). */
  async function clear(tx: Queryable, owner: string, mid: string) {
    const found = await tx.get<{ id: number }>(ENTRY_ID, [owner, mid]);
    if (found) {
      await searchDialects[tx.dialect].text.drop(tx, found.id);
      await tx.run(DELETE_ENTRY, [found.id]);
    }
    await tx.run(DROP_GRANTS, [owner, mid]);
    await tx.run(DROP_PURCHASES, [owner, mid]);
  }

  /** Applies one event to the state. Total: any event the contract can emit is accepted, since an
   * event the indexer refused would stall it for good. */
  async function applyEvent(tx: Queryable, e: DirectoryEvent) {
    switch (e.kind) {
      case "Published":
        // A publish starts a new generation on chain: no earlier grant or purchase carries over.
        await clear(tx, e.owner, e.mid);
        await putEntry(tx, e.owner, e.mid, e.data, e.block);
        break;
      case "Updated":
        await putEntry(tx, e.owner, e.mid, e.data, e.block);
        break;
      case "Unpublished":
        await clear(tx, e.owner, e.mid);
        break;
      case "ReadGranted":
        await tx.run(GRANT, [e.owner, e.mid, e.data.reader, e.block]);
        break;
      case "ReadRevoked":
        await tx.run(REVOKE, [e.owner, e.mid, e.data.reader]);
        break;
      case "ReadBought":
        await tx.run(BUY, [e.owner, e.mid, e.data.reader, e.data.paid, e.block, e.tx]);
        break;
    }
  }

  return { applyEvent, clear };
}

export type DirectoryState = ReturnType<typeof directoryState>;
