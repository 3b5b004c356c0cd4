/**
 * Pin reference counts, abort, start-up gc, restarts and a kill -9 mid-upload, each on its own
 * data dir with the back-end reopened as a server restart would.
 */
import { describe, expect, test } from "bun:test";
import { exporter } from "ipfs-unixfs-exporter";
import { CID } from "multiformats/cid";
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { sharding } from "../../../src/storage/ipfs/durable-blockstore.ts";
import { tempDir } from "../../support/tmp.ts";
import { MiB, blockFiles, collect, openBackend, randomBytes, sha256, streamOf, within } from "./helpers.ts";

const refs = (o: Awaited<ReturnType<typeof openBackend>>, cid: string) =>
  o.database.sqlite.query<{ refs: number }, [string]>("select refs from ipfs_pins where cid = ?").get(cid)?.refs;

describe("pins", () => {
  test("two commits of the same bytes: one release keeps it, the second unpins; gc at reopen removes the blocks", async () => {
    const bytes = randomBytes(2 * MiB + 1);
    let o = await openBackend();
    const first = await o.ipfs.put(streamOf(bytes));
    await first.commit();
    const second = await o.ipfs.put(streamOf(bytes));
    expect(second.cid).toBe(first.cid);
    await second.commit();
    expect(refs(o, first.cid)).toBe(2);
    expect(blockFiles(o.dataDir).length).toBe(4); // root + 3 leaves, stored once

    await o.ipfs.release(first.cid);
    expect(refs(o, first.cid)).toBe(1);
    expect(await o.ipfs.stat(first.cid)).toEqual({ size: bytes.byteLength });
    expect(sha256(await collect(o.ipfs.read(first.cid)))).toBe(sha256(bytes));

    await o.ipfs.release(first.cid);
    expect(refs(o, first.cid)).toBeUndefined();
    expect(await o.ipfs.stat(first.cid)).toBeUndefined();
    expect((await o.ipfs.health()).pinned).toBe(0);
    await o.ipfs.release(first.cid); // one too many: harmless
    await o.close();

    o = await openBackend(o.dataDir);
    expect(o.ipfs.startGc).toEqual({ kept: 0, removed: 4, broken: 0, missingLeaves: 0 });
    expect(blockFiles(o.dataDir)).toEqual([]);
    await o.close();
  });

  test("abort pins nothing and the next start's gc removes its blocks", async () => {
    let o = await openBackend();
    const aborted = await o.ipfs.put(streamOf(randomBytes(MiB + 7)));
    await aborted.abort();
    expect(await o.ipfs.stat(aborted.cid)).toBeUndefined();
    expect((await o.ipfs.health()).pinned).toBe(0);
    expect(blockFiles(o.dataDir).length).toBe(3);
    await o.close();
    o = await openBackend(o.dataDir);
    expect(o.ipfs.startGc.removed).toBe(3);
    expect(blockFiles(o.dataDir)).toEqual([]);
    await o.close();
  });

  // Helia 7.1.15's own pin counts lose a shared block in exactly this order (see src/storage/ipfs/gc.ts).
  test("content sharing a chunk: pin A, pin B, release A, pin A again, release B → A intact after gc", async () => {
    const shared = randomBytes(MiB);
    const a = new Uint8Array([...shared, ...randomBytes(1000)]);
    const bb = new Uint8Array([...shared, ...randomBytes(1000)]);
    let o = await openBackend();
    const put = async (bytes: Uint8Array) => {
      const p = await o.ipfs.put(streamOf(bytes));
      await p.commit();
      return p.cid;
    };
    const cidA = await put(a);
    const cidB = await put(bb);
    await o.ipfs.release(cidA);
    expect(await put(a)).toBe(cidA);
    await o.ipfs.release(cidB);
    await o.close();
    o = await openBackend(o.dataDir);
    expect(o.ipfs.startGc).toEqual({ kept: 3, removed: 2, broken: 0, missingLeaves: 0 }); // B's root and tail go
    expect(sha256(await collect(o.ipfs.read(cidA)))).toBe(sha256(a));
    await o.close();
  });

  test("a file repeating one chunk, released, does not take the chunk from another file", async () => {
    const zeros = new Uint8Array(2 * MiB + 1); // links the all-zero chunk twice
    const other = new Uint8Array(MiB + 5); // its first leaf is the same all-zero chunk
    let o = await openBackend();
    const p1 = await o.ipfs.put(streamOf(other));
    await p1.commit();
    const p2 = await o.ipfs.put(streamOf(zeros));
    await p2.commit();
    await o.ipfs.release(p2.cid);
    await o.close();
    o = await openBackend(o.dataDir);
    expect(sha256(await collect(o.ipfs.read(p1.cid)))).toBe(sha256(other));
    expect(await o.ipfs.stat(p2.cid)).toBeUndefined();
    await o.close();
  });
});

describe("gc with damaged pinned content", () => {
  /** A data dir holding a pinned 2-leaf file and an aborted upload's 3 blocks of garbage. */
  async function damagedSetup() {
    const o = await openBackend();
    const kept = await o.ipfs.put(streamOf(randomBytes(MiB + 10)));
    await kept.commit();
    const garbage = await o.ipfs.put(streamOf(randomBytes(2 * MiB + 10)));
    await garbage.abort();
    const files = blockFiles(o.dataDir);
    await o.close();
    expect(files).toHaveLength(3 + 4);
    return { dataDir: o.dataDir, cid: kept.cid };
  }

  test("a missing leaf is reported and the sweep still runs", async () => {
    const { dataDir, cid } = await damagedSetup();
    const leaf = await firstLeafFile(dataDir, cid);
    rmSync(leaf);
    const o = await openBackend(dataDir);
    expect(o.ipfs.startGc).toEqual({ kept: 2, removed: 4, broken: 0, missingLeaves: 1 });
    await o.close();
  });

  test("a missing root stops the sweep: nothing is deleted", async () => {
    const { dataDir, cid } = await damagedSetup();
    const { dir, file } = sharding.encode(CID.parse(cid));
    rmSync(join(dataDir, "ipfs", "blocks", dir, file));
    const o = await openBackend(dataDir);
    expect(o.ipfs.startGc).toEqual({ kept: 0, removed: 0, broken: 1, missingLeaves: 0 });
    expect(blockFiles(dataDir)).toHaveLength(6);
    await o.close();
  });
});

/** Path of the first leaf's block file under a dag-pb root (read straight from disk). */
async function firstLeafFile(dataDir: string, root: string): Promise<string> {
  const pathOf = (cid: CID) => {
    const { dir, file } = sharding.encode(cid);
    return join(dataDir, "ipfs", "blocks", dir, file);
  };
  const disk = { get: async function* (cid: CID) { yield readFileSync(pathOf(cid)); } };
  const entry = await exporter(CID.parse(root), disk);
  if (entry.type !== "file" || !("Links" in entry.node)) throw new Error("not a multi-block file");
  return pathOf(entry.node.Links[0]!.Hash);
}

describe("restarts", () => {
  test("the peer id, the key file's mode and the blocks survive a restart", async () => {
    const bytes = randomBytes(MiB + 100);
    let o = await openBackend();
    const peerId = o.ipfs.peerId;
    expect(peerId).toMatch(/^12D3KooW/); // Ed25519
    const p = await o.ipfs.put(streamOf(bytes));
    await p.commit();
    await o.close();

    o = await openBackend(o.dataDir);
    expect(o.ipfs.peerId).toBe(peerId);
    expect(o.ipfs.multiaddrs().every((a) => a.endsWith(`/p2p/${peerId}`))).toBe(true);
    expect(statSync(join(o.dataDir, "ipfs", "peer.key")).mode & 0o777).toBe(0o600);
    expect(statSync(join(o.dataDir, "ipfs")).mode & 0o777).toBe(0o700);
    expect(o.ipfs.startGc).toEqual({ kept: 3, removed: 0, broken: 0, missingLeaves: 0 });
    expect(sha256(await collect(o.ipfs.read(p.cid)))).toBe(sha256(bytes));
    const health = await o.ipfs.health();
    expect(health).toMatchObject({ kind: "ipfs", status: "started", peerId, pinned: 1, connections: 0 });
    await o.close();
    expect(await o.ipfs.put(streamOf(bytes)).then(() => undefined, (e: unknown) => e)).toMatchObject({ code: "IPFS_STOPPED" });
  });

  test("a damaged peer key stops the start instead of changing the peer id", async () => {
    const o = await openBackend();
    await o.close();
    writeFileSync(join(o.dataDir, "ipfs", "peer.key"), "garbage");
    const err = await openBackend(o.dataDir).then(() => undefined, (e: unknown) => e);
    expect(err).toMatchObject({ code: "IPFS_BAD_PEER_KEY" });
  });

  test("kill -9 mid-upload: the restart removes the partial upload's blocks and keeps committed content", async () => {
    const dataDir = tempDir("ipfs");
    const child = Bun.spawn(["bun", join(import.meta.dir, "fixtures", "upload-forever.ts"), dataDir], { stdout: "pipe", stderr: "inherit" });
    const lines = readLines(child.stdout);
    const committed = (await within(15_000, lines.next())).value?.replace("committed ", "");
    expect((await within(5_000, lines.next())).value).toBe("uploading");
    // Wait (bounded) until the upload has written some leaves, then kill the server hard.
    await within(15_000, until(() => blockFiles(dataDir).length >= 4));
    child.kill(9);
    await child.exited;
    // What a crash in blockstore-fs's write leaves: a temporary file.
    mkdirSync(join(dataDir, "ipfs", "blocks", "ZZ"), { recursive: true });
    writeFileSync(join(dataDir, "ipfs", "blocks", "ZZ", ".CIQPARTIALZZ.data.tmp"), "half a block");

    const o = await openBackend(dataDir);
    expect(o.ipfs.startGc.removed).toBeGreaterThanOrEqual(3);
    expect(blockFiles(dataDir, { all: true })).toHaveLength(1); // the committed file's single block, no temporaries
    expect((await o.ipfs.health()).pinned).toBe(1);
    expect(new TextDecoder().decode(await collect(o.ipfs.read(committed!)))).toBe("kept across the crash\n");
    await o.close();
    expect(readFileSync(join(dataDir, "ipfs", "peer.key")).byteLength).toBeGreaterThan(0);
  });
});

async function* readLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const chunk of stream) {
    buffered += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      yield buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
    }
  }
}

/** Polls `check` until it holds (callers bound the wait with `within`). */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await Bun.sleep(20);
}
