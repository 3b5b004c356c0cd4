/**
 * Puts and reads back a generated 384 MiB stream through the ipfs back-end (blocks on local
 * files) and prints the peak RSS growth as JSON. It runs in a process of its own (spawned by
 * memory.test.ts), so no other test's memory counts against it. Its one argument: the PostgreSQL
 * database on the STOWAGE_TEST_DB=postgres pass (its parent's), or ''.
 */
import { join } from "node:path";
import { LocalBlobStore } from "../../../src/blob/local.ts";
import { tempDir } from "../../support/tmp.ts";
import { MiB, openBackend } from "./helpers.ts";

const SIZE = 384 * MiB;
const PIECE = 64 * 1024;

const dataDir = tempDir("ipfs-memory");
const o = await openBackend(dataDir, { store: new LocalBlobStore(join(dataDir, "blobs")), databaseUrl: process.argv[2] || undefined });
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
    // Each piece distinct, so no block repeats and dedup cannot hide the file.
    const piece = new Uint8Array(PIECE);
    new DataView(piece.buffer).setFloat64(0, sent);
    c.enqueue(piece);
    sent += PIECE;
    if (sent % MiB === 0) sample();
  },
});
const up = await o.ipfs.put(source);
await up.commit();
const putGrowth = peak - start;
// The read's own growth: from what the put left once collected.
Bun.gc(true);
const readStart = process.memoryUsage().rss;
let readPeak = readStart;
let read = 0;
for await (const part of o.ipfs.read(up.cid)) {
  read += part.byteLength;
  if (read % (16 * MiB) < part.byteLength) {
    sample();
    readPeak = Math.max(readPeak, process.memoryUsage().rss);
  }
}
await o.close();
console.log(JSON.stringify({ size: up.size, read, putGrowth, readGrowth: readPeak - readStart, growth: peak - start }));
process.exit(0);
