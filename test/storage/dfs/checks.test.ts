/**
 * D9's verification records and scrub on the local blob store: a chunk whose file is the one its
 * record names is served without hashing; any other file is hashed first (and refused when
 * wrong); the scrub finds damage no metadata shows and from then on the chunk is never served.
 * (S3 hashes on every read: crash.test.ts covers damage there.)
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { openSync, closeSync, readSync, statSync, utimesSync, writeSync } from "node:fs";
import { identityOf, type LocalBlobStore } from "../../../src/blob/local.ts";
import { createLogger } from "../../../src/log.ts";
import { CorruptChunkError } from "../../../src/storage/dfs/index.ts";
import { bytesOf, keyOf, MiB, openStore, readAll, sha256, streamOf, type Store } from "./support.ts";

setDefaultTimeout(60_000);

type Counts = { hashed: number; trusted: number; damaged: number };
const counts = async (store: Store) => (await store.dfs.health()).checks as Counts;
const pathOf = (store: Store, chunk: Uint8Array) => (store.blobs as LocalBlobStore).pathOf(keyOf(chunk));

/** Flips one byte of a file in place (the same inode), then sets its mtime back. */
function flipInPlace(path: string, at: number): void {
  const { atime, mtime } = statSync(path);
  const fd = openSync(path, "r+");
  try {
    const b = Buffer.alloc(1);
    readSync(fd, b, 0, 1, at);
    b[0] = b[0]! ^ 0x10;
    writeSync(fd, b, 0, 1, at);
  } finally {
    closeSync(fd);
  }
  utimesSync(path, atime, mtime);
}

/** Plays damage no metadata shows (a bit flipped on the medium): the record is made to name the file as it is now. */
async function hideChange(store: Store, chunk: Uint8Array): Promise<void> {
  const file = identityOf(statSync(pathOf(store, chunk), { bigint: true }));
  expect(await store.database.sql.run("UPDATE dfs_chunk_checks SET file = $1 WHERE hash = $2", [file, sha256(chunk)])).toBe(1);
}

describe("dfs verification records (local blob store)", () => {
  test("chunks written by an upload are served on their record, without hashing; any range is byte-exact", async () => {
    const store = await openStore("local");
    const bytes = bytesOf(3 * MiB + 777, 71);
    const up = await store.dfs.put(streamOf(bytes));
    await up.commit();
    expect(Buffer.compare(await readAll(store.dfs.read(up.cid)), bytes)).toBe(0);
    expect(await counts(store)).toEqual({ hashed: 0, trusted: 4, damaged: 0 });
    // Ranges across boundaries, inside one chunk, single bytes at the edges: each read only the bytes sent.
    const ranges: [number, number][] = [[0, 0], [MiB - 1, MiB], [MiB - 5, 2 * MiB + 5], [MiB, 2 * MiB - 1], [2 * MiB + 3, 3 * MiB + 776], [3 * MiB + 776, 3 * MiB + 776], [17, 3 * MiB + 700]];
    for (let i = 0; i < 20; i++) {
      const a = (i * 2654435761) % bytes.length;
      const b = Math.min(bytes.length - 1, a + ((i * 40503) % (2 * MiB)));
      ranges.push([a, b]);
    }
    for (const [start, end] of ranges) {
      const got = await readAll(store.dfs.read(up.cid, { start, end }));
      expect(Buffer.compare(got, bytes.subarray(start, end + 1))).toBe(0);
    }
    expect((await counts(store)).hashed).toBe(0);
    // A range of up to a chunk comes as one part (read into one buffer: nothing to join for a whole-body answer).
    const parts: Uint8Array[] = [];
    for await (const part of store.dfs.read(up.cid, { start: MiB - 100, end: 2 * MiB - 101 })) parts.push(part);
    expect(parts.map((p) => p.byteLength)).toEqual([MiB]);
    expect(Buffer.compare(parts[0]!, bytes.subarray(MiB - 100, 2 * MiB - 100))).toBe(0);
    await store.close();
  });

  test("a chunk file changed in place, even with its mtime set back, is hashed and refused; a replaced file with the right bytes is hashed and served", async () => {
    const lines: string[] = [];
    const store = await openStore("local", { log: createLogger("error", (l) => lines.push(l)) });
    const bytes = bytesOf(3 * MiB, 72);
    const up = await store.dfs.put(streamOf(bytes));
    await up.commit();
    const second = bytes.subarray(MiB, 2 * MiB);
    flipInPlace(pathOf(store, second), 4321);
    // The range needs 100 bytes of the chunk, but its file is not the recorded one: read whole, hashed, refused.
    await expect(readAll(store.dfs.read(up.cid, { start: MiB, end: MiB + 99 }))).rejects.toBeInstanceOf(CorruptChunkError);
    expect(await counts(store)).toMatchObject({ hashed: 1, damaged: 1 });
    // Refused again on the damaged record, without hashing again.
    await expect(readAll(store.dfs.read(up.cid))).rejects.toBeInstanceOf(CorruptChunkError);
    expect(await counts(store)).toMatchObject({ hashed: 1 });
    expect(lines.filter((l) => l.includes("damaged chunk")).length).toBe(2);

    // The right bytes under a new inode (as an operator restoring a backup would): hashed once, then trusted.
    await store.blobs.put(keyOf(second), second);
    expect(Buffer.compare(await readAll(store.dfs.read(up.cid)), bytes)).toBe(0);
    expect(Buffer.compare(await readAll(store.dfs.read(up.cid)), bytes)).toBe(0);
    expect(await counts(store)).toMatchObject({ hashed: 2, damaged: 1 });
    await store.close();
  });

  test("damage no metadata shows is served until the scrub finds it, then never again", async () => {
    const lines: string[] = [];
    const store = await openStore("local", { log: createLogger("error", (l) => lines.push(l)) });
    const bytes = bytesOf(2 * MiB + 10, 73);
    const up = await store.dfs.put(streamOf(bytes));
    await up.commit();
    const first = bytes.subarray(0, MiB);
    await store.dfs.scrub(); // writes the upload's records (and checks nothing: all recorded)
    flipInPlace(pathOf(store, first), 99);
    await hideChange(store, first);
    // D9's trade-off: the record matches, so the flipped byte goes out.
    const served = await readAll(store.dfs.read(up.cid, { start: 0, end: 199 }));
    expect(served[99]).toBe(bytes[99]! ^ 0x10);

    expect(await store.dfs.scrub()).toEqual({ checked: 0, damaged: 0 }); // recorded and recent: not due
    expect(await store.dfs.scrub({ all: true })).toEqual({ checked: 3, damaged: 1 });
    expect(lines.some((l) => l.includes("damaged chunk") && l.includes("scrub"))).toBe(true);
    for (const range of [undefined, { start: 0, end: 199 }, { start: MiB - 1, end: MiB }]) {
      await expect(readAll(store.dfs.read(up.cid, range))).rejects.toBeInstanceOf(CorruptChunkError);
    }
    // The other chunks still serve.
    expect(Buffer.compare(await readAll(store.dfs.read(up.cid, { start: MiB, end: 2 * MiB + 9 })), bytes.subarray(MiB))).toBe(0);
    // An upload of the same bytes repairs it.
    const again = await store.dfs.put(streamOf(bytes));
    await again.commit();
    expect(Buffer.compare(await readAll(store.dfs.read(up.cid)), bytes)).toBe(0);
    await store.close();
  });

  test("chunks without a record (written before the records, or their record lost) are hashed by the scrub at open, then trusted", async () => {
    const first = await openStore("local");
    const bytes = bytesOf(2 * MiB, 74);
    const up = await first.dfs.put(streamOf(bytes));
    await up.commit();
    await first.close();
    const root = first.root;
    // Reopen the same data with the records gone, one chunk damaged meanwhile.
    const lines: string[] = [];
    const probe = await openStore("local", { root, log: createLogger("error", (l) => lines.push(l)) });
    await probe.dfs.scrub(); // waits for the pass at open
    await probe.database.sql.run("DELETE FROM dfs_chunk_checks");
    flipInPlace(pathOf(probe, bytes.subarray(MiB)), 5);
    await probe.close();

    const store = await openStore("local", { root, log: createLogger("error", (l) => lines.push(l)) });
    expect(await store.dfs.scrub()).toEqual({ checked: 0, damaged: 0 }); // the pass at open did them
    expect(await counts(store)).toMatchObject({ hashed: 2, damaged: 1 });
    expect(Buffer.compare(await readAll(store.dfs.read(up.cid, { start: 0, end: MiB - 1 })), bytes.subarray(0, MiB))).toBe(0);
    await expect(readAll(store.dfs.read(up.cid))).rejects.toBeInstanceOf(CorruptChunkError);
    expect(await counts(store)).toMatchObject({ hashed: 2, trusted: 2 }); // chunk 0, twice; the damaged one refused on its record
    await store.close();
  });
});
