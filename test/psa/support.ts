/**
 * What the Pinning Service API's tests share: a second IPFS node (built as the server's is, its
 * blocks in memory) that holds content and serves it over bitswap on TCP, as a client's own node
 * would when it names itself in `origins`; and content made there the way `ipfs add` makes it
 * (CIDv0, dag-pb leaves of 256 KiB: not the gateway's own layout, so a pin keeps the client's Cid).
 */
import { unixfs } from "@helia/unixfs";
import { afterAll } from "bun:test";
import { fixedSize } from "ipfs-unixfs-importer/chunker";
import { join } from "node:path";
import { startIpfsNode } from "../../src/storage/ipfs/node.ts";
import { tempDir } from "../support/tmp.ts";

export const PSA_SPEC = join(import.meta.dir, "ipfs-pinning-service.yaml");

export async function originNode() {
  const node = await startIpfsNode({ dir: join(tempDir("psa-origin"), "ipfs"), listen: ["/ip4/127.0.0.1/tcp/0"] });
  afterAll(() => node.stop());
  const fs = unixfs(node.helia);
  return {
    node,
    /** Its address, with its peer id: what a client puts in `origins`. */
    addrs: () => node.helia.libp2p.getMultiaddrs().map(String),
    /** Adds `bytes` as `ipfs add` (Kubo's defaults) does; the root's Cid as Kubo prints it. */
    async add(bytes: Uint8Array): Promise<string> {
      return (await fs.addBytes(bytes, { cidVersion: 0, rawLeaves: false, chunker: fixedSize({ chunkSize: 256 * 1024 }) })).toString();
    },
    /** A directory of two files. */
    async addDirectory(): Promise<string> {
      let dir = await fs.addDirectory();
      dir = await fs.cp(await fs.addBytes(randomBytes(1000)), dir, "a.bin");
      dir = await fs.cp(await fs.addBytes(randomBytes(2000)), dir, "b.bin");
      return dir.toString();
    },
  };
}

export const randomBytes = (n: number) => {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(out.subarray(i, Math.min(n, i + 65536)));
  return out;
};

export const sha256 = (bytes: Uint8Array) => new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
