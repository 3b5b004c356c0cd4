// The SDK's Cid (src/sdk/cid.ts) against the server's, which ipfs-unixfs-importer computes (D9):
// the gateway refuses an upload whose signed Cid is not the one it computes, so they must agree
// on every size, however the stream cuts the bytes. Small layouts (16-byte chunks, 4 links per
// node) build trees of three and four levels from a few hundred bytes, with both sides given the
// same options; the D9 layout itself is checked at its boundaries (one chunk, one byte more).
import { describe, expect, test } from "bun:test";
import { importFile } from "ipfs-unixfs-importer";
import { fixedSize } from "ipfs-unixfs-importer/chunker";
import { balanced } from "ipfs-unixfs-importer/layout";
import { cidOfStream, type CidLayout } from "../../src/sdk/cid.ts";
import { d9ImporterOptions } from "../../src/storage/cid-options.ts";
import { cidOf } from "../../src/storage/dfs/cid.ts";

/** `bytes` as a stream of pieces of `piece` bytes (the last one shorter). */
const streamOf = (bytes: Uint8Array, piece: number) =>
  new ReadableStream<Uint8Array>({
    start(c) {
      for (let i = 0; i < bytes.length; i += piece) c.enqueue(bytes.slice(i, i + piece));
      c.close();
    },
  });

async function importerCid(bytes: Uint8Array, layout: CidLayout): Promise<string> {
  const discard = { put: async (cid: never) => cid };
  // The server's D9 options, only the two sizes made small.
  const entry = await importFile({ content: [bytes] }, discard, {
    ...d9ImporterOptions(),
    chunker: fixedSize({ chunkSize: layout.chunkSize }),
    layout: balanced({ maxChildrenPerNode: layout.maxChildrenPerNode }),
  });
  return entry.cid.toString();
}

describe("the SDK's Cid equals the importer's", () => {
  test("hello world\\n (D9's example)", async () => {
    expect(await cidOfStream(streamOf(new TextEncoder().encode("hello world\n"), 5))).toBe("bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4");
  });

  test("every size from 0 to 300 bytes in a small layout (up to 4 levels), whatever the pieces", async () => {
    const layout = { chunkSize: 16, maxChildrenPerNode: 4 };
    const all = crypto.getRandomValues(new Uint8Array(300));
    for (let size = 0; size <= 300; size++) {
      const bytes = all.subarray(0, size);
      const want = await importerCid(bytes, layout);
      for (const piece of [1, 7, 16, 33, 1000]) expect(`${size}/${piece}: ${await cidOfStream(streamOf(bytes, piece), layout)}`).toBe(`${size}/${piece}: ${want}`);
    }
  });

  test("the D9 layout at its chunk boundaries, against the server's cidOf", async () => {
    const MiB = 1_048_576;
    const all = crypto.getRandomValues(new Uint8Array(3 * MiB + 1));
    for (const size of [0, 1, MiB - 1, MiB, MiB + 1, 2 * MiB, 3 * MiB + 1]) {
      const bytes = all.subarray(0, size);
      expect(await cidOfStream(streamOf(bytes, 65_536 + 3))).toBe(await cidOf([bytes]));
    }
  });
});
