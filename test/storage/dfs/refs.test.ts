/** Deduplication and reference counts: chunks stored once, kept while named, gone when not. */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { AbortedPutError, NotFoundError } from "../../../src/storage/dfs/index.ts";
import { BLOB_KINDS, MiB, bytesOf, chunkKeys, chunkRefs, keyOf, keysOf, openStore, readAll, rowCounts, scalar, sha256, streamOf } from "./support.ts";

setDefaultTimeout(60_000);

/** A stream that sends `bytes`, then fails. */
function failingStream(bytes: Uint8Array, error: Error): ReadableStream<Uint8Array> {
  let sent = false;
  return new ReadableStream({
    pull(c) {
      if (sent) return c.error(error);
      c.enqueue(bytes);
      sent = true;
    },
  });
}

describe.each(BLOB_KINDS)("dfs dedup and references (%s blob store)", (kind) => {
  test("the same bytes twice: chunks stored once, refs 2, released one by one", async () => {
    const store = await openStore(kind);
    const bytes = bytesOf(3 * MiB + 10, 1);
    const a = await store.dfs.put(streamOf(bytes));
    await a.commit();
    const b = await store.dfs.put(streamOf(bytes));
    await b.commit();
    expect(b.cid).toBe(a.cid);
    expect((await chunkKeys(store)).length).toBe(4);
    expect(await rowCounts(store)).toEqual({ objects: 1, chunks: 4, manifest: 4 });
    expect(await scalar(store, "SELECT refs FROM dfs_objects")).toBe(2);
    expect(await store.dfs.health()).toMatchObject({ ok: true, blobStore: kind, objects: 1, chunks: 4, bytes: bytes.length, uploads: 0, pinnedChunks: 0 });
    expect(await scalar(store, "SELECT COUNT(*) AS n FROM blob_pins")).toBe(0); // committed: the lease is gone

    await store.dfs.release(a.cid);
    expect(Buffer.compare(await readAll(store.dfs.read(a.cid)), bytes)).toBe(0);
    expect((await chunkKeys(store)).length).toBe(4);

    await store.dfs.release(a.cid);
    expect(await store.dfs.stat(a.cid)).toBeUndefined();
    expect(await rowCounts(store)).toEqual({ objects: 0, chunks: 0, manifest: 0 });
    await store.dfs.sweep();
    expect(await chunkKeys(store)).toEqual([]);
    await expect(store.dfs.release(a.cid)).rejects.toBeInstanceOf(NotFoundError);
    await store.close();
  });

  test("two files sharing chunks: each chunk stored once, counted per file", async () => {
    const store = await openStore(kind);
    const [c1, c2, c3] = [bytesOf(MiB, 11), bytesOf(MiB, 12), bytesOf(MiB, 13)];
    const tail = bytesOf(1000, 14);
    const x = Buffer.concat([c1, c2, tail]); // chunks c1, c2, tail
    const y = Buffer.concat([c3, c2, tail]); // chunks c3, c2, tail: c2 and tail shared
    const px = await store.dfs.put(streamOf(x));
    await px.commit();
    const py = await store.dfs.put(streamOf(y));
    await py.commit();
    expect(await chunkKeys(store)).toEqual(keysOf(c1, c2, c3, tail));
    expect(await chunkRefs(store, sha256(c2))).toBe(2);
    expect(await chunkRefs(store, sha256(tail))).toBe(2);
    expect(await chunkRefs(store, sha256(c1))).toBe(1);

    await store.dfs.release(px.cid);
    expect(await chunkKeys(store)).toEqual(keysOf(c2, c3, tail));
    expect(await chunkRefs(store, sha256(c2))).toBe(1);
    expect(Buffer.compare(await readAll(store.dfs.read(py.cid)), y)).toBe(0);
    await store.close();
  });

  test("a file repeating one chunk stores it once with one reference", async () => {
    const store = await openStore(kind);
    const chunk = bytesOf(MiB, 21);
    const up = await store.dfs.put(streamOf(Buffer.concat([chunk, chunk, chunk])));
    await up.commit();
    expect(await chunkKeys(store)).toEqual(keysOf(chunk));
    expect(await rowCounts(store)).toEqual({ objects: 1, chunks: 1, manifest: 3 });
    expect(await chunkRefs(store, sha256(chunk))).toBe(1);
    await store.dfs.release(up.cid);
    expect(await chunkKeys(store)).toEqual([]);
    await store.close();
  });

  test("put without commit references nothing; abort removes what it wrote", async () => {
    const store = await openStore(kind);
    const up = await store.dfs.put(streamOf(bytesOf(2 * MiB + 1, 31)));
    expect((await chunkKeys(store)).length).toBe(3); // durable before commit...
    expect(await store.dfs.health()).toMatchObject({ pinnedChunks: 3 }); // ...and pinned
    expect(await rowCounts(store)).toEqual({ objects: 0, chunks: 0, manifest: 0 }); // ...but unreferenced
    expect(await store.dfs.stat(up.cid)).toBeUndefined();
    await up.abort();
    await up.abort(); // idempotent
    expect(await chunkKeys(store)).toEqual([]);
    await expect(up.commit()).rejects.toBeInstanceOf(AbortedPutError);
    await store.close();
  });

  test("abort keeps chunks that committed content shares", async () => {
    const store = await openStore(kind);
    const shared = bytesOf(MiB, 41);
    const kept = await store.dfs.put(streamOf(shared));
    await kept.commit();
    const other = await store.dfs.put(streamOf(Buffer.concat([shared, bytesOf(5, 42)])));
    await other.abort();
    expect(await chunkKeys(store)).toEqual(keysOf(shared));
    expect(Buffer.compare(await readAll(store.dfs.read(kept.cid)), shared)).toBe(0);
    await store.close();
  });

  test("commit is idempotent per put; each put is one reference", async () => {
    const store = await openStore(kind);
    const bytes = bytesOf(100, 51);
    const up = await store.dfs.put(streamOf(bytes));
    await up.commit();
    await up.commit();
    await up.abort(); // after commit: nothing to drop
    expect(await scalar(store, "SELECT refs FROM dfs_objects")).toBe(1);
    await store.dfs.release(up.cid);
    expect(await store.dfs.stat(up.cid)).toBeUndefined();
    await store.close();
  });

  test("a source that errors midway: put rejects with its error, nothing kept", async () => {
    const store = await openStore(kind);
    const boom = new Error("client went away");
    await expect(store.dfs.put(failingStream(bytesOf(3 * MiB + 5, 61), boom))).rejects.toBe(boom);
    expect(await chunkKeys(store)).toEqual([]);
    expect(await rowCounts(store)).toEqual({ objects: 0, chunks: 0, manifest: 0 });
    await store.close();
  });

  test("an aborted signal: put rejects with its reason, nothing kept", async () => {
    const store = await openStore(kind);
    const controller = new AbortController();
    let sent = 0;
    const source = new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent === 2) controller.abort(new Error("too large"));
        c.enqueue(bytesOf(MiB, 70 + sent++));
      },
    });
    await expect(store.dfs.put(source, { signal: controller.signal })).rejects.toThrow("too large");
    expect(await chunkKeys(store)).toEqual([]);
    await store.close();
  });

  test("a sweep pass told to stop (its lease lost, say) deletes nothing more; the next pass does", async () => {
    const store = await openStore(kind);
    const strays = [bytesOf(MiB, 90), bytesOf(10, 91)];
    for (const c of strays) await store.blobs.put(keyOf(c), c);
    expect(await store.dfs.sweep({ stopped: () => true })).toMatchObject({ orphanChunks: 0 });
    expect(await chunkKeys(store)).toEqual(keysOf(...strays));
    expect(await store.dfs.sweep()).toMatchObject({ orphanChunks: 2 });
    expect(await chunkKeys(store)).toEqual([]);
    await store.close();
  });

  test("stop ends a running upload, keeping nothing, and refuses new ones", async () => {
    const store = await openStore(kind);
    let started!: () => void;
    const reading = new Promise<void>((resolve) => (started = resolve));
    const endless = new ReadableStream<Uint8Array>({
      pull(c) {
        c.enqueue(bytesOf(MiB, 80));
        started();
      },
    });
    const running = store.dfs.put(endless);
    // Its outcome is looked at from the start: stop() may resolve well after the upload rejected
    // (it writes the stopped store's last verification records), and a rejection nobody handles
    // meanwhile fails the test.
    const outcome = running.then(() => "stored", (e: unknown) => e);
    await reading;
    await store.dfs.stop();
    expect(await outcome).toMatchObject({ code: "ERR_STOPPED" });
    await expect(store.dfs.put(streamOf(bytesOf(10)))).rejects.toMatchObject({ code: "ERR_STOPPED" });
    expect(await chunkKeys(store)).toEqual([]);
    await store.database.close();
  });
});
