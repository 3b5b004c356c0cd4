/**
 * Interop: a second Helia node in another process (test/support/ipfs-peer.ts) dials this node over
 * TCP and fetches uploaded content by Cid with bitswap; the allow-list decides who may.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { base58btc } from "multiformats/bases/base58";
import { readdirSync, rmSync } from "node:fs";
import { join, relative } from "node:path";
import { loadOrCreatePeerKey } from "../../../src/storage/ipfs/peer-key.ts";
import { TEST_BLOBS } from "../../support/blobs.ts";
import { tempDir } from "../../support/tmp.ts";
import { MiB, blockKeys, collect, openBackend, randomBytes, sha256, streamOf, within, type Opened } from "./helpers.ts";

// Each fetch starts a Helia node in another process (≈ 1 s on a busy machine).
setDefaultTimeout(60_000);

const PEER = join(import.meta.dir, "..", "..", "support", "ipfs-peer.ts");

interface PeerResult {
  sha256?: string;
  bytes?: number;
  error?: string;
  exitCode: number;
}

async function fetchFromPeer(addr: string, cid: string, opts: { timeoutMs?: number; ipfsDir?: string } = {}): Promise<PeerResult> {
  const args = ["bun", PEER, addr, cid, String(opts.timeoutMs ?? 20_000), ...(opts.ipfsDir ? [opts.ipfsDir] : [])];
  const child = Bun.spawn(args, { stdout: "pipe", stderr: "pipe" });
  const [out, err, exitCode] = await within(30_000, Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]));
  const line = out.trim().split("\n").at(-1) ?? "";
  try {
    return { ...(JSON.parse(line) as Omit<PeerResult, "exitCode">), exitCode };
  } catch {
    throw new Error(`the peer printed no result (exit ${exitCode}): ${out}\n${err}`);
  }
}

/** A peer folder with a key made here, and the peer id it gives. */
async function preparedPeer(): Promise<{ dir: string; peerId: string }> {
  const dir = join(tempDir("ipfs-peer"), "ipfs");
  await Bun.write(join(dir, ".keep"), "");
  const key = await loadOrCreatePeerKey(join(dir, "peer.key"));
  return { dir, peerId: base58btc.baseEncode(key.publicKey.toMultihash().bytes) };
}

describe("another process fetches by Cid over TCP + bitswap", () => {
  let o: Opened;
  const bytes = randomBytes(5 * MiB + 321);
  let cid = "";
  beforeAll(async () => {
    o = await openBackend();
    const p = await o.ipfs.put(streamOf(bytes));
    await p.commit();
    cid = p.cid;
  }, 60_000);
  afterAll(() => o.close());

  test("a 5 MiB multi-block file arrives byte-exact", async () => {
    const [addr] = o.ipfs.multiaddrs();
    const got = await fetchFromPeer(addr!, cid);
    expect(got).toEqual({ sha256: sha256(bytes), bytes: bytes.byteLength, ms: expect.any(Number), exitCode: 0 } as PeerResult);
    expect((await o.ipfs.health()).peerId).toBe(o.ipfs.peerId);
  });

  test("hello world\\n (a single raw block) arrives too", async () => {
    const p = await o.ipfs.put(streamOf(new TextEncoder().encode("hello world\n")));
    await p.commit();
    const got = await fetchFromPeer(o.ipfs.multiaddrs()[0]!, p.cid);
    expect(got.sha256).toBe(sha256(new TextEncoder().encode("hello world\n")));
  });
});

describe("allow-list (D9)", () => {
  const bytes = randomBytes(MiB + 1);

  async function serverAllowing(allowPeers: string[]) {
    const o = await openBackend(undefined, { allowPeers });
    const p = await o.ipfs.put(streamOf(bytes));
    await p.commit();
    return { o, cid: p.cid };
  }

  test("a listed peer fetches", async () => {
    const peer = await preparedPeer();
    const { o, cid } = await serverAllowing([peer.peerId]);
    try {
      const got = await fetchFromPeer(o.ipfs.multiaddrs()[0]!, cid, { ipfsDir: peer.dir });
      expect(got.exitCode).toBe(0);
      expect(got.sha256).toBe(sha256(bytes));
    } finally {
      await o.close();
    }
  });

  test("an unlisted peer cannot connect, so gets nothing", async () => {
    const listed = await preparedPeer();
    const stranger = await preparedPeer();
    const { o, cid } = await serverAllowing([listed.peerId]);
    try {
      const got = await fetchFromPeer(o.ipfs.multiaddrs()[0]!, cid, { ipfsDir: stranger.dir, timeoutMs: 8_000 });
      expect(got.exitCode).toBe(1);
      expect(got.sha256).toBeUndefined();
      expect((await o.ipfs.health()).connections).toBe(0);
    } finally {
      await o.close();
    }
  });
});

describe("the blocks live in the blob store, not in the data dir", () => {
  /** Every file under `dir`, relative to it. */
  const filesUnder = (dir: string): string[] =>
    readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((d) => d.isFile())
      .map((d) => relative(dir, join(d.parentPath, d.name)))
      .sort();

  const files = [randomBytes(3 * MiB + 5), new TextEncoder().encode("hello world\n"), new Uint8Array(2 * MiB)];

  test("with S3 configured, no block is written under the data dir", async () => {
    const o = await openBackend();
    try {
      for (const bytes of files) await (await o.ipfs.put(streamOf(bytes))).commit();
      expect((await blockKeys(o.store)).length).toBe(5 + 1 + 2);
      const local = filesUnder(o.dataDir);
      const allowed = (f: string) => /^stowage\.db(-wal|-shm)?$/.test(f) || f === "ipfs/peer.key" || f.startsWith("ipfs/datastore/");
      if (TEST_BLOBS === "s3") expect(local.filter((f) => !allowed(f))).toEqual([]);
      // On local files, the blocks are the blob store's files and nowhere else under ipfs/.
      else expect(local.filter((f) => !allowed(f) && !f.startsWith("blobs/ipfs/"))).toEqual([]);
    } finally {
      await o.close();
    }
  });

  // The whole ipfs folder goes, peer key included: a gateway rebuilt on a new machine over the same
  // database and blob store comes back with a new peer id and still serves everything.
  test("after a restart with the local ipfs folder removed, every file downloads byte-exact and another node fetches it over bitswap", async () => {
    let o = await openBackend();
    const cids: string[] = [];
    for (const bytes of files) {
      const p = await o.ipfs.put(streamOf(bytes));
      await p.commit();
      cids.push(p.cid);
    }
    const oldPeer = o.ipfs.peerId;
    await o.close();
    rmSync(join(o.dataDir, "ipfs"), { recursive: true });

    o = await openBackend(o.dataDir);
    try {
      expect(o.ipfs.peerId).not.toBe(oldPeer);
      expect(await o.ipfs.swept).toMatchObject({ removed: 0, held: 0 });
      for (const [i, cid] of cids.entries()) {
        expect(sha256(await collect(o.ipfs.read(cid)))).toBe(sha256(files[i]!));
        const got = await fetchFromPeer(o.ipfs.multiaddrs()[0]!, cid);
        expect(got).toMatchObject({ sha256: sha256(files[i]!), bytes: files[i]!.byteLength, exitCode: 0 });
      }
    } finally {
      await o.close();
    }
  });
});
