/**
 * Downloads walk the file's DAG themselves (read.ts): a leaf must hold the bytes its parent node
 * lists for it, or the download errors instead of serving a file of another length or with
 * shifted bytes; a node that is no UnixFS file is refused.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import * as dagPb from "@ipld/dag-pb";
import { UnixFS } from "ipfs-unixfs";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { sha256 as sha2 } from "multiformats/hashes/sha2";
import { blockKey } from "../../../src/storage/ipfs/blocks.ts";
import { readContent } from "../../../src/storage/ipfs/read.ts";
import { collect, openBackend, type Opened } from "./helpers.ts";

let o: Opened;
beforeAll(async () => {
  // The blocks here are written straight into the store, with no row that references them: the
  // orphan sweep at open would rightly delete them while the test reads (it did, on S3).
  o = await openBackend(undefined, { sweepAtOpen: false });
});
afterAll(() => o.close());

async function storeBlock(bytes: Uint8Array, codec: number): Promise<CID> {
  const cid = CID.createV1(codec, await sha2.digest(bytes));
  await o.store.put(blockKey(cid), bytes);
  return cid;
}

/** A root file node over `leaves`, listing `sizes` for them. */
async function fileNode(leaves: CID[], sizes: number[], type: "file" | "directory" = "file"): Promise<CID> {
  const data = new UnixFS({ type, blockSizes: type === "file" ? sizes.map(BigInt) : [] });
  return storeBlock(dagPb.encode(dagPb.prepare({ Data: data.marshal(), Links: leaves.map((Hash, i) => ({ Hash, Tsize: sizes[i] })) })), dagPb.code);
}

const readError = (stream: ReadableStream<Uint8Array>) => collect(stream).then(() => undefined, (e: unknown) => e);

test("a leaf shorter than its parent lists errors the download (IPFS_BLOCK_CORRUPT)", async () => {
  const a = await storeBlock(new TextEncoder().encode("0123456789"), raw.code);
  const b = await storeBlock(new TextEncoder().encode("abcdefghij"), raw.code);
  const honest = await fileNode([a, b], [10, 10]);
  const deps = (size: number) => ({ store: o.store, pinnedSize: async () => size });
  expect(new TextDecoder().decode(await collect(readContent(deps(20), honest.toString())))).toBe("0123456789abcdefghij");
  expect(new TextDecoder().decode(await collect(readContent(deps(20), honest.toString(), { start: 8, end: 11 })))).toBe("89ab");

  const lying = await fileNode([a, b], [10, 12]);
  expect(await readError(readContent(deps(22), lying.toString()))).toMatchObject({ code: "IPFS_BLOCK_CORRUPT" });
  expect(await readError(readContent(deps(22), lying.toString(), { start: 0, end: 3 }))).toBeUndefined(); // the first leaf is whole
  expect(await readError(readContent(deps(22), lying.toString(), { start: 12, end: 21 }))).toMatchObject({ code: "IPFS_BLOCK_CORRUPT" });
});

test("a raw root whose pin gives another size errors the download", async () => {
  const leaf = await storeBlock(new TextEncoder().encode("hello world\n"), raw.code);
  expect(await readError(readContent({ store: o.store, pinnedSize: async () => 20 }, leaf.toString()))).toMatchObject({ code: "IPFS_BLOCK_CORRUPT" });
});

test("a directory node is not a file", async () => {
  const dir = await fileNode([], [], "directory");
  expect(await readError(readContent({ store: o.store, pinnedSize: async () => 0 }, dir.toString()))).toMatchObject({ code: "IPFS_NOT_FOUND" });
});
