/**
 * Interop: a second Helia node in another process (test/support/ipfs-peer.ts) dials this node over
 * TCP and fetches uploaded content by Cid with bitswap; the allow-list decides who may.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { base58btc } from "multiformats/bases/base58";
import { join } from "node:path";
import { loadOrCreatePeerKey } from "../../../src/storage/ipfs/peer-key.ts";
import { tempDir } from "../../support/tmp.ts";
import { MiB, openBackend, randomBytes, sha256, streamOf, within, type Opened } from "./helpers.ts";

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
  });
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
