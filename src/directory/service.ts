/**
 * The directory capability (D10) over the server's database: the indexer consumer that keeps the
 * index, the search behind `GET /challenge`, and the access hooks the storage service asks
 * (`readGrant` for downloads, `isPublic` for listobjects).
 *
 * @example
 *   const directory = createDirectory({ sqlite, chainId, address: contracts.directory, fromBlock })
 *   indexer.add(directory.consumer)
 *   startStorage({ …, extra: { readGrant: directory.readGrant, isPublic: directory.isPublic } })
 */
import type { Address } from "viem";
import type { Database } from "bun:sqlite";
import { directoryAccess } from "./access.ts";
import { directoryConsumer } from "./indexer.ts";
import { directorySearch } from "./search.ts";

export interface DirectoryDeps {
  /** The server's database connection (`openDatabase(...).sqlite`). */
  sqlite: Database;
  chainId: number;
  /** The Directory contract. */
  address: Address;
  /** Its deployment block: where indexing starts. */
  fromBlock: bigint;
}

export function createDirectory(deps: DirectoryDeps) {
  const { sqlite } = deps;
  const consumer = directoryConsumer({ sqlite, chainId: deps.chainId, address: deps.address, fromBlock: deps.fromBlock });
  const search = directorySearch(sqlite);
  const { readGrant, isPublic } = directoryAccess(sqlite);
  return { consumer, search, readGrant, isPublic };
}

export type Directory = ReturnType<typeof createDirectory>;
