/**
 * The one importer configuration of D9, passed explicitly wherever a Cid is computed (bare
 * ipfs-unixfs-importer defaults differ: 256 KiB chunks, 174 links). Same bytes → same Cid on both
 * back-ends; `hello world\n` → bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4.
 */
import type { ImporterOptions } from "ipfs-unixfs-importer";
import { fixedSize } from "ipfs-unixfs-importer/chunker";
import { balanced } from "ipfs-unixfs-importer/layout";
import { D9_LAYOUT } from "../sdk/cid.ts";

// D9's numbers are the SDK's (it computes the Cid an upload signs), so client and gateway cannot drift apart.
export const CHUNK_SIZE = D9_LAYOUT.chunkSize;
export const MAX_CHILDREN_PER_NODE = D9_LAYOUT.maxChildrenPerNode;

export type D9ImporterOptions = Required<Pick<ImporterOptions, "rawLeaves" | "reduceSingleLeafToSelf" | "chunker" | "layout">> & { cidVersion: 1 };

/** A fresh object per import, so no caller can change the options another import uses. */
export function d9ImporterOptions(): D9ImporterOptions {
  return {
    cidVersion: 1,
    rawLeaves: true,
    // A one-chunk file is its raw leaf (a `bafkrei…` Cid), as @helia/unixfs does by default.
    reduceSingleLeafToSelf: true,
    chunker: fixedSize({ chunkSize: CHUNK_SIZE }),
    layout: balanced({ maxChildrenPerNode: MAX_CHILDREN_PER_NODE }),
  };
}
