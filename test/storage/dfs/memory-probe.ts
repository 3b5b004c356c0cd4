/**
 * Puts and reads back a generated 256 MiB stream through the dfs store and prints the peak RSS
 * growth as JSON. It runs in a process of its own (spawned by memory.test.ts), so no other test's
 * memory counts against it. Its one argument: the PostgreSQL database on the STOWAGE_TEST_DB=postgres
 * pass (its parent's), or ''.
 */
import { MiB, openStore } from "./support.ts";

const SIZE = 256 * MiB;
const PIECE = 64 * 1024;

const store = await openStore("local", { databaseUrl: process.argv[2] || undefined });
Bun.gc(true);
const start = process.memoryUsage().rss;
let peak = start;
const sample = () => {
  peak = Math.max(peak, process.memoryUsage().rss);
};

let sent = 0;
const source = new ReadableStream<Uint8Array>({
  pull(c) {
    if (sent >= SIZE) return c.close();
    // Each piece distinct, so no chunk repeats and dedup cannot hide the file.
    const piece = new Uint8Array(PIECE);
    new DataView(piece.buffer).setFloat64(0, sent);
    c.enqueue(piece);
    sent += PIECE;
    if (sent % MiB === 0) sample();
  },
});
const up = await store.dfs.put(source);
await up.commit();
const putGrowth = peak - start;
let read = 0;
for await (const part of store.dfs.read(up.cid)) {
  read += part.byteLength;
  if (read % (16 * MiB) < part.byteLength) sample();
}
await store.close();
console.log(JSON.stringify({ size: up.size, read, putGrowth, growth: peak - start }));
process.exit(0);
