/**
 * Damage and crashes: a damaged chunk is never served, a crash's leftovers are swept at start, and a
 * sweep or a release beside uploads takes nothing an upload relies on.
 */
import { describe, expect, test } from "bun:test";
import { writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { createLogger } from "../../../src/log.ts";
import { CorruptChunkError, NotFoundError } from "../../../src/storage/dfs/index.ts";
import { MiB, bytesOf, chunkPath, filesIn, openStore, readAll, rowCounts, sha256, streamOf } from "./support.ts";

describe("dfs damage", () => {
  test("a chunk with a flipped byte errors the read instead of serving wrong bytes", async () => {
    const lines: string[] = [];
    const store = await openStore(undefined, createLogger("error", (l) => lines.push(l)));
    const bytes = bytesOf(3 * MiB, 1);
    const up = await store.dfs.put(streamOf(bytes));
    await up.commit();
    const second = chunkPath(store.dir, bytes.subarray(MiB, 2 * MiB));
    const damaged = bytes.slice(MiB, 2 * MiB);
    damaged[1234] = damaged[1234]! ^ 1;
    writeFileSync(second, damaged);

    const got: Uint8Array[] = [];
    const reader = store.dfs.read(up.cid).getReader();
    await expect(
      (async () => {
        for (let r = await reader.read(); !r.done; r = await reader.read()) got.push(r.value);
      })(),
    ).rejects.toBeInstanceOf(CorruptChunkError);
    // Only the intact first chunk went out.
    expect(Buffer.compare(Buffer.concat(got), bytes.subarray(0, MiB))).toBe(0);
    // A range inside the damaged chunk errors too; one outside it is served.
    await expect(readAll(store.dfs.read(up.cid, { start: MiB + 1, end: MiB + 2 }))).rejects.toMatchObject({ code: "ERR_CORRUPT_CHUNK" });
    expect((await readAll(store.dfs.read(up.cid, { start: 2 * MiB, end: 3 * MiB - 1 }))).length).toBe(MiB);
    expect(lines.some((l) => l.includes("damaged chunk"))).toBe(true);
    await store.close();
  });

  test("a truncated or missing chunk file errors the read", async () => {
    const store = await openStore();
    const bytes = bytesOf(2 * MiB, 2);
    const up = await store.dfs.put(streamOf(bytes));
    await up.commit();
    writeFileSync(chunkPath(store.dir, bytes.subarray(0, MiB)), bytes.subarray(0, 100));
    await expect(readAll(store.dfs.read(up.cid))).rejects.toBeInstanceOf(CorruptChunkError);
    const { unlinkSync } = await import("node:fs");
    unlinkSync(chunkPath(store.dir, bytes.subarray(0, MiB)));
    await expect(readAll(store.dfs.read(up.cid))).rejects.toBeInstanceOf(CorruptChunkError);
    await store.close();
  });

  test("uploading the same content again repairs a damaged chunk", async () => {
    const store = await openStore();
    const bytes = bytesOf(2 * MiB, 3);
    const first = await store.dfs.put(streamOf(bytes));
    await first.commit();
    writeFileSync(chunkPath(store.dir, bytes.subarray(MiB)), new Uint8Array(MiB)); // same size, wrong bytes
    const again = await store.dfs.put(streamOf(bytes));
    await again.commit();
    expect(Buffer.compare(await readAll(store.dfs.read(first.cid)), bytes)).toBe(0);
    await store.close();
  });
});

describe("dfs crash recovery", () => {
  test("the start-up sweep removes what a crash left and keeps committed content", async () => {
    const before = await openStore();
    const keptBytes = bytesOf(2 * MiB + 7, 10);
    const kept = await before.dfs.put(streamOf(keptBytes));
    await kept.commit();
    // "Crash": chunks written and durable, the process dies before commit...
    const lostBytes = bytesOf(3 * MiB, 11);
    const lost = await before.dfs.put(streamOf(Buffer.concat([keptBytes.subarray(0, MiB), lostBytes])));
    // ...and mid-write of another chunk (a temp file), and after a release's transaction but
    // before its unlinks (a chunk file without a row).
    const chunkDir = dirname(chunkPath(before.dir, lostBytes.subarray(0, MiB)));
    writeFileSync(join(chunkDir, `${"ab".repeat(32)}.tmp-123456`), "half a chunk");
    const stray = bytesOf(MiB, 12);
    mkdirSync(dirname(chunkPath(before.dir, stray)), { recursive: true });
    writeFileSync(chunkPath(before.dir, stray), stray);
    before.database.close(); // no stop(), no abort(): the process is gone
    expect(filesIn(before.dir).chunks.length).toBe(3 + 3 + 1);
    expect(lost.cid).not.toBe(kept.cid);

    const after = await openStore(before.root);
    expect(filesIn(after.dir)).toEqual({ chunks: [0, 1, 2].map((i) => sha256(keptBytes.subarray(i * MiB, (i + 1) * MiB))).sort(), temps: [] });
    expect(Buffer.compare(await readAll(after.dfs.read(kept.cid)), keptBytes)).toBe(0);
    expect(await after.dfs.stat(lost.cid)).toBeUndefined();
    const report = await after.dfs.sweep(); // nothing left to remove
    expect(report).toMatchObject({ tempFiles: 0, orphanChunks: 0, keptChunks: 3 });
    await after.close();
  });

  test("the start-up sweep reports referenced chunks whose file is gone", async () => {
    const lines: string[] = [];
    const before = await openStore();
    const bytes = bytesOf(2 * MiB, 20);
    const up = await before.dfs.put(streamOf(bytes));
    await up.commit();
    await before.close();
    const { unlinkSync } = await import("node:fs");
    unlinkSync(chunkPath(before.dir, bytes.subarray(0, MiB)));
    const after = await openStore(before.root, createLogger("error", (l) => lines.push(l)));
    expect(lines.some((l) => l.includes("missing") && l.includes('"missing":1'))).toBe(true);
    expect(rowCounts(after)).toEqual({ objects: 1, chunks: 2, manifest: 2 }); // rows are not dropped
    await after.close();
  });
});

describe("dfs uploads beside sweeps and releases", () => {
  test("concurrent puts of the same content with sweeps in the middle lose nothing", async () => {
    const store = await openStore();
    const bytes = bytesOf(4 * MiB + 3, 30);
    const sweeps: Promise<unknown>[] = [];
    /** Sends `bytes`, running a sweep (and waiting for it) after each MiB sent. */
    const sweepingStream = () => {
      let at = 0;
      return new ReadableStream<Uint8Array>({
        async pull(c) {
          if (at >= bytes.length) return c.close();
          c.enqueue(bytes.slice(at, at + MiB));
          at += MiB;
          const s = store.dfs.sweep();
          sweeps.push(s);
          await s;
        },
      });
    };
    const [a, b] = await Promise.all([store.dfs.put(sweepingStream()), store.dfs.put(sweepingStream())]);
    await store.dfs.sweep(); // both pending, uncommitted: pins keep every chunk
    expect(filesIn(store.dir).chunks.length).toBe(5);
    await a.commit();
    await b.abort(); // the other's abort must not take chunks a's manifest names
    await store.dfs.sweep();
    expect(Buffer.compare(await readAll(store.dfs.read(a.cid)), bytes)).toBe(0);
    const reports = (await Promise.all(sweeps)) as { orphanChunks: number }[];
    expect(reports.every((r) => r.orphanChunks === 0)).toBe(true);
    await store.close();
  });

  test("an upload that found its chunks present keeps them through a release and a sweep", async () => {
    const store = await openStore();
    const bytes = bytesOf(3 * MiB, 40);
    const first = await store.dfs.put(streamOf(bytes));
    await first.commit();
    const second = await store.dfs.put(streamOf(bytes)); // every chunk already there: nothing written
    await store.dfs.release(first.cid); // last reference gone while `second` is pending
    await store.dfs.sweep();
    expect(filesIn(store.dir).chunks.length).toBe(3);
    await second.commit();
    expect(Buffer.compare(await readAll(store.dfs.read(second.cid)), bytes)).toBe(0);
    await store.close();
  });

  test("a release during a read ends the read with NotFoundError, not a damage report", async () => {
    const lines: string[] = [];
    const store = await openStore(undefined, createLogger("error", (l) => lines.push(l)));
    const bytes = bytesOf(4 * MiB, 45);
    const up = await store.dfs.put(streamOf(bytes));
    await up.commit();
    const reader = store.dfs.read(up.cid).getReader();
    const first = await reader.read();
    expect(Buffer.compare(first.value!, bytes.subarray(0, MiB))).toBe(0);
    await store.dfs.release(up.cid);
    await expect(
      (async () => {
        for (let r = await reader.read(); !r.done; r = await reader.read());
      })(),
    ).rejects.toBeInstanceOf(NotFoundError);
    expect(lines).toEqual([]);
    await store.close();
  });

  test("a release racing an upload of the same content: whichever order, the upload's data stays", async () => {
    const store = await openStore();
    const bytes = bytesOf(2 * MiB + 1, 50);
    for (let round = 0; round < 5; round++) {
      const held = await store.dfs.put(streamOf(bytes));
      await held.commit();
      const [racing] = await Promise.all([store.dfs.put(streamOf(bytes, 4096)), store.dfs.release(held.cid), store.dfs.sweep()]);
      await racing.commit();
      expect(Buffer.compare(await readAll(store.dfs.read(racing.cid)), bytes)).toBe(0);
      await store.dfs.release(racing.cid);
      expect(filesIn(store.dir).chunks).toEqual([]);
    }
    await store.close();
  });
});
