/**
 * CAR import (D25): a CAR's blocks as they stream in, each checked against its Cid and written to
 * the blob store under the import's lease (put.ts's sink: pinned before it is looked for, written
 * through the import's batch), then each root's DAG walked from the blocks that came. A root
 * becomes content of its own, pinned with exactly the blocks its DAG reaches, once the caller's
 * file rows commit (backend.ts PendingImport); until then nothing references a block, and an
 * import that fails anywhere — a malformed section, a block that does not hash to its Cid, a
 * codec or hash not imported here, a root's DAG missing a block or not UnixFS — deletes every
 * block it wrote that nothing else references. All or nothing.
 *
 * Memory is bounded whatever the CAR's size: one section at a time (car.ts, ≤ 2 MiB), a few
 * block writes in flight, and per block stored its key and size (what the upload path keeps per
 * 1 MiB chunk); dag-pb nodes are read back from the store for the walk rather than kept. The
 * number of blocks, roots and the DAGs' depth are capped, so one request's bookkeeping is too.
 *
 * What a root's file is: a UnixFS file (a raw block, or a dag-pb file whose children's sizes are
 * those its node lists: what downloads rely on) of its file size; or a UnixFS directory (plain or
 * HAMT-sharded) whose size is the bytes of its DAG's blocks, each counted once. A file's DAG may
 * weigh more than its bytes only by its nodes' links (≈ 50 bytes per leaf): beyond a sixteenth
 * (plus 4 KiB) it is refused, so no account stores blocks it is not charged for.
 */
import * as dagPb from "@ipld/dag-pb";
import { UnixFS } from "ipfs-unixfs";
import type { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import type { BlobGuard } from "../../blob/guard.ts";
import { batchOf } from "../../blob/store.ts";
import type { Logger } from "../../log.ts";
import { blockKey, hashChecked, inlineBlock, matchesCid, readBlock } from "./blocks.ts";
import { CarFormatError, readCar } from "../../cid/car.ts";
import { cidKey } from "./cids.ts";
import { IpfsError } from "./errors.ts";
import { referencedAmong } from "./pins.ts";
import { uploadSink, type BlockSizes } from "./put.ts";
import { deleteUnreferenced } from "./sweep.ts";

/** Blocks one CAR may store: ≈ 100 GiB of 1 MiB leaves, or a site of ≈ 100,000 files. */
export const MAX_BLOCKS = 100_000;
/** Roots one CAR may name (each becomes a file). */
export const MAX_ROOTS = 64;
/** Blocks the roots' DAGs may reach together (a block two roots reach counts twice). */
const MAX_REACHED = 2 * MAX_BLOCKS;
/** Levels of a DAG: a balanced file of 1024-link nodes is 4 deep at 1 TiB; folders nest deeper. */
const MAX_DEPTH = 256;
/** Block writes in flight: the sink pins the keys that arrive in one turn together. */
const IN_FLIGHT = 8;

const bad = (what: string) => new IpfsError("IPFS_BAD_CAR", what);

/** A root as its file will be: its Cid (CIDv1, base32), its size, and whether it is a directory. */
export interface ImportedRoot {
  cid: string;
  size: number;
  directory: boolean;
}

/** A root with the blocks its DAG reaches (key → size), for its pin. */
export interface WalkedRoot extends ImportedRoot {
  blocks: BlockSizes;
}

export interface ImportDeps {
  guard: BlobGuard;
  log: Logger;
}

/** Checks one block as it arrives: a codec UnixFS uses, a hash checked here, and its bytes. */
function checkBlock(cid: CID, bytes: Uint8Array): void {
  if (cid.code !== raw.code && cid.code !== dagPb.code) throw bad(`block ${cid} has codec 0x${cid.code.toString(16)}: a CAR import takes UnixFS blocks (dag-pb and raw) only`);
  if (!hashChecked(cid.multihash.code)) throw bad(`block ${cid} uses hash 0x${cid.multihash.code.toString(16)}: sha2-256, sha2-512 and identity are checked here`);
  if (!matchesCid(cid, bytes)) throw bad(`block ${cid} does not match its Cid (its bytes hash to something else)`);
}

/** The header's roots, each once, each a UnixFS codec under a checked hash. */
function checkRoots(roots: CID[]): CID[] {
  if (roots.length === 0) throw bad("the CAR names no root");
  const seen = new Map<string, CID>();
  for (const root of roots) {
    if (root.code !== raw.code && root.code !== dagPb.code) throw bad(`root ${root} has codec 0x${root.code.toString(16)}: a root must be a UnixFS file or directory (dag-pb or raw)`);
    if (!hashChecked(root.multihash.code)) throw bad(`root ${root} uses hash 0x${root.multihash.code.toString(16)}: sha2-256, sha2-512 and identity are checked here`);
    seen.set(cidKey(root), root);
  }
  if (seen.size > MAX_ROOTS) throw bad(`the CAR names ${seen.size} roots: at most ${MAX_ROOTS}`);
  return [...seen.values()];
}

/** What a node of a DAG is, as its parent needs to know it. */
type Node = { type: "file"; size: number } | { type: "directory" } | { type: "symlink" };

/**
 * Walks one root's DAG over the blocks the CAR brought (`have`: key → size), reading dag-pb
 * nodes back from the store: every block it reaches must have come (or be an identity Cid), each
 * dag-pb node must be UnixFS, and a file node's children must hold the sizes it lists.
 */
async function walkRoot(store: BlobGuard["store"], root: CID, have: BlockSizes, budget: { reached: number }): Promise<WalkedRoot> {
  const blocks: BlockSizes = new Map();
  /** dag-pb nodes walked already in this DAG (a file of zeros links one node many times). */
  const walked = new Map<string, Node>();

  async function visit(cid: CID, depth: number): Promise<Node> {
    if (depth > MAX_DEPTH) throw bad(`root ${root}'s DAG is more than ${MAX_DEPTH} levels deep`);
    if (cid.code !== raw.code && cid.code !== dagPb.code) throw bad(`${cid} in root ${root}'s DAG has codec 0x${cid.code.toString(16)}: UnixFS links only dag-pb and raw blocks`);
    if (!hashChecked(cid.multihash.code)) throw bad(`${cid} in root ${root}'s DAG uses hash 0x${cid.multihash.code.toString(16)}, which is not checked here`);
    const inline = inlineBlock(cid);
    const key = blockKey(cid);
    if (!inline) {
      const size = have.get(key);
      if (size === undefined) throw bad(`block ${cid} of root ${root} is missing from the CAR: a root's whole DAG must be in it`);
      if (!blocks.has(key)) {
        if (++budget.reached > MAX_REACHED) throw bad(`the roots' DAGs reach more than ${MAX_REACHED} blocks`);
        blocks.set(key, size);
      }
      if (cid.code === raw.code) return { type: "file", size };
    } else if (cid.code === raw.code) return { type: "file", size: inline.byteLength };

    const known = walked.get(key);
    if (known) return known;
    let node: dagPb.PBNode;
    let unixfs: UnixFS;
    try {
      node = dagPb.decode(inline ?? (await readBlock(store, cid)));
      unixfs = UnixFS.unmarshal(node.Data ?? new Uint8Array(0));
    } catch (err) {
      if (err instanceof IpfsError && err.code !== "IPFS_BLOCK_CORRUPT") throw err;
      throw bad(`block ${cid} of root ${root} is no UnixFS node (${(err as Error).message})`);
    }
    let out: Node;
    switch (unixfs.type) {
      case "file":
      case "raw": {
        if (node.Links.length !== unixfs.blockSizes.length) throw bad(`file node ${cid} has ${node.Links.length} links and ${unixfs.blockSizes.length} sizes`);
        let size = unixfs.data?.byteLength ?? 0;
        for (const [i, link] of node.Links.entries()) {
          const child = await visit(link.Hash, depth + 1);
          const listed = Number(unixfs.blockSizes[i]);
          if (child.type !== "file") throw bad(`file node ${cid} links a ${child.type}`);
          if (child.size !== listed) throw bad(`file node ${cid} says its child ${link.Hash} holds ${listed} bytes; it holds ${child.size}`);
          size += listed;
        }
        out = { type: "file", size };
        break;
      }
      case "directory":
      case "hamt-sharded-directory":
        for (const link of node.Links) await visit(link.Hash, depth + 1);
        out = { type: "directory" };
        break;
      case "symlink":
        if (node.Links.length > 0) throw bad(`symlink ${cid} has links`);
        out = { type: "symlink" };
        break;
      default:
        throw bad(`block ${cid} is a UnixFS ${unixfs.type} node, which is not imported`);
    }
    walked.set(key, out);
    return out;
  }

  const top = await visit(root, 0);
  const dagBytes = [...blocks.values()].reduce((a, b) => a + b, 0);
  if (top.type === "symlink") throw bad(`root ${root} is a UnixFS symlink: a root must be a file or a directory`);
  if (top.type === "directory") return { cid: cidKey(root), size: dagBytes, directory: true, blocks };
  if (dagBytes > top.size + Math.floor(top.size / 16) + 4096) {
    throw bad(`root ${root} is a file of ${top.size} bytes whose blocks weigh ${dagBytes}: its DAG may add at most a sixteenth to its bytes (chunk it in pieces of 1 KiB or more)`);
  }
  return { cid: cidKey(root), size: top.size, directory: false, blocks };
}

/**
 * Reads the CAR from `source`, storing every block under `lease` (put.ts's sink into `batch`),
 * then walks each root's DAG. Resolves with the roots and `have` (every block the CAR stored);
 * on any failure the caller drops what `have` holds.
 */
export async function importBlocks(
  deps: ImportDeps,
  source: ReadableStream<Uint8Array>,
  sink: ImportSink,
  have: BlockSizes,
  signal?: AbortSignal,
): Promise<WalkedRoot[]> {
  const reader = source.getReader();
  const pieces: AsyncIterable<Uint8Array> = {
    async *[Symbol.asyncIterator]() {
      for (;;) {
        signal?.throwIfAborted();
        const { done, value } = await reader.read();
        if (done) return;
        yield value;
      }
    },
  };
  const writing = new Set<Promise<unknown>>();
  try {
    const car = readCar(pieces);
    const roots = checkRoots(await car.roots());
    const arrived = new Set<string>();
    for await (const { cid, bytes } of car.blocks()) {
      checkBlock(cid, bytes);
      if (inlineBlock(cid)) continue; // carried by the Cid itself: nothing to store
      const key = blockKey(cid);
      if (arrived.has(key)) continue; // a CAR may repeat a block
      arrived.add(key);
      if (arrived.size > MAX_BLOCKS) throw bad(`the CAR holds more than ${MAX_BLOCKS} blocks: split it into several`);
      const write = Promise.resolve(sink.put(cid, bytes));
      writing.add(write);
      write.then(
        () => writing.delete(write),
        () => {}, // kept in `writing`: the race below (or the final wait) throws its failure
      );
      while (writing.size >= IN_FLIGHT) await Promise.race(writing);
    }
    await Promise.all(writing);
    await sink.sync(); // durable before any row can name them
    const budget = { reached: 0 };
    const walked: WalkedRoot[] = [];
    for (const root of roots) walked.push(await walkRoot(deps.guard.store, root, have, budget));
    return walked;
  } catch (err) {
    // No write may land after the caller deletes what the import wrote.
    await Promise.allSettled(writing);
    await reader.cancel(err).catch(() => {});
    throw err instanceof CarFormatError ? new IpfsError("IPFS_BAD_CAR", err.message, { cause: err }) : err;
  } finally {
    reader.releaseLock();
  }
}

/** The blocks of `have` that no root's DAG reaches (a CAR may carry extra ones): not kept. */
export function unreached(have: BlockSizes, roots: readonly WalkedRoot[]): string[] {
  return [...have.keys()].filter((key) => !roots.some((r) => r.blocks.has(key)));
}

/** Where an import's blocks go: `put` (recording each in the import's `have`), then `sync`. */
export interface ImportSink {
  put(cid: CID, bytes: Uint8Array): Promise<unknown> | unknown;
  sync(): Promise<void>;
}

/** The sink over the import's lease and blob batch (put.ts's, as uploads write their blocks). */
export function importSink(guard: BlobGuard, lease: ReturnType<BlobGuard["lease"]>, have: BlockSizes): ImportSink {
  const batch = batchOf(guard.store);
  const sink = uploadSink(guard, lease, have, referencedAmong, batch);
  return { put: (cid, bytes) => sink.put(cid, bytes), sync: () => batch.sync() };
}

/** Drops what an import wrote: the lease's pins, then each block nothing references. */
export async function dropImported(deps: ImportDeps, lease: ReturnType<BlobGuard["lease"]>, keys: Iterable<string>): Promise<void> {
  await lease.release();
  await deleteUnreferenced(deps.guard, keys, deps.log);
}
