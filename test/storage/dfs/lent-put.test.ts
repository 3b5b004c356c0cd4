/**
 * Uploads cut into lent buffers (storage/chunker.ts, put.ts): the chunks, and so the Cid, are
 * D9's whatever the shape of the pieces; a chunk's buffer is cut into again only once its write
 * has resolved. A buffer given back while its write still reads it would put the next chunk's
 * bytes in the file named by this chunk's hash — and the verification record written after the
 * write would then vouch for them. On a slow disk (a store whose writes start late) every chunk
 * file is hashed and the file read back (checked: giving a chunk back when it is queued, before
 * its write, fails both).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fixedSize } from "ipfs-unixfs-importer/chunker";
import { LocalBlobStore, localBlobRoot } from "../../../src/blob/index.ts";
import type { BlobBatch } from "../../../src/blob/store.ts";
import { BufferPool } from "../../../src/http/lent.ts";
import { buffersTaken } from "../../support/buffers-taken.ts";
import { lentChunker } from "../../../src/storage/chunker.ts";
import { hashOfKey } from "../../../src/storage/dfs/cid.ts";
import { CHUNK_SIZE, cidOf } from "../../../src/storage/dfs/index.ts";
import { tempDir } from "../../support/tmp.ts";
import { MiB, bytesOf, chunkKeys, openStore, readAll, streamOf } from "./support.ts";

/** `bytes` as pieces of the given sizes, repeated (the last piece takes what is left). */
function piecesOf(bytes: Uint8Array, sizes: number[]): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let at = 0, i = 0; at < bytes.length; i++) {
    const n = Math.min(sizes[i % sizes.length] as number, bytes.length - at);
    out.push(bytes.subarray(at, at + n));
    at += n;
  }
  return out;
}

async function* asSource(pieces: Uint8Array[]): AsyncGenerator<Uint8Array> {
  yield* pieces;
}

describe("the lent chunker", () => {
  const sizes = [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 3 * CHUNK_SIZE + 5];
  const shapes = [[64 * 1024], [512 * 1024], [CHUNK_SIZE], [3 * CHUNK_SIZE], [1, 700_000, 3], [CHUNK_SIZE - 1, 2]];

  test("cuts the chunks of D9's fixed-size chunker, whatever the pieces", async () => {
    for (const size of sizes) {
      const bytes = bytesOf(size, size + 7);
      const want: Buffer[] = [];
      for await (const c of fixedSize({ chunkSize: CHUNK_SIZE })(asSource(piecesOf(bytes, [100_000])))) want.push(Buffer.from(c));
      for (const shape of shapes) {
        const got: Buffer[] = [];
        // Kept, never given back: each chunk must be a buffer of its own then.
        for await (const c of lentChunker(new BufferPool(CHUNK_SIZE, 4))(asSource(piecesOf(bytes, shape)))) got.push(Buffer.from(c));
        expect({ size, shape, chunks: got.length }).toEqual({ size, shape, chunks: want.length });
        got.forEach((c, i) => expect(c.equals(want[i] as Buffer)).toBe(true));
      }
    }
  });

  test("a small file's chunk holds a buffer of its size, not a whole chunk's", async () => {
    // A zeroed 1 MiB per 4 KiB upload was 10 % of a small upload's event loop.
    for (const shape of [[4096], [1000, 1000, 2096]]) {
      const got: Uint8Array[] = [];
      for await (const c of lentChunker(new BufferPool(CHUNK_SIZE, 4))(asSource(piecesOf(bytesOf(4096, 3), shape)))) got.push(c);
      expect(got.map((c) => c.byteLength)).toEqual([4096]);
      expect((got[0] as Uint8Array).buffer.byteLength).toBeLessThanOrEqual(16 * 1024);
    }
  });

  test("chunks kept (never given back) stay as they were cut", async () => {
    const bytes = bytesOf(5 * CHUNK_SIZE + 3, 9);
    const kept: Uint8Array[] = [];
    for await (const c of lentChunker(new BufferPool(CHUNK_SIZE, 4))(asSource(piecesOf(bytes, [300_000])))) kept.push(c);
    expect(Buffer.concat(kept).equals(bytes)).toBe(true);
  });
});

describe("dfs put through lent buffers, on a slow disk", async () => {
  // Writes start 5 ms late, as on a busy disk: the importer cuts the next chunks meanwhile, so a
  // buffer given back before its write ran would be cut into while the write still has to read it.
  const root = tempDir("dfs");
  class SlowStore extends LocalBlobStore {
    override batch(): BlobBatch {
      const batch = super.batch();
      return { put: async (key, bytes) => (await new Promise((r) => setTimeout(r, 5)), batch.put(key, bytes)), sync: () => batch.sync() };
    }
  }
  const blobs = new SlowStore(localBlobRoot(root));
  const store = await openStore("local", { root, blobs });
  afterAll(() => store.close());

  test("every chunk file holds the bytes its name hashes, the file reads back whole, buffers were reused", async () => {
    const bytes = bytesOf(24 * MiB + 777, 5);
    let cid = "";
    const taken = await buffersTaken(async () => {
      const up = await store.dfs.put(streamOf(bytes, 512 * 1024));
      await up.commit();
      cid = up.cid;
    });
    expect(cid).toBe(await cidOf([bytes]));
    expect(taken).toBeLessThan(25 / 2); // lent and given back, not one per chunk
    const keys = await chunkKeys(store);
    expect(keys.length).toBe(25);
    for (const key of keys) expect(createHash("sha256").update(readFileSync(blobs.pathOf(key))).digest("hex")).toBe(hashOfKey(key) as string);
    expect(Buffer.from(await readAll(store.dfs.read(cid))).equals(bytes)).toBe(true);
  }, 60_000);
});
