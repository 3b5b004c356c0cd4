/** Import, Cids, reads and ranges of the ipfs back-end (one real Helia node). */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { unixfs } from "@helia/unixfs";
import { exporter } from "ipfs-unixfs-exporter";
import { importer } from "ipfs-unixfs-importer";
import { fixedSize } from "ipfs-unixfs-importer/chunker";
import { balanced } from "ipfs-unixfs-importer/layout";
import { CID } from "multiformats/cid";
import { LocalBlobStore } from "../../../src/blob/index.ts";
import { blockKey } from "../../../src/storage/ipfs/blocks.ts";
import { isIpfsError } from "../../../src/storage/ipfs/index.ts";
import { MiB, collect, openBackend, randomBytes, sha256, streamOf, within, type Opened } from "./helpers.ts";

let b: Opened;
// The first test process's database may start here (PostgreSQL pass): more than a hook's 5 s.
beforeAll(async () => {
  b = await openBackend();
}, 60_000);
afterAll(() => b.close());

async function putCommitted(bytes: Uint8Array) {
  const pending = await b.ipfs.put(streamOf(bytes));
  await pending.commit();
  return pending;
}

/** The Cid bare ipfs-unixfs-importer gives with D9's options written out here, independently. */
async function referenceCid(bytes: Uint8Array): Promise<string> {
  const options = {
    cidVersion: 1 as const,
    rawLeaves: true,
    chunker: fixedSize({ chunkSize: MiB }),
    layout: balanced({ maxChildrenPerNode: 1024 }),
  };
  // The importer only writes; the Cid does not depend on where blocks go.
  const discard = { put: async (cid: CID) => cid };
  for await (const entry of importer([{ content: bytes }], discard, options)) return entry.cid.toString();
  throw new Error("importer yielded nothing");
}

/** What @helia/unixfs 8 gives with no options at all (D9 says its defaults are the rule). */
async function heliaDefaultCid(bytes: Uint8Array): Promise<string> {
  const discard = { put: async (cid: CID) => cid, get: async function* () {}, has: async () => false };
  return (await unixfs({ blockstore: discard }).addBytes(bytes)).toString();
}

async function readError(stream: ReadableStream<Uint8Array>): Promise<unknown> {
  try {
    await within(5_000, collect(stream));
  } catch (err) {
    return err;
  }
  throw new Error("the read succeeded");
}

describe("import", () => {
  test("hello world\\n has the D9 Cid", async () => {
    const pending = await b.ipfs.put(streamOf(new TextEncoder().encode("hello world\n")));
    expect(pending.cid).toBe("bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4");
    expect(pending.size).toBe(12);
    await pending.abort();
  });

  test("3.5 MiB of random bytes: Cid as ipfs-unixfs-importer with D9 options, byte-exact round trip", async () => {
    const bytes = randomBytes(3.5 * MiB);
    const pending = await putCommitted(bytes);
    expect(pending.cid).toBe(await referenceCid(bytes));
    expect(pending.cid).toBe(await heliaDefaultCid(bytes));
    expect(pending.cid.startsWith("bafybei")).toBe(true); // a dag-pb root over 4 raw leaves
    expect(pending.size).toBe(bytes.byteLength);
    expect(await b.ipfs.stat(pending.cid)).toEqual({ size: bytes.byteLength });
    expect(sha256(await collect(b.ipfs.read(pending.cid)))).toBe(sha256(bytes));
  });

  test("an empty stream is content too", async () => {
    const pending = await putCommitted(new Uint8Array(0));
    expect(pending.cid).toBe(await referenceCid(new Uint8Array(0)));
    expect(pending.size).toBe(0);
    expect((await collect(b.ipfs.read(pending.cid))).byteLength).toBe(0);
  });

  test("a stream that errors rejects the put and pins nothing", async () => {
    let sent = 0;
    const failing = new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent >= 2 * MiB) return c.error(new Error("client went away"));
        c.enqueue(randomBytes(256 * 1024));
        sent += 256 * 1024;
      },
    });
    const before = (await b.ipfs.health()).pinned;
    const err = await b.ipfs.put(failing).then(() => undefined, (e: unknown) => e);
    expect(isIpfsError(err, "IPFS_IMPORT_FAILED")).toBe(true);
    expect((await b.ipfs.health()).pinned).toBe(before);
  });

  test("an aborted signal stops the import, even while the source is silent", async () => {
    const controller = new AbortController();
    let pulls = 0;
    const stalling = new ReadableStream<Uint8Array>({
      pull(c) {
        if (++pulls === 1) c.enqueue(randomBytes(1000));
        else setTimeout(() => controller.abort(new Error("request aborted")), 10);
        // The second pull never enqueues: only the signal can end this put.
        return pulls === 1 ? undefined : new Promise(() => {});
      },
    });
    const err = await within(5_000, b.ipfs.put(stalling, { signal: controller.signal }).then(() => undefined, (e: unknown) => e));
    expect(isIpfsError(err, "IPFS_IMPORT_FAILED")).toBe(true);
  });

  test("commit is idempotent; commit after abort is refused", async () => {
    const bytes = randomBytes(1000);
    const once = await b.ipfs.put(streamOf(bytes));
    await once.commit();
    await once.commit();
    await once.abort(); // after commit: nothing to do
    const again = await b.ipfs.put(streamOf(bytes));
    await again.abort();
    await again.abort();
    expect(await again.commit().then(() => undefined, (e: unknown) => e)).toMatchObject({ code: "IPFS_ABORTED" });
    expect(await b.database.sql.get("select refs from ipfs_pins where cid = $1", [once.cid])).toEqual({ refs: 1 });
    await b.ipfs.release(once.cid);
  });
});

describe("read", () => {
  const bytes = randomBytes(2 * MiB + 12_345);
  let cid = "";
  beforeAll(async () => {
    cid = (await putCommitted(bytes)).cid;
  }, 60_000);

  const cases: Array<[string, number, number]> = [
    ["first byte", 0, 0],
    ["last byte", bytes.byteLength - 1, bytes.byteLength - 1],
    ["across the first 1 MiB boundary", MiB - 10, MiB + 9],
    ["across both boundaries", MiB - 1, 2 * MiB],
    ["exactly the second chunk", MiB, 2 * MiB - 1],
    ["the tail", 2 * MiB, bytes.byteLength - 1],
    ["everything", 0, bytes.byteLength - 1],
  ];
  for (const [name, start, end] of cases) {
    test(`range: ${name}`, async () => {
      const got = await collect(b.ipfs.read(cid, { start, end }));
      expect(got.byteLength).toBe(end - start + 1);
      expect(Buffer.from(got).equals(bytes.subarray(start, end + 1))).toBe(true);
    });
  }

  test("ranges inside a one-block (raw) file", async () => {
    const small = new TextEncoder().encode("hello world\n");
    const { cid: raw } = await putCommitted(small);
    expect(new TextDecoder().decode(await collect(b.ipfs.read(raw, { start: 6, end: 10 })))).toBe("world");
    expect(new TextDecoder().decode(await collect(b.ipfs.read(raw, { start: 11, end: 11 })))).toBe("\n");
    await b.ipfs.release(raw);
  });

  test("a range outside the content, or backwards, errors the stream", async () => {
    for (const range of [{ start: 0, end: bytes.byteLength }, { start: 5, end: 4 }, { start: -1, end: 3 }]) {
      expect(await readError(b.ipfs.read(cid, range))).toMatchObject({ code: "IPFS_BAD_RANGE" });
    }
  });

  test("an unknown Cid, unpinned content and a non-Cid are absent", async () => {
    const unknown = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy";
    expect(await b.ipfs.stat(unknown)).toBeUndefined();
    expect(await b.ipfs.stat("not a cid")).toBeUndefined();
    expect(await readError(b.ipfs.read(unknown))).toMatchObject({ code: "IPFS_NOT_FOUND" });
    expect(await readError(b.ipfs.read("not a cid"))).toMatchObject({ code: "IPFS_BAD_CID" });
    const pending = await b.ipfs.put(streamOf(randomBytes(5000)));
    expect(await b.ipfs.stat(pending.cid)).toBeUndefined(); // not committed yet
    expect(await readError(b.ipfs.read(pending.cid))).toMatchObject({ code: "IPFS_NOT_FOUND" });
    await pending.abort();
  });

  test("a missing block errors the stream at once (no network fetch, no hang)", async () => {
    const victim = randomBytes(3 * MiB);
    const { cid: root } = await putCommitted(victim);
    const second = await secondLeaf(root);
    await b.store.delete(blockKey(second));
    // The first leaf is still served; the stream then fails instead of waiting for a peer.
    expect(await readError(b.ipfs.read(root))).toMatchObject({ code: "IPFS_BLOCK_MISSING" });
    expect(await readError(b.ipfs.read(root, { start: MiB + 5, end: MiB + 5 }))).toMatchObject({ code: "IPFS_BLOCK_MISSING" });
    // A range that avoids the missing leaf still reads.
    expect(Buffer.from(await collect(b.ipfs.read(root, { start: 0, end: 99 }))).equals(victim.subarray(0, 100))).toBe(true);
  });

  test("a damaged block errors the stream instead of serving wrong bytes", async () => {
    const victim = randomBytes(2 * MiB);
    const { cid: root } = await putCommitted(victim);
    const leaf = await secondLeaf(root);
    const damaged = victim.slice(MiB, 2 * MiB);
    damaged[123] = (damaged[123]! + 1) % 256;
    await b.store.put(blockKey(leaf), damaged);
    expect(await readError(b.ipfs.read(root, { start: MiB, end: MiB + 10 }))).toMatchObject({ code: "IPFS_BLOCK_CORRUPT" });
  });

  // The service reads a body of up to one chunk whole: as one part it goes out as it is, as two
  // it was copied into a fresh buffer (read.ts readShort). On S3 leaves come as fresh buffers anyway.
  test("a range up to one chunk across leaves is one part (local store), checked whole before any byte", async () => {
    const parts = async (stream: ReadableStream<Uint8Array>) => {
      const got: Uint8Array[] = [];
      for await (const part of stream) got.push(part);
      return got;
    };
    const victim = randomBytes(3 * MiB);
    const { cid: root } = await putCommitted(victim);
    const local = b.store instanceof LocalBlobStore;
    for (const [start, end] of [[MiB - 100, 2 * MiB - 101], [MiB - 1, MiB], [0, MiB - 1], [2 * MiB + 7, 3 * MiB - 1]] as const) {
      const got = await parts(b.ipfs.read(root, { start, end }));
      if (local) expect(got.length).toBe(1);
      expect(Buffer.concat(got).equals(victim.subarray(start, end + 1))).toBe(true);
    }
    if (!local) return;
    const leaf = await secondLeaf(root);
    const damaged = victim.slice(MiB, 2 * MiB);
    damaged[MiB - 1] = (damaged[MiB - 1]! + 1) % 256;
    await b.store.put(blockKey(leaf), damaged);
    // The first leaf is whole, but none of its bytes go out before the second is checked.
    const reader = b.ipfs.read(root, { start: MiB - 100, end: 2 * MiB - 101 }).getReader();
    expect(await reader.read().then(() => undefined, (e: unknown) => e)).toMatchObject({ code: "IPFS_BLOCK_CORRUPT" });
  });

  test("the blockstore bitswap serves from checks every block: a damaged one is refused, a missing one absent", async () => {
    const victim = randomBytes(2 * MiB);
    const { cid: root } = await putCommitted(victim);
    const leaf = await secondLeaf(root);
    const served = b.ipfs.helia.blockstore; // what bitswap's ledger calls: has(), then get()
    expect(await served.has(leaf)).toBe(true);
    await b.store.put(blockKey(leaf), victim.slice(0, MiB));
    const err = await (async () => {
      for await (const _ of served.get(leaf)) return undefined;
    })().then(() => undefined, (e: unknown) => e);
    expect(isIpfsError(err, "IPFS_BLOCK_CORRUPT")).toBe(true);
    await b.store.delete(blockKey(leaf));
    expect(await served.has(leaf)).toBe(false);
  });

  test("cancelling a read midway releases it", async () => {
    const reader = b.ipfs.read(cid).getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    await within(5_000, reader.cancel("client gone"));
  });
});

/** The Cid of the second leaf under a dag-pb root. */
async function secondLeaf(root: string): Promise<CID> {
  const entry = await exporter(CID.parse(root), b.ipfs.helia.blockstore, { offline: true });
  if (entry.type !== "file" || !("Links" in entry.node)) throw new Error("not a multi-block file");
  return entry.node.Links[1]!.Hash;
}
