/**
 * The first bytes of a file an owner stores, for checks that look at its beginning only: the
 * encryption escrow (D20) verifies an escrowed key against an age file's header MAC and first
 * payload chunk without reading, or charging anyone for, the rest. No traffic is metered: the gateway reads its own store.
 */
import { getAddress, type Address } from "viem";
import type { Queryable } from "../db/sql.ts";
import { canonicalDid } from "../identity/did.ts";
import type { Backend, BackendKind } from "./backend.ts";

const OWNED = `SELECT backend, size, encryption FROM files WHERE did = $1 AND cid = $2 ORDER BY id LIMIT 1`;

/** `owner`'s stored file with this Cid (either back-end): its `encryption` and a reader of its first `bytes`. */
export function storedFiles({ sql, backends, chainId }: { sql: Queryable; backends: Partial<Record<BackendKind, Backend>>; chainId: number }) {
  return async (owner: Address, cid: string) => {
    const row = await sql.get<{ backend: BackendKind; size: number; encryption: string }>(OWNED, [canonicalDid(getAddress(owner), chainId), cid]);
    const backend = row && backends[row.backend];
    if (!row || !backend) return undefined;
    return { encryption: row.encryption, head: (bytes: number) => backend.read(cid, row.size === 0 ? undefined : { start: 0, end: Math.min(row.size, bytes) - 1 }) };
  };
}
