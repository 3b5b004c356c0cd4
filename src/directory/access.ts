/**
 * Read access that the directory gives (D9, D10), from the indexed state in SQLite:
 *
 * - `readGrant(reader, kind, cid)` — the storage service's hook for downloads by someone who does
 *   not own the file: the owner of some directory entry for that Cid, whose owner stores that Cid on
 *   that back-end here, is public, or grants the reader read permission, or was bought by the
 *   reader. An entry for a Cid its owner does not store grants nothing, so publishing someone
 *   else's Cid as public opens nothing.
 * - `isPublic(owner, cid)` — listobjects' `Public`: the owner's own entry for that Cid is public.
 */
import type { Database } from "bun:sqlite";
import { getAddress, type Address } from "viem";
import type { BackendKind } from "../storage/backend.ts";
import type { ReadGrant } from "../storage/service.ts";

export function directoryAccess(sqlite: Database) {
  const readable = sqlite.prepare<{ owner: string }, [string, string, string]>(
    `SELECT e.owner AS owner FROM directory_entries e
     WHERE e.cid = ?1
       AND EXISTS (SELECT 1 FROM files f WHERE f.backend = ?2 AND f.cid = ?1 AND f.did = e.did)
       AND (e.public = 1 OR e.owner = ?3
         OR EXISTS (SELECT 1 FROM directory_grants g WHERE g.owner = e.owner AND g.mid = e.mid AND g.reader = ?3)
         OR EXISTS (SELECT 1 FROM directory_purchases p WHERE p.owner = e.owner AND p.mid = e.mid AND p.reader = ?3))
     LIMIT 1`,
  );
  const publicOwn = sqlite.prepare<{ ok: number }, [string, string]>("SELECT 1 AS ok FROM directory_entries WHERE cid = ? AND owner = ? AND public = 1 LIMIT 1");

  const readGrant: ReadGrant = async (reader: Address, kind: BackendKind, cid: string) => {
    const row = readable.get(cid, kind, getAddress(reader));
    return row ? getAddress(row.owner) : undefined;
  };

  const isPublic = (owner: Address, cid: string) => publicOwn.get(cid, getAddress(owner)) !== null;

  return { readGrant, isPublic };
}
