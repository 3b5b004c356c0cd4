/**
 * The `ipfs` storage back-end: an embedded Helia node (see node.ts) whose uploads are pinned by
 * reference count, so another IPFS node can fetch them by Cid over bitswap.
 *
 * Pinning: `put` imports without pinning and returns a PendingPut holding the lock shared;
 * `commit()` adds a reference in `ipfs_pins` (the content is pinned while it has one), `abort()`
 * adds nothing. `release()` drops a reference; at zero the row goes and the blocks become
 * garbage. Garbage collection runs once, at open, before the node listens, with the lock held
 * exclusively: a kill -9 mid-upload leaves unpinned blocks that the next start removes.
 *
 * @example
 *   const ipfs = await openIpfs({ dir: join(dataDir, "ipfs"), listen: config.ipfsListen, db, log })
 *   const pending = await ipfs.put(body)
 *   await pending.commit()
 *   return new Response(ipfs.read(pending.cid, { start: 0, end: 99 }))
 */
import type { Db } from "../../db/open.ts";
import type { Logger } from "../../log.ts";
import type { Backend, ByteRange, PendingPut } from "../backend.ts";
import { cidKey, parseCid, tryCidKey } from "./cids.ts";
import { IpfsError } from "./errors.ts";
import { collectGarbage, type GcResult } from "./gc.ts";
import { SharedExclusiveLock } from "./lock.ts";
import { startIpfsNode, type IpfsHelia } from "./node.ts";
import { addRef, dropRef, pinned, pinnedCount, pinnedRoots } from "./pins.ts";
import { importStream, type Imported } from "./put.ts";
import { readContent } from "./read.ts";

export { IpfsError, isIpfsError, type IpfsErrorCode } from "./errors.ts";
export { d9ImporterOptions } from "../cid-options.ts";
export type { GcResult } from "./gc.ts";
export type { IpfsHelia } from "./node.ts";

export interface OpenIpfsOptions {
  /** The back-end's folder, normally DATA_DIR/ipfs: `blocks/`, `datastore/`, `peer.key`. */
  dir: string;
  /** libp2p listen multiaddrs (config `ipfsListen`, STOWAGE_IPFS_LISTEN). */
  listen: readonly string[];
  db: Db;
  log: Logger;
  /** Peer ids allowed to connect, and so to fetch over bitswap (D9); unset = anyone. */
  allowPeers?: readonly string[];
  /** Collect garbage once this many bytes of aborted or unpinned content have piled up. */
  gcAfterBytes?: number;
}

export interface IpfsBackend extends Backend {
  readonly kind: "ipfs";
  readonly peerId: string;
  /** Addresses other nodes can dial, each ending in `/p2p/<peerId>`. */
  multiaddrs(): string[];
  readonly helia: IpfsHelia;
  /** What the start-up gc did. */
  readonly startGc: GcResult;
  /** Bytes of aborted or unpinned content not yet collected, and the collection under way. */
  garbage(): { bytes: number; running?: Promise<GcResult> };
}

export async function openIpfs(opts: OpenIpfsOptions): Promise<IpfsBackend> {
  const { db, log } = opts;
  const lock = new SharedExclusiveLock();
  let startGc: GcResult = { kept: 0, removed: 0, broken: 0, missingLeaves: 0 };
  const began = performance.now();
  const node = await startIpfsNode({
    dir: opts.dir,
    listen: opts.listen,
    allowPeers: opts.allowPeers,
    async beforeStart(blocks) {
      const release = await lock.exclusive();
      try {
        startGc = await collectGarbage(blocks, pinnedRoots(db), log);
      } finally {
        release();
      }
    },
  });
  const { helia, blocks } = node;
  const peerId = helia.libp2p.peerId.toString();
  const multiaddrs = () => helia.libp2p.getMultiaddrs().map(String);
  log.info("ipfs node started", { peerId, listen: multiaddrs(), gc: startGc, ms: Math.round(performance.now() - began) });

  // Aborted imports and unpinned content leave blocks behind; without a collection at run time
  // they would fill the disk until the next start, outside anyone's quota.
  const gcAfter = opts.gcAfterBytes ?? 64 * 1024 * 1024;
  let garbageBytes = 0;
  let collecting: Promise<GcResult> | undefined;
  const litter = (bytes: number) => {
    garbageBytes += bytes;
    if (garbageBytes < gcAfter || collecting || stopping) return;
    collecting = (async () => {
      const release = await lock.exclusive(); // waits for imports in flight; new ones wait for it
      try {
        garbageBytes = 0;
        const result = await collectGarbage(blocks, pinnedRoots(db), log);
        log.info("ipfs garbage collected", { ...result });
        return result;
      } finally {
        release();
        collecting = undefined;
      }
    })();
    collecting.catch((err) => log.error("ipfs garbage collection failed", { err: (err as Error).message }));
  };

  let stopping: Promise<void> | undefined;
  const running = () => {
    if (stopping) throw new IpfsError("IPFS_STOPPED", "the ipfs back-end is stopped");
  };

  return {
    kind: "ipfs",
    peerId,
    multiaddrs,
    helia,
    startGc,
    garbage: () => ({ bytes: garbageBytes, running: collecting }),

    async put(source: ReadableStream<Uint8Array>, putOpts?: { signal?: AbortSignal }): Promise<PendingPut> {
      running();
      // Held until commit or abort: gc must not sweep these blocks before they are pinned.
      const release = await lock.shared();
      let imported: Imported;
      try {
        imported = await importStream(helia, source, putOpts?.signal);
      } catch (err) {
        release();
        throw err;
      }
      const cid = cidKey(imported.cid);
      const size = imported.size;
      let settled: "committed" | "aborted" | undefined;
      return {
        cid,
        size,
        async commit() {
          if (settled === "committed") return;
          if (settled === "aborted") throw new IpfsError("IPFS_ABORTED", `upload of ${cid} was aborted`);
          addRef(db, cid, size);
          settled = "committed";
          release();
        },
        async abort() {
          if (settled) return;
          settled = "aborted";
          // Unpinned blocks (perhaps shared with pinned content) go at the next collection.
          release();
          litter(size);
        },
      };
    },

    async stat(cid: string) {
      const key = tryCidKey(cid);
      const row = key === undefined ? undefined : pinned(db, key);
      return row ? { size: row.size } : undefined;
    },

    read(cid: string, range?: ByteRange): ReadableStream<Uint8Array> {
      return readContent(
        {
          blocks,
          pinnedSize: (key) => {
            running();
            return pinned(db, key)?.size;
          },
        },
        cid,
        range,
      );
    },

    async release(cid: string) {
      const key = cidKey(parseCid(cid));
      const size = pinned(db, key)?.size ?? 0;
      const left = dropRef(db, key);
      if (left === undefined) log.warn("ipfs release of a Cid with no reference", { cid: key });
      else if (left === 0) litter(size);
    },

    async health() {
      return {
        kind: "ipfs",
        status: helia.status,
        peerId,
        multiaddrs: stopping ? [] : multiaddrs(),
        connections: stopping ? 0 : helia.libp2p.getConnections().length,
        pinned: pinnedCount(db),
      };
    },

    stop() {
      // Bun keeps the process alive about 1 s after the TCP listener closes; nothing to wait for.
      stopping ??= (collecting ?? Promise.resolve())
        .catch(() => undefined)
        .then(() => node.stop())
        .then(() => log.info("ipfs node stopped", { peerId }));
      return stopping;
    },
  };
}
