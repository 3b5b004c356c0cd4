/**
 * D9: the dfs Cid is the one the ipfs back-end gives. The reference is @helia/unixfs's own
 * `addByteStream` with ITS default importer settings (not ours), so a wrong option on our side
 * (chunk size, raw leaves, links per node) shows up as a different Cid.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { unixfs } from "@helia/unixfs";
import { createHeliaLight } from "helia";
import type { Blockstore } from "interface-blockstore";
import type { CID } from "multiformats/cid";
import { CHUNK_SIZE, cidOf } from "../../../src/storage/dfs/index.ts";
import { MiB, bytesOf, openStore, streamOf } from "./support.ts";

const helia = createHeliaLight(); // in-memory blockstore, no networking
afterAll(() => helia.stop());

/** Helia's Cid for bytes, through its in-memory node. */
async function heliaCid(bytes: Uint8Array): Promise<string> {
  return (await unixfs(helia).addByteStream(streamOf(bytes))).toString();
}

/** A blockstore that keeps nothing, for Helia's Cid of content too big to keep in memory. It is
 * cast because addByteStream only ever calls `put`. */
const discard = { put: async (cid: CID) => cid } as unknown as Blockstore;

/** `count` distinct 1 MiB chunks, made one by one so nothing holds them all. */
async function* distinctChunks(count: number): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < count; i++) {
    const chunk = new Uint8Array(CHUNK_SIZE);
    new DataView(chunk.buffer).setUint32(0, i);
    yield chunk;
  }
}

describe("dfs Cid (D9)", () => {
  test("hello world\\n gives the Cid of the design", async () => {
    const hello = new TextEncoder().encode("hello world\n");
    expect(await cidOf([hello])).toBe("bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4");
    const store = await openStore();
    const up = await store.dfs.put(streamOf(hello));
    expect(up.cid).toBe("bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4");
    await store.close();
  });

  test.each([
    ["empty", 0],
    ["1 byte", 1],
    ["exactly 1 MiB", MiB],
    ["1 MiB + 1", MiB + 1],
    ["5 MiB + 3 random", 5 * MiB + 3],
  ])("%s: put gives Helia's Cid", async (_name, size) => {
    const bytes = bytesOf(size, size + 7);
    const store = await openStore();
    const up = await store.dfs.put(streamOf(bytes));
    expect(up.cid).toBe(await heliaCid(bytes));
    expect(up.size).toBe(size);
    await store.close();
  });

  test("the empty file is the raw leaf of no bytes, a single chunk is its own raw leaf", async () => {
    expect(await cidOf([])).toBe("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku");
    expect(await cidOf([bytesOf(MiB)])).toStartWith("bafkrei");
    expect(await cidOf([bytesOf(MiB + 1)])).toStartWith("bafybei");
  });

  test("over 1024 chunks (a second level of inner nodes) put gives Helia's Cid", async () => {
    // The same chunk each time: 1 GiB + 1 MiB hashed on both sides, one chunk written.
    const count = 1025;
    const chunk = bytesOf(CHUNK_SIZE, 3);
    async function* chunks() {
      for (let i = 0; i < count; i++) yield chunk;
    }
    const store = await openStore();
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({ pull: (c) => (sent++ < count ? c.enqueue(chunk) : c.close()) });
    const up = await store.dfs.put(stream);
    const theirs = await unixfs({ blockstore: discard }).addByteStream(chunks());
    expect(up.cid).toBe(theirs.toString());
    expect(up.size).toBe(count * CHUNK_SIZE);
    await store.close();
  }, 120_000);

  test("over 174 chunks (bare importer's links per node) the Cid still matches Helia's", async () => {
    const count = 200;
    const ours = await cidOf(distinctChunks(count));
    const theirs = await unixfs({ blockstore: discard }).addByteStream(distinctChunks(count));
    expect(ours).toBe(theirs.toString());
  });
});
