/**
 * The `ipfs` storage back-end: an embedded Helia node (see node.ts) serving the blocks of the blob
 * store (D15) over bitswap, so another IPFS node can fetch uploads by Cid. The libp2p key and
 * datastore stay local, in `dir`.
 *
 * Reference counts in the database, as dfs: `put` imports through a sink that pins every block key
 * with a guard lease before looking for it and records the DAG's keys; `commit()` adds a
 * reference to the root (its first also references its blocks) in one transaction, then drops the
 * lease; `abort()` drops the lease and deletes the blocks nothing references. `release()` drops a
 * reference (`releaseIn`: in the transaction of the file row that replaced its entry); at zero the
 * root's block rows go, and each block no other root contains is deleted through the guard. A
 * crash in between leaves blocks without rows, which the orphan sweep run at start deletes. Data dirs with blocks in the old blockstore-fs folder are moved over first
 * (migrate.ts).
 *
 * @example
 *   const ipfs = await openIpfs({ dir: join(dataDir, "ipfs"), listen: config.ipfsListen, sql, log, guard })
 *   const pending = await ipfs.put(body)
 *   await pending.commit()
 *   return new Response(ipfs.read(pending.cid, { start: 0, end: 99 }))
 */
import { LEASE_MS, type BlobGuard } from "../../blob/guard.ts";
import { batchOf } from "../../blob/store.ts";
import type { Queryable, Sql } from "../../db/sql.ts";
import type { Logger } from "../../log.ts";
import type { Backend, ByteRange, PendingImport, PendingPut } from "../backend.ts";
import { BlobBlockstore, readBlock, verifyBlock, type Servable } from "./blocks.ts";
import { cidKey, parseCid, tryCidKey } from "./cids.ts";
import { IpfsError, isIpfsError } from "./errors.ts";
import { migrateOldBlocks, type MigrateResult } from "./migrate.ts";
import { startIpfsNode, type IpfsHelia } from "./node.ts";
import { addRef, addRefIn, dropRef, dropRefIn, pinned, pinnedCount, referencedAmong } from "./pins.ts";
import { pendingContent, pendingPut } from "../pending.ts";
import { dropImported, importBlocks, importSink, unreached } from "./import.ts";
import { importStream, uploadSink, type BlockSizes, type Imported } from "./put.ts";
import { isFileRoot, NodeCache, readContent } from "./read.ts";
import { deleteUnreferenced, sweepOrphans, type SweepResult } from "./sweep.ts";
import { keepDialled } from "./peers.ts";
import type { Multiaddr } from "@multiformats/multiaddr";
import type { CID } from "multiformats/cid";

export { IpfsError, isIpfsError, type IpfsErrorCode } from "./errors.ts";
export { d9ImporterOptions } from "../cid-options.ts";
export { blockKey, type Servable } from "./blocks.ts";
export { rootsOfBlock } from "./pins.ts";
export type { MigrateResult } from "./migrate.ts";
export type { SweepResult } from "./sweep.ts";
export type { IpfsHelia } from "./node.ts";

export interface OpenIpfsOptions {
  /** The back-end's local folder, normally DATA_DIR/ipfs: `datastore/`, `peer.key`. */
  dir: string;
  /** libp2p listen multiaddrs (config `ipfsListen`, STOWAGE_IPFS_LISTEN). */
  listen: readonly string[];
  sql: Sql;
  log: Logger;
  /** The server's blob guard (and through it the blob store the blocks live in). */
  guard: BlobGuard;
  /** Peer ids allowed to connect, and so to fetch over bitswap (D9); unset = anyone. */
  allowPeers?: readonly string[];
  /** Whether a block may be served to other peers (the denylist, D25); absent, every block may. */
  servable?: Servable;
  /** Other gateways' multiaddrs (STOWAGE_IPFS_PEERS), kept dialled (peers.ts). */
  peers?: readonly Multiaddr[];
  /** false: no orphan sweep at open; the server runs the sweeps on one gateway of the cluster at
   * a time (src/storage/sweeps.ts) and calls `sweep()` itself. Default true. */
  sweepAtOpen?: boolean;
}

export interface IpfsBackend extends Backend {
  readonly kind: "ipfs";
  importCar(source: ReadableStream<Uint8Array>, opts?: { signal?: AbortSignal }): Promise<PendingImport>;
  readonly peerId: string;
  /** Addresses other nodes can dial, each ending in `/p2p/<peerId>`. */
  multiaddrs(): string[];
  readonly helia: IpfsHelia;
  /** What moving an old data dir's blocks did (all zero when there was nothing to move). */
  readonly migrated: MigrateResult;
  /** The orphan sweep started at open (it runs beside uploads); none with `sweepAtOpen: false`. */
  readonly swept: Promise<SweepResult> | undefined;
  /** One more pass of the orphan sweep (safe beside uploads; see sweep.ts); `stopped` ends the
   * listing early. */
  sweep(opts?: { stopped?: () => boolean }): Promise<SweepResult>;
  /**
   * Content whose blocks come from elsewhere under their own Cids (a pin's DAG, fetched over
   * bitswap), uncommitted as `put` leaves it: `walk` hands each block to `keep` (whose caller has
   * checked it against its Cid), which writes it as `put`'s sink does, pinned by the upload's
   * lease; `walk` resolves with the content's size. If `walk` throws, nothing is kept.
   */
  putDag(root: CID, walk: (keep: (cid: CID, bytes: Uint8Array) => Promise<void>) => Promise<number>): Promise<PendingPut>;
  /** A block by its Cid, checked against it: from the blob store when it holds it, else over
   * bitswap from the connected peers (a pin's origins, the configured peers). */
  fetchBlock(cid: CID, signal: AbortSignal): Promise<Uint8Array>;
  /** Dials each of `addrs` (a pin's origins) at once; how many answered. Failures are the peers'. */
  dial(addrs: readonly Multiaddr[], signal: AbortSignal): Promise<number>;
}

/** One more reference to each imported root, one after the other (each locks its blocks' rows in key order). */
async function refRoots(tx: Queryable, roots: readonly { cid: string; size: number; blocks: BlockSizes }[]): Promise<void> {
  for (const r of roots) await addRefIn(tx, r.cid, r.size, r.blocks);
}

export async function openIpfs(opts: OpenIpfsOptions): Promise<IpfsBackend> {
  const { sql, log, guard } = opts;
  const began = performance.now();
  // Before the node serves anything: pinned content must be whole in the blob store.
  const migrated = await migrateOldBlocks({ dir: opts.dir, sql, guard, log });
  const node = await startIpfsNode({
    dir: opts.dir,
    listen: opts.listen,
    allowPeers: opts.allowPeers,
    blockstore: new BlobBlockstore(guard.store, opts.servable),
  });
  const { helia } = node;
  const store = guard.store;
  const nodes = new NodeCache();
  const peerId = helia.libp2p.peerId.toString();
  const multiaddrs = () => helia.libp2p.getMultiaddrs().map(String);
  log.info("ipfs node started", { peerId, listen: multiaddrs(), store: store.kind, ms: Math.round(performance.now() - began) });

  let stopping: Promise<void> | undefined;
  const running = () => {
    if (stopping) throw new IpfsError("IPFS_STOPPED", "the ipfs back-end is stopped");
  };

  let again: ReturnType<typeof setTimeout> | undefined;
  let sweeping: Promise<unknown> = Promise.resolve();
  const sweep = (retry: boolean, stopped?: () => boolean) =>
    (sweeping = sweepOrphans({ sql, guard, log, stopped: () => stopping !== undefined || stopped?.() === true }).then(
      (result) => {
        log.info("ipfs orphan sweep done", { ...result });
        // Blocks held by pins at start may be a killed upload's: once its pins have lapsed, one
        // more pass takes them. Pins still held then are live uploads', which commit or abort.
        if (retry && result.held > 0 && !stopping) {
          again = setTimeout(() => void sweep(false), LEASE_MS + 1_000);
          again.unref();
        }
        return result;
      },
      (err: unknown) => {
        log.error("ipfs orphan sweep failed", { err: String(err) });
        return { seen: 0, removed: 0, held: 0 };
      },
    ));
  const swept = opts.sweepAtOpen === false ? undefined : sweep(true);
  const dialled = opts.peers?.length ? keepDialled(helia.libp2p, opts.peers, log) : undefined;

  return {
    kind: "ipfs",
    // Content on ipfs is permanent (spec rule 4): a file there is never deleted.
    capabilities: { delete: false },
    peerId,
    multiaddrs,
    helia,
    migrated,
    swept,
    sweep: (o) => sweep(false, o?.stopped),

    async put(source: ReadableStream<Uint8Array>, putOpts?: { signal?: AbortSignal }): Promise<PendingPut> {
      running();
      // Held until commit or abort: its pins keep deleters off the blocks the rows will name.
      const lease = guard.lease();
      const blocks: BlockSizes = new Map();
      const drop = async () => {
        await lease.release();
        await deleteUnreferenced(guard, blocks.keys(), log);
      };
      let imported: Imported;
      try {
        // One fsync per block, its rename and folder fsync one after the other held each upload
        // on the disk for every MiB: the batch syncs behind the writes, once, here.
        const batch = batchOf(store);
        imported = await importStream(uploadSink(guard, lease, blocks, referencedAmong, batch), source, putOpts?.signal);
        await batch.sync(); // before commit() can name a block
      } catch (err) {
        await drop();
        throw err;
      }
      const cid = cidKey(imported.cid);
      const size = imported.size;
      return pendingPut(cid, size, lease, () => new IpfsError("IPFS_ABORTED", `upload of ${cid} was aborted`), {
        commit: () => addRef(sql, cid, size, blocks),
        commitIn: (tx) => addRefIn(tx, cid, size, blocks),
        // Blocks other pinned content contains have rows, and blocks another upload is writing
        // have their pins: the guard keeps both.
        discard: drop,
      });
    },

    async putDag(root, walk) {
      running();
      const lease = guard.lease();
      const blocks: BlockSizes = new Map();
      let size: number;
      try {
        const batch = batchOf(store);
        const sink = uploadSink(guard, lease, blocks, referencedAmong, batch);
        size = await walk(async (cid, bytes) => void (await sink.put(cid, bytes)));
        await batch.sync(); // before commit() can name a block
      } catch (err) {
        await lease.release();
        await deleteUnreferenced(guard, blocks.keys(), log);
        throw err;
      }
      const cid = cidKey(root);
      return pendingPut(cid, size, lease, () => new IpfsError("IPFS_ABORTED", `pin of ${cid} was aborted`), {
        commit: () => addRef(sql, cid, size, blocks),
        commitIn: (tx) => addRefIn(tx, cid, size, blocks),
        discard: async () => {
          await lease.release();
          await deleteUnreferenced(guard, blocks.keys(), log);
        },
      });
    },

    async fetchBlock(cid, signal) {
      running();
      try {
        return await readBlock(store, cid, { signal });
      } catch (err) {
        if (!isIpfsError(err, "IPFS_BLOCK_MISSING")) throw err;
      }
      const bytes = await node.want(cid, { signal });
      verifyBlock(cid, bytes);
      return bytes;
    },

    async dial(addrs, signal) {
      running();
      const done = await Promise.allSettled(addrs.map((a) => helia.libp2p.dial(a, { signal })));
      return done.filter((d) => d.status === "fulfilled").length;
    },

    async importCar(source: ReadableStream<Uint8Array>, importOpts?: { signal?: AbortSignal }): Promise<PendingImport> {
      running();
      // As `put`: held until commit or abort, its pins keep deleters off the blocks the rows will name.
      const lease = guard.lease();
      const have: BlockSizes = new Map();
      const deps = { guard, log };
      let roots: Awaited<ReturnType<typeof importBlocks>>;
      try {
        roots = await importBlocks(deps, source, importSink(guard, lease, have), have, importOpts?.signal);
      } catch (err) {
        await dropImported(deps, lease, have.keys());
        throw err;
      }
      const label = roots.map((r) => r.cid).join(",");
      return {
        roots: roots.map(({ cid, size, directory }) => ({ cid, size, directory })),
        ...pendingContent(label, lease, () => new IpfsError("IPFS_ABORTED", `import of ${label} was aborted`), {
          commit: () => sql.tx((tx) => refRoots(tx, roots), { isolation: "read committed" }),
          commitIn: (tx) => refRoots(tx, roots),
          // Blocks the CAR carried that no root reaches have no row: not kept.
          committed: async () => void (await deleteUnreferenced(guard, unreached(have, roots), log)),
          discard: () => dropImported(deps, lease, have.keys()),
        }),
      };
    },

    async stat(cid: string) {
      const key = tryCidKey(cid);
      const row = key === undefined ? undefined : await pinned(sql, key);
      // A folder (a CAR import's root) is content, but no file a download can stream.
      return row && (await isFileRoot({ store, nodes }, cid)) ? { size: row.size } : undefined;
    },

    read(cid: string, range?: ByteRange): ReadableStream<Uint8Array> {
      return readContent(
        {
          store,
          nodes,
          pinnedSize: async (key) => {
            running();
            return (await pinned(sql, key))?.size;
          },
        },
        cid,
        range,
      );
    },

    async release(cid: string) {
      const key = cidKey(parseCid(cid));
      const { left, freed } = await dropRef(sql, key);
      if (left === undefined) log.warn("ipfs release of a Cid with no reference", { cid: key });
      if (freed.length > 0) await deleteUnreferenced(guard, freed, log);
    },

    async releaseIn(tx: Queryable, cid: string) {
      const key = cidKey(parseCid(cid));
      const { left, freed } = await dropRefIn(tx, key);
      if (left === undefined) log.warn("ipfs release of a Cid with no reference", { cid: key });
      // Run after the upload answered (storage/pending.ts): its deletions ride in later pins.
      return freed.length > 0 ? () => deleteUnreferenced(guard, freed, log, { ride: true }).then(() => undefined) : undefined;
    },

    async health() {
      return {
        kind: "ipfs",
        status: helia.status,
        peerId,
        store: store.kind,
        multiaddrs: stopping ? [] : multiaddrs(),
        connections: stopping ? 0 : helia.libp2p.getConnections().length,
        pinned: await pinnedCount(sql),
      };
    },

    stop() {
      // Bun keeps the process alive about 1 s after the TCP listener closes; nothing to wait for.
      clearTimeout(again);
      dialled?.stop();
      stopping ??= sweeping
        .then(() => node.stop())
        .then(() => log.info("ipfs node stopped", { peerId }));
      return stopping;
    },
  };
}
