/**
 * The blockstore that downloads and gc read through: the on-disk blocks only (never bitswap, so a
 * missing block fails at once instead of asking the network, D9), each block's bytes checked
 * against its Cid (a damaged block errors the stream instead of serving wrong bytes), and an
 * optional gate that holds reads back while the consumer is behind.
 *
 * The gate exists because ipfs-unixfs-exporter reads leaves into an unbounded queue as fast as the
 * disk allows, so a slow HTTP client would make memory grow with file size.
 */
import type { unixfs } from "@helia/unixfs";
import type { AbortOptions } from "@libp2p/interface";
import type { CID } from "multiformats/cid";
import { IpfsError } from "./errors.ts";
import type { DurableFsBlockstore } from "./durable-blockstore.ts";

/** What @helia/unixfs and ipfs-unixfs-exporter need of a blockstore. */
export type ReadBlockstore = Parameters<typeof unixfs>[0]["blockstore"];

const RAW = 0x55;
const SHA2_256 = 0x12;

/**
 * Counts leaf bytes read (or being read) from disk against bytes handed to the consumer; a leaf
 * read waits, in call order, while the difference is at or above `highWater`.
 *
 * A leaf is counted from the moment it is admitted (as `reserve` bytes, corrected to its real size
 * once read), because the exporter starts all of a node's leaf reads at once: its
 * `blockReadConcurrency` is not honoured (ipfs-unixfs-exporter 16.2.2 with it-parallel). The
 * exporter reads only the first and last leaf of a range partly, so at most two leaves' worth of
 * "read but never handed over" bytes exist; `highWater` must stay above that, or the gate could
 * close for good.
 */
export class ReadGate {
  #outstanding = 0;
  readonly #waiting: Array<{ go: () => void; fail: (err: unknown) => void }> = [];

  constructor(
    readonly highWater: number,
    readonly reserve: number,
  ) {}

  async admit(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (this.#waiting.length === 0 && this.#outstanding < this.highWater) {
      this.#outstanding += this.reserve;
      return;
    }
    await new Promise<void>((go, fail) => {
      const entry = { go, fail };
      this.#waiting.push(entry);
      signal?.addEventListener("abort", () => {
        const i = this.#waiting.indexOf(entry);
        if (i >= 0) this.#waiting.splice(i, 1);
        fail(signal.reason);
      }, { once: true });
    });
  }

  /** An admitted leaf turned out to be `n` bytes. */
  read(n: number): void {
    this.#outstanding += n - this.reserve;
    this.#wake();
  }

  /** The consumer took `n` bytes. */
  handed(n: number): void {
    this.#outstanding -= n;
    this.#wake();
  }

  /** Admits waiters in order, each reserving before the next is considered. */
  #wake(): void {
    while (this.#waiting.length > 0 && this.#outstanding < this.highWater) {
      this.#outstanding += this.reserve;
      this.#waiting.shift()!.go();
    }
  }
}

export function localStore(blocks: DurableFsBlockstore, gate?: ReadGate): ReadBlockstore {
  return {
    async *get(cid: CID, options?: AbortOptions) {
      const leaf = cid.code === RAW;
      if (leaf && gate) await gate.admit(options?.signal);
      const bytes = await readBlock(blocks, cid, options);
      if (leaf) gate?.read(bytes.byteLength);
      yield bytes;
    },
    async has(cid: CID, options?: AbortOptions) {
      return blocks.has(cid, options);
    },
    async put(): Promise<CID> {
      throw new Error("the read-only blockstore of downloads does not write");
    },
  };
}

/** Reads a whole block from disk and checks it hashes to its Cid. */
export async function readBlock(blocks: DurableFsBlockstore, cid: CID, options?: AbortOptions): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  try {
    for await (const part of blocks.get(cid, options)) parts.push(part);
  } catch (err) {
    options?.signal?.throwIfAborted();
    // blockstore-fs reports any failure to open the file as NotFoundError; read errors pass as-is.
    if ((err as Error).name !== "NotFoundError") throw err;
    throw new IpfsError("IPFS_BLOCK_MISSING", `block ${cid} is not stored here`, { cause: err });
  }
  const bytes = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  verify(cid, bytes);
  return bytes;
}

function verify(cid: CID, bytes: Uint8Array): void {
  const { code, digest } = cid.multihash;
  // Our importer only makes sha2-256 Cids; a block under any other hash cannot be checked, so is
  // not served.
  if (code !== SHA2_256) throw new IpfsError("IPFS_BLOCK_CORRUPT", `block ${cid} uses an unsupported hash (0x${code.toString(16)})`);
  const actual = new Bun.CryptoHasher("sha256").update(bytes).digest();
  if (!actual.equals(digest)) throw new IpfsError("IPFS_BLOCK_CORRUPT", `block ${cid} does not match its hash`);
}
