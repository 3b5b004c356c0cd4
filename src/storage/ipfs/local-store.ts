/**
 * A read-only blockstore over the blob store for @helia/unixfs and ipfs-unixfs-exporter (the
 * tests walk DAGs with it): the blob store only (never bitswap, so a missing block fails at once
 * instead of asking the network, D9), each block's bytes checked against its Cid. Downloads walk
 * the DAG themselves (read.ts).
 */
import type { unixfs } from "@helia/unixfs";
import type { AbortOptions } from "@libp2p/interface";
import type { CID } from "multiformats/cid";
import type { BlobStore } from "../../blob/index.ts";
import { blockKey, readBlock } from "./blocks.ts";

/** What @helia/unixfs and ipfs-unixfs-exporter need of a blockstore. */
export type ReadBlockstore = Parameters<typeof unixfs>[0]["blockstore"];

export function localStore(store: BlobStore): ReadBlockstore {
  return {
    async *get(cid: CID, options?: AbortOptions) {
      yield await readBlock(store, cid, options);
    },
    async has(cid: CID) {
      return (await store.stat(blockKey(cid))) !== undefined;
    },
    async put(): Promise<CID> {
      throw new Error("the read-only blockstore of downloads does not write");
    },
  };
}
