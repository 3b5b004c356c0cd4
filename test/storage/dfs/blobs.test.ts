/**
 * Where the chunks live (D15): on S3 nothing of them touches the data dir, and a data dir from
 * before the blob store (chunk files `DATA/dfs/ab/cd/<hex>`) keeps working once opened, on
 * either store: its chunks move in, its old folders go.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BLOB_KINDS, MiB, bytesOf, chunkKeys, filesUnder, keyOf, keysOf, openStore, readAll, sha256, streamOf } from "./support.ts";

setDefaultTimeout(60_000);

test("on S3 no chunk is written under the data dir", async () => {
  const store = await openStore("s3");
  const bytes = bytesOf(3 * MiB + 5, 1);
  const up = await store.dfs.put(streamOf(bytes));
  await up.commit();
  const other = await store.dfs.put(streamOf(bytesOf(MiB, 2)));
  await other.abort();
  expect((await chunkKeys(store)).length).toBe(4);
  // The database and its journal files, nothing else.
  expect(filesUnder(store.root).filter((f) => !/^stowage\.db(-wal|-shm)?$/.test(f))).toEqual([]);
  expect(Buffer.compare(await readAll(store.dfs.read(up.cid)), bytes)).toBe(0);
  await store.close();
});

describe.each(BLOB_KINDS)("a data dir in the layout from before the blob store (%s blob store)", (kind) => {
  test("its chunk files move into the blob store; files download byte-exact; the old folders go", async () => {
    const made = await openStore(kind);
    const a = bytesOf(3 * MiB + 11, 70);
    const b = Buffer.concat([a.subarray(0, MiB), bytesOf(100, 71)]); // shares a's first chunk
    const ups = [await made.dfs.put(streamOf(a)), await made.dfs.put(streamOf(b))];
    for (const up of ups) await up.commit();
    await made.close();
    // The old layout: the same rows, each chunk a file DATA/dfs/ab/cd/<sha-256 hex> and no blob;
    // plus what the old store could leave: an unreferenced chunk file and a temp file.
    const chunks = [...[0, 1, 2, 3].map((i) => a.subarray(i * MiB, (i + 1) * MiB)), b.subarray(MiB)];
    const oldPath = (hash: string) => join(made.legacyDir, hash.slice(0, 2), hash.slice(2, 4), hash);
    const unreferenced = bytesOf(MiB, 72);
    for (const c of [...chunks, unreferenced]) {
      await made.blobs.delete(keyOf(c));
      mkdirSync(join(oldPath(sha256(c)), ".."), { recursive: true });
      writeFileSync(oldPath(sha256(c)), c);
    }
    writeFileSync(`${oldPath(sha256(chunks[0]!))}.tmp-0a1b2c`, "half a chunk");
    expect(await chunkKeys(made)).toEqual([]);

    const opened = await openStore(kind, { root: made.root });
    expect(Buffer.compare(await readAll(opened.dfs.read(ups[0]!.cid)), a)).toBe(0);
    expect(Buffer.compare(await readAll(opened.dfs.read(ups[1]!.cid)), b)).toBe(0);
    expect(Buffer.compare(await readAll(opened.dfs.read(ups[0]!.cid, { start: MiB - 3, end: 2 * MiB + 4 })), a.subarray(MiB - 3, 2 * MiB + 5))).toBe(0);
    expect(await chunkKeys(opened)).toEqual(keysOf(...chunks));
    expect(existsSync(made.legacyDir)).toBe(false);
    expect(await opened.dfs.sweep()).toMatchObject({ orphanChunks: 0, keptChunks: 5 });
    await opened.close();

    // Opening again finds nothing left to move.
    const again = await openStore(kind, { root: made.root });
    expect(Buffer.compare(await readAll(again.dfs.read(ups[0]!.cid)), a)).toBe(0);
    await again.close();
  });
});
