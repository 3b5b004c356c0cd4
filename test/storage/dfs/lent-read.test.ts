/**
 * Downloads read into lent buffers (http/lent.ts, read.ts): a buffer is read into again only after
 * its consumer gave it back. Every consumer that can get such a chunk is here, compared byte for
 * byte with the file: one that keeps every chunk and never gives any back (a body collected whole:
 * the S3 API's whole reads, a copy into another upload, a test), one that gives each back once
 * copied, and the listener itself (a slow client over a real socket, two downloads at once, so
 * that the buffers its socket still sends would be read into if they went back too early). A read
 * that reused a buffer its consumer still holds would put another chunk's bytes in it: these
 * comparisons fail then (checked: reusing a buffer on the next pull instead of on `giveBack`
 * fails the first test). And the other way, request pieces the chunker frees once copied
 * (http/lent.ts `dispose`): an upload over the socket, on both back-ends, reads back byte for byte
 * (checked: freeing a piece when it arrives, before its copy, fails it). On S3 the chunks are
 * objects read whole, freed once the listener has sent them (`lendToFree`): the slow clients'
 * bytes show none was freed early.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { giveBack } from "../../../src/http/lent.ts";
import { TEST_BLOBS } from "../../support/blobs.ts";
import { buffersTaken } from "../../support/buffers-taken.ts";
import { listen } from "../../../src/http/listen.ts";
import { connectStorage } from "../../../src/sdk/storage.ts";
import { BASE, testGateway } from "../../support/storage.ts";
import { MiB, bytesOf, openStore, streamOf } from "./support.ts";

const SIZE = 12 * MiB + 12_345;

describe("dfs reads into lent buffers (local blob store)", async () => {
  const store = await openStore("local");
  afterAll(() => store.close());
  const bytes = bytesOf(SIZE, 41);
  const up = await store.dfs.put(streamOf(bytes));
  await up.commit();

  test("a consumer that keeps every chunk (never gives one back) gets the file", async () => {
    const kept: Uint8Array[] = [];
    for await (const chunk of store.dfs.read(up.cid)) kept.push(chunk);
    expect(kept.length).toBeGreaterThan(8); // more chunks than the pool keeps buffers
    expect(Buffer.concat(kept).equals(bytes)).toBe(true);
  });

  test("a consumer that gives each chunk back once copied gets the file, whole or a range across chunks", async () => {
    for (const range of [undefined, { start: MiB - 10, end: 9 * MiB + 77 }]) {
      const copies: Buffer[] = [];
      for await (const chunk of store.dfs.read(up.cid, range)) {
        copies.push(Buffer.from(chunk));
        giveBack(chunk);
      }
      const want = range ? bytes.subarray(range.start, range.end + 1) : bytes;
      expect(Buffer.concat(copies).equals(want)).toBe(true);
    }
  });

  test("chunks kept while others are given back stay as they were", async () => {
    // Every third chunk kept (as a consumer that keeps some would), the others given back at once.
    const kept = new Map<number, { chunk: Uint8Array; copy: Buffer }>();
    let i = 0;
    for await (const chunk of store.dfs.read(up.cid)) {
      if (i % 3 === 0) kept.set(i, { chunk, copy: Buffer.from(chunk) });
      else giveBack(chunk);
      i++;
    }
    for (const [idx, { chunk, copy }] of kept) {
      expect(Buffer.from(chunk).equals(copy)).toBe(true);
      expect(copy.equals(bytes.subarray(idx * MiB, idx * MiB + copy.byteLength))).toBe(true);
    }
  });
});

describe("uploads and downloads through the listener", async () => {
  const gw = await testGateway();
  // One owner per file: each downloads its own, on a voucher of its own.
  const owners = [await gw.user(), await gw.user()];
  // The upload tests' own account: a download's bytes are counted once the server has sent them,
  // which may be just after the client has read them, so they must not share the slow downloads'
  // voucher counters (a read of the counter in between saw the earlier download uncounted: 402).
  const uploader = await gw.user();
  const files = [bytesOf(SIZE, 42), bytesOf(SIZE + 1, 43)];
  const cids: string[] = [];
  for (const [i, f] of files.entries()) cids.push((await owners[i]!.client.upload("dfs", f, { name: "f.bin" })).Cid);
  const server = await listen({
    hostname: "127.0.0.1",
    port: 0,
    maxRequestBodySize: 1 << 30,
    error: () => new Response("failed", { status: 500 }),
    fetch: (request) => {
      const url = new URL(request.url);
      const init: RequestInit & { duplex?: "half" } = { method: request.method, headers: request.headers, signal: request.signal };
      if (request.body) Object.assign(init, { body: request.body, duplex: "half" });
      return gw.app.handle(new Request(`${BASE}${url.pathname}${url.search}`, init));
    },
  });
  afterAll(() => server.stop(true));

  // A third owner keeps the first file on ipfs, whose leaves are read the same ways.
  const ipfsOwner = await gw.user();
  const ipfsCid = (await ipfsOwner.client.upload("ipfs", files[0] as Uint8Array, { name: "f.bin" })).Cid;

  /** Downloads file `i` over the socket, reading slowly (the socket's buffer fills: backpressure). */
  async function slowDownload(i: number, kind: "dfs" | "ipfs" = "dfs"): Promise<Buffer> {
    const owner = kind === "dfs" ? owners[i]! : ipfsOwner;
    const size = ((await gw.storage?.vouchers.usedBy(owner.account.address)) ?? 0) + (files[i] as Uint8Array).byteLength;
    const cid = kind === "dfs" ? (cids[i] as string) : ipfsCid;
    const sign = await gw.sign.voucher(owner.account, size, cid);
    const res = await fetch(`http://127.0.0.1:${server.port}/${kind}/${cid}?size=${size}&sign=${sign}`);
    expect(res.status, await (res.status === 200 ? "" : res.text())).toBe(200);
    const parts: Uint8Array[] = [];
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    for (let next = await reader.read(); !next.done; next = await reader.read()) {
      parts.push(next.value);
      await Bun.sleep(1);
    }
    return Buffer.concat(parts);
  }

  test.each(["dfs", "ipfs"] as const)("%s: an upload over the socket is stored byte for byte, its request pieces freed once copied", async (kind) => {
    // The listener marks the request's pieces; the chunker frees each (ArrayBuffer transfer(0))
    // once copied and passed: counted here, so that the test shows the freeing happened.
    let freed = 0;
    const transfer = ArrayBuffer.prototype.transfer;
    ArrayBuffer.prototype.transfer = function (this: ArrayBuffer, length?: number) {
      if (length === 0) freed++;
      return transfer.call(this, length);
    };
    const bytes = bytesOf(3 * SIZE, 44);
    const owner = uploader;
    const client = await connectStorage({ baseUrl: `http://127.0.0.1:${server.port}`, account: owner.account, fetch });
    await client.login();
    let cid: string;
    try {
      cid = (await client.upload(kind, bytes, { name: "big.bin" })).Cid;
    } finally {
      ArrayBuffer.prototype.transfer = transfer;
    }
    expect(freed).toBeGreaterThan(0);
    const res = await client.download(kind, cid, { size: bytes.byteLength });
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
  }, 60_000);

  // Local store: the reads reuse the pool's buffers. S3: each chunk or leaf is an object read whole, freed
  // (transfer(0)) once the listener has sent it: counted, so that the test shows it happened.
  test(`three slow clients (two on dfs, one on ipfs) each get their file byte for byte, ${TEST_BLOBS === "s3" ? "each chunk freed once sent" : "the reads reusing buffers"}`, async () => {
    let freed = 0;
    const transfer = ArrayBuffer.prototype.transfer;
    ArrayBuffer.prototype.transfer = function (this: ArrayBuffer, length?: number) {
      if (length === 0) freed++;
      return transfer.call(this, length);
    };
    let taken: number;
    try {
      taken = await buffersTaken(async () => {
        const [a, b, c] = await Promise.all([slowDownload(0), slowDownload(1), slowDownload(0, "ipfs")]);
        expect(a.equals(files[0] as Uint8Array)).toBe(true);
        expect(b.equals(files[1] as Uint8Array)).toBe(true);
        expect(c.equals(files[0] as Uint8Array)).toBe(true);
      });
    } finally {
      ArrayBuffer.prototype.transfer = transfer;
    }
    const chunks = 3 * Math.ceil(SIZE / MiB);
    if (TEST_BLOBS === "s3") expect(freed).toBeGreaterThanOrEqual(chunks - 2);
    else expect(taken).toBeLessThan(chunks / 2);
  }, 60_000);

  // Ranges of up to a chunk are read into one buffer of a pool every download shares (dfs: up to
  // two chunks' parts; ipfs: the one or two leaves they cross), given back by the listener once
  // written: many at once, slow and fast, must each get exactly their bytes.
  test("short ranges on both back-ends (across chunk and leaf boundaries): one after another they reuse their buffers; at once, slow and fast, each gets its bytes", async () => {
    const ranged = async (kind: "dfs" | "ipfs", start: number, end: number, slow: boolean) => {
      // Each its own voucher, far above what the owner used (they run at once).
      const { account } = kind === "dfs" ? owners[0]! : ipfsOwner;
      const size = ((await gw.storage?.vouchers.usedBy(account.address)) ?? 0) + 1_000_000_000 + Math.floor(Math.random() * 1e9);
      const cid = kind === "dfs" ? (cids[0] as string) : ipfsCid;
      const sign = await gw.sign.voucher(account, size, cid);
      const res = await fetch(`http://127.0.0.1:${server.port}/${kind}/${cid}?size=${size}&sign=${sign}`, { headers: { range: `bytes=${start}-${end}` } });
      expect(res.status).toBe(206);
      const parts: Uint8Array[] = [];
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      for (let next = await reader.read(); !next.done; next = await reader.read()) {
        parts.push(next.value);
        if (slow) await Bun.sleep(1);
      }
      return Buffer.concat(parts).equals((files[0] as Uint8Array).subarray(start, end + 1));
    };
    const ask = (i: number) => {
      const start = ((i * 5) % 22) * (MiB / 2) + 1000 * i + 1; // each crosses a chunk (and leaf) boundary
      return ranged(i % 2 === 0 ? "dfs" : "ipfs", start, start + MiB - 1 - 333 * i, i % 3 === 0);
    };
    // One after another: each answer's buffer is back in its pool before the next GET reads.
    const oneByOne: boolean[] = [];
    const taken = await buffersTaken(async () => {
      for (let i = 0; i < 12; i++) oneByOne.push(await ask(i));
    });
    expect(oneByOne).toEqual(Array(12).fill(true));
    if (TEST_BLOBS !== "s3") expect(taken).toBeLessThanOrEqual(4); // 12 without the give-back
    // All at once.
    expect(await Promise.all(Array.from({ length: 24 }, (_, i) => ask(i)))).toEqual(Array(24).fill(true));
  }, 60_000);
});
