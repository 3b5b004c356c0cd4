/**
 * The blockstore that downloads and the DAG walks read through: the blob store only (never
 * bitswap, so a missing block fails at once instead of asking the network, D9), each block's
 * bytes checked against its Cid (a damaged block errors the stream instead of serving wrong
 * bytes), and an optional gate that holds reads back while the consumer is behind.
 *
 * The gate exists because ipfs-unixfs-exporter reads leaves into an unbounded queue as fast as the
 * store allows, so a slow HTTP client would make memory grow with file size.
 */
import type { unixfs } from "@helia/unixfs";
import type { AbortOptions } from "@libp2p/interface";
import type { CID } from "multiformats/cid";
import type { BlobStore } from "../../blob/index.ts";
import { blockKey, readBlock } from "./blocks.ts";

/** What @helia/unixfs and ipfs-unixfs-exporter need of a blockstore. */
export type ReadBlockstore = Parameters<typeof unixfs>[0]["blockstore"];

const RAW = 0x55;

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

export function localStore(store: BlobStore, gate?: ReadGate): ReadBlockstore {
  return {
    async *get(cid: CID, options?: AbortOptions) {
      const leaf = cid.code === RAW;
      if (leaf && gate) await gate.admit(options?.signal);
      const bytes = await readBlock(store, cid, options);
      if (leaf) gate?.read(bytes.byteLength);
      yield bytes;
    },
    async has(cid: CID) {
      return (await store.stat(blockKey(cid))) !== undefined;
    },
    async put(): Promise<CID> {
      throw new Error("the read-only blockstore of downloads does not write");
    },
  };
}
