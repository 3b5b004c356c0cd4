/**
 * The ipfs back-end's lent buffers (http/lent.ts): leaves are cut into buffers the upload's sink
 * gives back once written (put.ts), and read into buffers the listener gives back once sent
 * (read.ts). A buffer reused while something still reads it would put another leaf's bytes in a
 * block file named by this one's hash, or in a download. Every consumer that can get such a buffer
 * is compared byte for byte with the file: a read kept whole (never given back), one given back
 * chunk by chunk, two slow clients over the listener, and an upload on a slow disk whose block
 * files are all hashed. Checked: reusing a read buffer on the next pull fails the first read test.
 * Two faults do not show here, and are caught elsewhere: a leaf given back before its write (the
 * importer cuts no leaf while a batch of writes is pending, so it cannot be cut into early today;
 * dfs's lent-put test catches it), and the listener giving a chunk back when `write` returns (this
 * read takes buffers only before its chunk goes out; test/http/lent.test.ts and dfs's lent-read
 * test catch it).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { base32 } from "multiformats/bases/base32";
import { LocalBlobStore } from "../../../src/blob/local.ts";
import type { BlobBatch } from "../../../src/blob/store.ts";
import { giveBack } from "../../../src/http/lent.ts";
import { buffersTaken } from "../../support/buffers-taken.ts";
import { listen } from "../../../src/http/listen.ts";
import { BLOCK_PREFIX } from "../../../src/storage/ipfs/blocks.ts";
import { BASE, testGateway } from "../../support/storage.ts";
import { tempDir } from "../../support/tmp.ts";
import { MiB, blockKeys, collect, openBackend, randomBytes, streamOf } from "./helpers.ts";

/** More leaves than the pools keep buffers (12), several times over. */
const SIZE = 40 * MiB + 12_345;

describe("ipfs put and read through lent buffers (local blob store, slow disk)", async () => {
  // Writes start 5 ms late, as on a busy disk: the importer cuts the next leaves meanwhile, so a
  // buffer given back before its write ran would be cut into while the write still has to read it.
  const dataDir = tempDir("ipfs-lent");
  const blobs = join(dataDir, "blobs");
  class SlowStore extends LocalBlobStore {
    override batch(): BlobBatch {
      const batch = super.batch();
      return { put: async (key, bytes) => (await new Promise((r) => setTimeout(r, 5)), batch.put(key, bytes)), sync: () => batch.sync() };
    }
  }
  const store = new SlowStore(blobs);
  const o = await openBackend(dataDir, { store });
  afterAll(() => o.close());
  const bytes = randomBytes(SIZE);
  let cid = "";

  test("every block file holds the bytes its name hashes; the leaf buffers were reused", async () => {
    const taken = await buffersTaken(async () => {
      const up = await o.ipfs.put(streamOf(bytes, 512 * 1024));
      await up.commit();
      cid = up.cid;
    });
    expect(taken).toBeLessThan(41 / 2); // lent and given back, not one per leaf
    for (const key of await blockKeys(store)) {
      const digest = base32.baseDecode(key.slice(BLOCK_PREFIX.length)).subarray(2); // sha2-256 multihash: 0x12 0x20, digest
      expect(createHash("sha256").update(readFileSync(store.pathOf(key))).digest("hex")).toBe(Buffer.from(digest).toString("hex"));
    }
  }, 60_000);

  test("a consumer that keeps every chunk (never gives one back) gets the file", async () => {
    const kept: Uint8Array[] = [];
    for await (const chunk of o.ipfs.read(cid)) kept.push(chunk);
    expect(kept.length).toBe(41);
    expect(Buffer.concat(kept).equals(bytes)).toBe(true);
  });

  test("a consumer that gives each chunk back once copied gets the file, whole or a range across leaves", async () => {
    for (const range of [undefined, { start: MiB - 10, end: 30 * MiB + 77 }]) {
      const copies: Buffer[] = [];
      const taken = await buffersTaken(async () => {
        for await (const chunk of o.ipfs.read(cid, range)) {
          copies.push(Buffer.from(chunk));
          giveBack(chunk);
        }
      });
      const want = range ? bytes.subarray(range.start, range.end + 1) : bytes;
      expect(Buffer.concat(copies).equals(want)).toBe(true);
      expect(taken).toBeLessThan(copies.length / 2);
    }
  });
});

describe("ipfs downloads through the listener", async () => {
  const gw = await testGateway();
  // One owner per file: each downloads its own, on a voucher of its own.
  const owners = [await gw.user(), await gw.user()];
  const files = [randomBytes(SIZE), randomBytes(SIZE + 1)];
  const cids: string[] = [];
  for (const [i, f] of files.entries()) cids.push((await (owners[i] as (typeof owners)[0]).client.upload("ipfs", f, { name: "f.bin" })).Cid);
  const server = await listen({
    hostname: "127.0.0.1",
    port: 0,
    maxRequestBodySize: 1000,
    error: () => new Response("failed", { status: 500 }),
    fetch: (request) => {
      const url = new URL(request.url);
      return gw.app.handle(new Request(`${BASE}${url.pathname}${url.search}`, { headers: request.headers, signal: request.signal }));
    },
  });
  afterAll(() => server.stop(true));

  /** Downloads file `i` over the socket, reading slowly (the socket's buffer fills: backpressure). */
  async function slowDownload(i: number): Promise<Buffer> {
    const owner = owners[i] as (typeof owners)[0];
    const size = ((await gw.storage?.vouchers.usedBy(owner.account.address)) ?? 0) + (files[i] as Uint8Array).byteLength;
    const sign = await gw.sign.voucher(owner.account, size, cids[i] as string);
    const res = await fetch(`http://127.0.0.1:${server.port}/ipfs/${cids[i]}?size=${size}&sign=${sign}`);
    expect(res.status, await (res.status === 200 ? "" : res.text())).toBe(200);
    return Buffer.from(await collectSlowly(res.body as ReadableStream<Uint8Array>));
  }

  test("two slow clients each get their file byte for byte, the reads reusing buffers", async () => {
    let got: Buffer[] = [];
    const taken = await buffersTaken(async () => {
      got = await Promise.all([slowDownload(0), slowDownload(1)]);
    });
    expect((got[0] as Buffer).equals(files[0] as Uint8Array)).toBe(true);
    expect((got[1] as Buffer).equals(files[1] as Uint8Array)).toBe(true);
    expect(taken).toBeLessThan((2 * SIZE) / MiB / 2);
  }, 60_000);
});

/** The stream's bytes, read with a pause after each part (a slow client). */
async function collectSlowly(body: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  const reader = body.getReader();
  for (let next = await reader.read(); !next.done; next = await reader.read()) {
    parts.push(next.value);
    await Bun.sleep(1);
  }
  return collect(new Blob(parts).stream());
}
