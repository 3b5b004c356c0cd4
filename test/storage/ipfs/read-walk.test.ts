/**
 * Downloads walk the file's DAG themselves (read.ts): a leaf must hold the bytes its parent node
 * lists for it, or the download errors instead of serving a file of another length or with
 * shifted bytes; a node that is no UnixFS file is refused. Inner nodes kept between reads
 * (NodeCache) answer only for pinned content and stay under their bound.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as dagPb from "@ipld/dag-pb";
import { UnixFS } from "ipfs-unixfs";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { sha256 as sha2 } from "multiformats/hashes/sha2";
import { blockKey } from "../../../src/storage/ipfs/blocks.ts";
import { NodeCache, readContent } from "../../../src/storage/ipfs/read.ts";
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

describe("inner nodes kept (NodeCache)", () => {
  const text = (s: string) => new TextEncoder().encode(s);
  /** The 20 bytes of a file of its own (`tag` up to 4 letters). */
  const content = (tag: string) => `${tag}-0123456789`.slice(0, 10) + `${tag}-abcdefghij`.slice(0, 10);
  /** A root over two leaves of 10 bytes holding `content(tag)`. */
  async function twoLeafFile(tag: string): Promise<CID> {
    const a = await storeBlock(text(content(tag).slice(0, 10)), raw.code);
    const b = await storeBlock(text(content(tag).slice(10)), raw.code);
    return fileNode([a, b], [10, 10]);
  }

  test("a kept root is used instead of the store's block, but only while the content is pinned", async () => {
    const nodes = new NodeCache();
    const root = await twoLeafFile("kept");
    let size: number | undefined = 20;
    const deps = { store: o.store, nodes, pinnedSize: async () => size };
    expect(new TextDecoder().decode(await collect(readContent(deps, root.toString(), { start: 5, end: 14 })))).toBe(content("kept").slice(5, 15));
    expect(nodes.bytes).toBeGreaterThan(0);
    await o.store.delete(blockKey(root));
    // Read from the cache now (without it: IPFS_BLOCK_MISSING); the leaves are still read and checked.
    expect(new TextDecoder().decode(await collect(readContent(deps, root.toString())))).toBe(content("kept"));
    size = undefined; // unpinned: the kept node does not make it readable
    expect(await readError(readContent(deps, root.toString(), { start: 0, end: 3 }))).toMatchObject({ code: "IPFS_NOT_FOUND" });
  });

  test("the cache stays under its bound, dropping the least recently used node", async () => {
    const roots = await Promise.all(Array.from({ length: 6 }, (_, i) => twoLeafFile(`lru${i}`)));
    const deps = (nodes: NodeCache) => ({ store: o.store, nodes, pinnedSize: async () => 20 });
    const probe = new NodeCache();
    await collect(readContent(deps(probe), (roots[0] as CID).toString()));
    const one = probe.bytes; // each root weighs the same (same shape)
    const nodes = new NodeCache(3 * one);
    for (const root of roots) {
      await collect(readContent(deps(nodes), root.toString()));
      expect(nodes.bytes).toBeLessThanOrEqual(3 * one);
    }
    await collect(readContent(deps(nodes), (roots[3] as CID).toString())); // used again: now the newest
    for (const root of roots) await o.store.delete(blockKey(root));
    // roots 3, 4, 5 kept; 0, 1, 2 dropped, so read from the store, where they are gone now.
    for (const i of [3, 4, 5]) expect(await readError(readContent(deps(nodes), (roots[i] as CID).toString()))).toBeUndefined();
    for (const i of [0, 1, 2]) expect(await readError(readContent(deps(nodes), (roots[i] as CID).toString()))).toMatchObject({ code: "IPFS_BLOCK_MISSING" });
  });
});
