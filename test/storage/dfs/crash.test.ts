/**
 * Damage and crashes, on both blob stores: a damaged chunk is never served, a killed upload leaves
 * nothing referenced and (once its pins lapse) nothing stored, and a sweep or a release beside
 * uploads takes nothing an upload relies on (D15).
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { LEASE_MS } from "../../../src/blob/guard.ts";
import { createLogger } from "../../../src/log.ts";
import { CorruptChunkError, NotFoundError } from "../../../src/storage/dfs/index.ts";
import { tempDir } from "../../support/tmp.ts";
import { BLOB_KINDS, MiB, blobSettings, bytesOf, chunkKeys, databaseUrl, keyOf, keysOf, openStore, readAll, rowCounts, scalar, streamOf } from "./support.ts";

setDefaultTimeout(60_000);

/** The chunks of `bytes`, 1 MiB each (the last shorter). */
const chunksOf = (bytes: Uint8Array) => Array.from({ length: Math.ceil(bytes.length / MiB) }, (_, i) => bytes.subarray(i * MiB, (i + 1) * MiB));

describe.each(BLOB_KINDS)("dfs damage (%s blob store)", (kind) => {
  test("a chunk with a flipped byte errors the read instead of serving wrong bytes", async () => {
    const lines: string[] = [];
    const store = await openStore(kind, { log: createLogger("error", (l) => lines.push(l)) });
    const bytes = bytesOf(3 * MiB, 1);
    const up = await store.dfs.put(streamOf(bytes));
    await up.commit();
    const damaged = bytes.slice(MiB, 2 * MiB);
    damaged[1234] = damaged[1234]! ^ 1;
    await store.blobs.put(keyOf(bytes.subarray(MiB, 2 * MiB)), damaged);

    const got: Uint8Array[] = [];
    const reader = store.dfs.read(up.cid).getReader();
    await expect(
      (async () => {
        for (let r = await reader.read(); !r.done; r = await reader.read()) got.push(r.value);
      })(),
    ).rejects.toBeInstanceOf(CorruptChunkError);
    // Only the intact first chunk went out.
    expect(Buffer.compare(Buffer.concat(got), bytes.subarray(0, MiB))).toBe(0);
    // A range inside the damaged chunk errors too (the whole chunk is read and checked); one
    // outside it is served.
    await expect(readAll(store.dfs.read(up.cid, { start: MiB + 1, end: MiB + 2 }))).rejects.toMatchObject({ code: "ERR_CORRUPT_CHUNK" });
    expect((await readAll(store.dfs.read(up.cid, { start: 2 * MiB, end: 3 * MiB - 1 }))).length).toBe(MiB);
    expect(lines.some((l) => l.includes("damaged chunk"))).toBe(true);
    await store.close();
  });

  test("a truncated or missing chunk errors the read", async () => {
    const store = await openStore(kind);
    const bytes = bytesOf(2 * MiB, 2);
    const up = await store.dfs.put(streamOf(bytes));
    await up.commit();
    await store.blobs.put(keyOf(bytes.subarray(0, MiB)), bytes.subarray(0, 100));
    await expect(readAll(store.dfs.read(up.cid))).rejects.toBeInstanceOf(CorruptChunkError);
    await store.blobs.delete(keyOf(bytes.subarray(0, MiB)));
    await expect(readAll(store.dfs.read(up.cid))).rejects.toBeInstanceOf(CorruptChunkError);
    await store.close();
  });

  test("uploading the same content again repairs a damaged chunk", async () => {
    const store = await openStore(kind);
    const bytes = bytesOf(2 * MiB, 3);
    const first = await store.dfs.put(streamOf(bytes));
    await first.commit();
    await store.blobs.put(keyOf(bytes.subarray(MiB)), new Uint8Array(MiB)); // same size, wrong bytes
    const again = await store.dfs.put(streamOf(bytes));
    await again.commit();
    expect(Buffer.compare(await readAll(store.dfs.read(first.cid)), bytes)).toBe(0);
    await store.close();
  });
});

describe.each(BLOB_KINDS)("dfs crash recovery (%s blob store)", (kind) => {
  test("a killed upload leaves nothing referenced; once its pins lapse, the sweep a lease after start (or the start-up sweep of a later restart) leaves no unreferenced object", async () => {
    const root = tempDir("dfs-crash");
    const seed = 10;
    const s3 = await blobSettings(kind, root);
    const proc = Bun.spawn([process.execPath, join(import.meta.dir, "crash-probe.ts"), root, String(seed), s3 ? JSON.stringify(s3) : "", (await databaseUrl(root)) ?? ""], {
      stdout: "pipe",
      stderr: "pipe",
    });
    let out = "";
    for await (const piece of proc.stdout) {
      out += new TextDecoder().decode(piece);
      if (out.includes("\n")) break;
    }
    expect(out, await (proc.exitCode === null ? "" : new Response(proc.stderr).text())).toContain('"ready":true');
    const { cid } = JSON.parse(out) as { cid: string };
    proc.kill("SIGKILL");
    await proc.exited;

    const kept = bytesOf(2 * MiB + 7, seed);
    const lostOwn = chunksOf(bytesOf(3 * MiB, seed + 1));
    // A crash between a release's transaction and its deletes: an object no row names, no pin holds.
    const stray = bytesOf(MiB, 12);
    const after = await openStore(kind, { root });
    await after.blobs.put(keyOf(stray), stray);
    await after.close();

    // Restarted at once: the dead upload's pins still count (a pin's holder may be alive, for all
    // the gateway knows, until the pin lapses), so its chunks survive the start-up sweep, but
    // nothing references them; the store sweeps once more a lease later (the guard's clock is
    // moved on by a lease once the first sweep is done, instead of waiting a minute).
    const sweeps: Record<string, unknown>[] = [];
    let secondSweep!: () => void;
    const swept = new Promise<void>((resolve) => (secondSweep = resolve));
    const log = createLogger("debug", (line) => {
      const entry = JSON.parse(line) as Record<string, unknown>;
      if (entry.msg !== "dfs: sweep") return;
      sweeps.push(entry);
      if (sweeps.length === 2) secondSweep();
    });
    const soon = await openStore(kind, { root, log, resweepAfterMs: 20, now: () => Date.now() + (sweeps.length > 0 ? LEASE_MS + 1 : 0) });
    expect(sweeps[0]).toMatchObject({ orphanChunks: 1, keptChunks: 3 + 3, heldChunks: 3 });
    expect(await rowCounts(soon)).toEqual({ objects: 1, chunks: 3, manifest: 3 });
    expect(await soon.dfs.stat(cid)).toEqual({ size: kept.length });
    await swept;
    expect(sweeps[1]).toMatchObject({ orphanChunks: 3, keptChunks: 3, heldChunks: 0, expiredPins: 4 });
    expect(await chunkKeys(soon)).toEqual(keysOf(...chunksOf(kept)));
    expect(Buffer.compare(await readAll(soon.dfs.read(cid)), kept)).toBe(0);
    await soon.close();

    // The stray and the dead upload's chunks again, as the start-up sweep of a restart after the
    // lease time finds them: it removes every unreferenced object at once.
    const again = await openStore(kind, { root });
    for (const c of [stray, ...lostOwn]) await again.blobs.put(keyOf(c), c);
    await again.database.sql.run("INSERT INTO blob_pins (key, holder, expires_at) VALUES ($1, 'dead', $2)", [keyOf(lostOwn[0]!), Date.now() + LEASE_MS]);
    await again.close();

    // Restarted after the lease time: the start-up sweep removes every unreferenced object.
    const later = await openStore(kind, { root, now: () => Date.now() + LEASE_MS + 1 });
    expect(await chunkKeys(later)).toEqual(keysOf(...chunksOf(kept)));
    expect(await rowCounts(later)).toEqual({ objects: 1, chunks: 3, manifest: 3 });
    expect(await scalar(later, "SELECT COUNT(*) AS n FROM blob_pins")).toBe(0);
    expect(Buffer.compare(await readAll(later.dfs.read(cid)), kept)).toBe(0);
    expect(await later.dfs.sweep()).toMatchObject({ orphanChunks: 0, keptChunks: 3, strangers: 0 });
    await later.close();
  });

  test("the start-up sweep reports referenced chunks whose object is gone", async () => {
    const lines: string[] = [];
    const before = await openStore(kind);
    const bytes = bytesOf(2 * MiB, 20);
    const up = await before.dfs.put(streamOf(bytes));
    await up.commit();
    await before.close();
    await before.blobs.delete(keyOf(bytes.subarray(0, MiB)));
    const after = await openStore(kind, { root: before.root, log: createLogger("error", (l) => lines.push(l)) });
    expect(lines.some((l) => l.includes("missing") && l.includes('"missing":1'))).toBe(true);
    expect(await rowCounts(after)).toEqual({ objects: 1, chunks: 2, manifest: 2 }); // rows are not dropped
    await after.close();
  });
});

describe.each(BLOB_KINDS)("dfs uploads beside sweeps and releases (%s blob store)", (kind) => {
  test("concurrent puts of the same content with sweeps in the middle lose nothing", async () => {
    const store = await openStore(kind);
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
    expect((await chunkKeys(store)).length).toBe(5);
    await a.commit();
    await b.abort(); // the other's abort must not take chunks a's manifest names
    await store.dfs.sweep();
    expect(Buffer.compare(await readAll(store.dfs.read(a.cid)), bytes)).toBe(0);
    const reports = (await Promise.all(sweeps)) as { orphanChunks: number }[];
    expect(reports.every((r) => r.orphanChunks === 0)).toBe(true);
    await store.close();
  });

  test("an upload that found its chunks present keeps them through a release and a sweep", async () => {
    const store = await openStore(kind);
    const bytes = bytesOf(3 * MiB, 40);
    const first = await store.dfs.put(streamOf(bytes));
    await first.commit();
    const second = await store.dfs.put(streamOf(bytes)); // every chunk already there: nothing written
    await store.dfs.release(first.cid); // last reference gone while `second` is pending
    await store.dfs.sweep();
    expect((await chunkKeys(store)).length).toBe(3);
    await second.commit();
    expect(Buffer.compare(await readAll(store.dfs.read(second.cid)), bytes)).toBe(0);
    await store.close();
  });

  test("a release during a read ends the read with NotFoundError, not a damage report", async () => {
    const lines: string[] = [];
    const store = await openStore(kind, { log: createLogger("error", (l) => lines.push(l)) });
    // Longer than the read-ahead, so chunks are still to be fetched when the release comes.
    const bytes = bytesOf(12 * MiB, 45);
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
    const store = await openStore(kind);
    const bytes = bytesOf(2 * MiB + 1, 50);
    for (let round = 0; round < 5; round++) {
      const held = await store.dfs.put(streamOf(bytes));
      await held.commit();
      const [racing] = await Promise.all([store.dfs.put(streamOf(bytes, 4096)), store.dfs.release(held.cid), store.dfs.sweep()]);
      await racing.commit();
      expect(Buffer.compare(await readAll(store.dfs.read(racing.cid)), bytes)).toBe(0);
      await store.dfs.release(racing.cid);
      expect(await chunkKeys(store)).toEqual([]);
    }
    await store.close();
  });

  test("50 rounds: a file whose chunks nothing references any more is uploaded again while the sweep runs; it always reads back byte-exact", async () => {
    const store = await openStore(kind);
    const bytes = bytesOf(2 * MiB + 1, 60);
    const chunks = chunksOf(bytes);
    let removedBySweeps = 0;
    for (let round = 0; round < 50; round++) {
      // Leftovers no row references (a crash after the writes, or after a release's transaction).
      for (const c of chunks) await store.blobs.put(keyOf(c), c);
      // The sweep starts at a different point of the upload each round: before it looks at the
      // first chunk, between chunks, after the last; every other round the upload waits for it
      // there (so it surely runs between two of the upload's steps), else both run at once.
      const startAt = round % 37;
      let sweeping: Promise<{ orphanChunks: number }> | undefined;
      let pieces = 0;
      let at = 0;
      const source = new ReadableStream<Uint8Array>({
        async pull(c) {
          if (pieces++ === startAt) {
            sweeping = store.dfs.sweep();
            if (round % 2 === 0) await sweeping;
          }
          if (at >= bytes.length) return c.close();
          c.enqueue(bytes.slice(at, at + 64 * 1024));
          at += 64 * 1024;
        },
      });
      const up = await store.dfs.put(source);
      await up.commit();
      removedBySweeps += (await (sweeping ?? store.dfs.sweep())).orphanChunks;
      expect(Buffer.compare(await readAll(store.dfs.read(up.cid)), bytes)).toBe(0);
      await store.dfs.release(up.cid);
    }
    // The race was real: some sweeps deleted leftovers before the upload pinned them.
    expect(removedBySweeps).toBeGreaterThan(0);
    expect(await chunkKeys(store)).toEqual([]);
    await store.close();
  });
});
