/**
 * The directory capability (D10) over the server's database: the indexer consumer that keeps the
 * index, the search behind `GET /challenge`, and the access hooks the storage service asks
 * (`readGrant` for downloads, `publicCids` for listobjects).
 *
 * @example
 *   const directory = createDirectory({ sql, chainId, address: contracts.directory, fromBlock })
 *   indexer.add(directory.consumer)
 *   startStorage({ …, extra: { readGrant: directory.readGrant, publicCids: directory.publicCids } })
 */
import type { Address } from "viem";
import type { Sql } from "../db/sql.ts";
import { directoryAccess } from "./access.ts";
import { directoryConsumer } from "./indexer.ts";
import { directorySearch } from "./search.ts";

export interface DirectoryDeps {
  /** The server's database (SQLite or PostgreSQL). */
  sql: Sql;
  chainId: number;
  /** The Directory contract. */
  address: Address;
  /** Its deployment block: where indexing starts. */
  fromBlock: bigint;
}

export function createDirectory(deps: DirectoryDeps) {
  const consumer = directoryConsumer({ chainId: deps.chainId, address: deps.address, fromBlock: deps.fromBlock });
  const search = directorySearch(deps.sql);
  const { readGrant, publicCids, bought, published } = directoryAccess(deps.sql);
  return { consumer, search, readGrant, publicCids, bought, published };
}

export type Directory = ReturnType<typeof createDirectory>;
