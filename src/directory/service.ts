/**
 * The directory capability (D10) over the server's database: the indexer consumer that keeps the
 * index, the search behind `GET /challenge`, and the access hooks the storage service asks
 * (`readGrant` for downloads, `publicCids` for an upload's answer, `publicSql` for listobjects,
 * `published` for the escrow status).
 *
 * @example
 *   const directory = createDirectory({ sql, chainId, address: contracts.directory, fromBlock })
 *   indexer.add(directory.consumer)
 *   storageOver(parts, { readGrant: directory.readGrant, publicCids: directory.publicCids, publicSql: directory.publicSql })   // src/compose.ts
 */
import { getAddress, type Address, type PublicClient } from "viem";
import { directoryAbi } from "../chain/artifacts/index.ts";
import type { Sql } from "../db/sql.ts";
import { directoryAccess, publicSql } from "./access.ts";
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
  /** The chain, for what the index may not hold yet (`published`); absent, the index alone answers. */
  publicClient?: Pick<PublicClient, "readContract">;
}

export function createDirectory(deps: DirectoryDeps) {
  const consumer = directoryConsumer({ chainId: deps.chainId, address: deps.address, fromBlock: deps.fromBlock });
  const search = directorySearch(deps.sql);
  const { readGrant, publicCids, bought, published: indexed } = directoryAccess(deps.sql);

  /**
   * Whether `owner` has published the entry `mid`: in the index, or else on the chain itself (an
   * entry published a moment ago is indexed within a poll and the confirmations; a buyer's client
   * asks about it at once). Either way only what anyone can read on the chain.
   */
  async function published(owner: Address, mid: string): Promise<boolean> {
    if (await indexed(owner, mid)) return true;
    if (!deps.publicClient) return false;
    return deps.publicClient.readContract({ address: deps.address, abi: directoryAbi, functionName: "exists", args: [getAddress(owner), mid] });
  }

  return { consumer, search, readGrant, publicCids, publicSql, bought, published };
}

export type Directory = ReturnType<typeof createDirectory>;
