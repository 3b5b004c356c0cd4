/**
 * The directory's current state (entries, their FTS5 rows, grants, purchases) and the one place
 * that changes it: `applyEvent`. Callers run it inside a transaction; an entry and its FTS5 row
 * always change together, so the index never disagrees with the table.
 *
 * Plain prepared statements rather than the query builder: the indexer runs these for every
 * event, and the FTS5 table is not in the drizzle schema anyway.
 */
import type { Database } from "bun:sqlite";
import type { Address } from "viem";
import { canonicalDid } from "../identity/did.ts";
import type { DirectoryEvent, EntryFields } from "./events.ts";
import { canonicalCid, keywordText, normalize } from "./text.ts";

export function directoryState(sqlite: Database, chainId: number) {
  const q = {
    entryId: sqlite.prepare<{ id: number }, [string, string]>("SELECT id FROM directory_entries WHERE owner = ? AND mid = ?"),
    insertEntry: sqlite.prepare<{ id: number }, [string, string, string, string | null, string, string, string, number, string, number]>(
      "INSERT INTO directory_entries (owner, mid, did, cid, name, size, price, public, keywords, block) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
    ),
    updateEntry: sqlite.prepare<never, [string, string, string, number, string, number, number]>(
      "UPDATE directory_entries SET name = ?, size = ?, price = ?, public = ?, keywords = ?, block = ? WHERE id = ?",
    ),
    deleteEntry: sqlite.prepare<never, [number]>("DELETE FROM directory_entries WHERE id = ?"),
    insertFts: sqlite.prepare<never, [number, string, string]>("INSERT INTO directory_fts (rowid, name, keywords) VALUES (?, ?, ?)"),
    deleteFts: sqlite.prepare<never, [number]>("DELETE FROM directory_fts WHERE rowid = ?"),
    grant: sqlite.prepare<never, [string, string, string, number]>("INSERT INTO directory_grants (owner, mid, reader, block) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"),
    revoke: sqlite.prepare<never, [string, string, string]>("DELETE FROM directory_grants WHERE owner = ? AND mid = ? AND reader = ?"),
    buy: sqlite.prepare<never, [string, string, string, string, number, string]>(
      "INSERT INTO directory_purchases (owner, mid, reader, paid, block, tx) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
    ),
    dropGrants: sqlite.prepare<never, [string, string]>("DELETE FROM directory_grants WHERE owner = ? AND mid = ?"),
    dropPurchases: sqlite.prepare<never, [string, string]>("DELETE FROM directory_purchases WHERE owner = ? AND mid = ?"),
  };

  function putEntry(owner: Address, mid: string, f: EntryFields, block: number) {
    const keywords = JSON.stringify(f.keywords);
    const found = q.entryId.get(owner, mid);
    let id: number;
    if (found) {
      id = found.id;
      q.deleteFts.run(id);
      q.updateEntry.run(f.name, f.size, f.price, f.isPublic ? 1 : 0, keywords, block, id);
    } else {
      const row = q.insertEntry.get(owner, mid, canonicalDid(owner, chainId), canonicalCid(mid), f.name, f.size, f.price, f.isPublic ? 1 : 0, keywords, block);
      if (!row) throw new Error("directory: inserting an entry returned no id");
      id = row.id;
    }
    q.insertFts.run(id, normalize(f.name), keywordText(f.keywords));
  }

  /** Removes an entry with everything that hangs on it (the contract's generation bump). */
  function clear(owner: string, mid: string) {
    const found = q.entryId.get(owner, mid);
    if (found) {
      q.deleteFts.run(found.id);
      q.deleteEntry.run(found.id);
    }
    q.dropGrants.run(owner, mid);
    q.dropPurchases.run(owner, mid);
  }

  /** Applies one event to the state. Total: any event the contract can emit is accepted, since an
   * event the indexer refused would stall it for good. */
  function applyEvent(e: DirectoryEvent) {
    switch (e.kind) {
      case "Published":
        // A publish starts a new generation on chain: no earlier grant or purchase carries over.
        clear(e.owner, e.mid);
        putEntry(e.owner, e.mid, e.data, e.block);
        break;
      case "Updated":
        putEntry(e.owner, e.mid, e.data, e.block);
        break;
      case "Unpublished":
        clear(e.owner, e.mid);
        break;
      case "ReadGranted":
        q.grant.run(e.owner, e.mid, e.data.reader, e.block);
        break;
      case "ReadRevoked":
        q.revoke.run(e.owner, e.mid, e.data.reader);
        break;
      case "ReadBought":
        q.buy.run(e.owner, e.mid, e.data.reader, e.data.paid, e.block, e.tx);
        break;
    }
  }

  return { applyEvent, clear };
}

export type DirectoryState = ReturnType<typeof directoryState>;
