/**
 * Memory stays bounded by chunks, not by file size. The bound is generous on purpose: Bun's garbage
 * collector lets some tens of MiB of dead buffers pile up before it runs (measured here: RSS grows
 * by 40–55 MiB for this 256 MiB file, and under 100 MiB for 1 GiB), so the file is made big enough
 * that holding it would blow the bound by far.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { MiB, openStore, type Store } from "./support.ts";

const SIZE = 256 * MiB;
const BOUND = 128 * MiB;
const PIECE = 64 * 1024;

let store: Store;
beforeAll(async () => {
  store = await openStore();
});
afterAll(() => store.close());

/** `SIZE` bytes generated piece by piece (each piece distinct, so no chunk repeats); tracks peak RSS. */
function generated(peak: { rss: number }): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    pull(c) {
      if (sent >= SIZE) return c.close();
      const piece = new Uint8Array(PIECE);
      new DataView(piece.buffer).setFloat64(0, sent);
      c.enqueue(piece);
      sent += PIECE;
      if (sent % MiB === 0) peak.rss = Math.max(peak.rss, process.memoryUsage().rss);
    },
  });
}

test("a 256 MiB upload and its download keep RSS growth well under the file size", async () => {
  Bun.gc(true);
  const start = process.memoryUsage().rss;
  const peak = { rss: start };
  const up = await store.dfs.put(generated(peak));
  await up.commit();
  expect(up.size).toBe(SIZE);
  const putGrowth = peak.rss - start;

  let read = 0;
  for await (const part of store.dfs.read(up.cid)) {
    read += part.byteLength;
    if (read % (16 * MiB) < part.byteLength) peak.rss = Math.max(peak.rss, process.memoryUsage().rss);
  }
  expect(read).toBe(SIZE);
  const growth = peak.rss - start;
  console.log(`dfs memory: RSS growth ${(putGrowth / MiB).toFixed(0)} MiB during put, ${(growth / MiB).toFixed(0)} MiB by the end of the read, for ${SIZE / MiB} MiB`);
  expect(growth).toBeLessThan(BOUND);
}, 30_000);
