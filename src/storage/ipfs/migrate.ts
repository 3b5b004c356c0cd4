/**
 * Data dirs from before the blob store kept blocks in blockstore-fs under `DATA/ipfs/blocks`
 * (`<last 2 chars>/<BASE32UPPER multihash>.data`), and pins without block rows. At start, each
 * pinned root not yet indexed has its DAG walked once: every block is copied into the blob store
 * (pinned by a lease first, checked against its Cid), and the root's block rows are written in
 * one transaction. Then the old folder goes. Blocks no pinned root reaches are not copied.
 *
 * Crash-safe by being repeatable: a root is indexed whole or not at all, copies are idempotent,
 * and the old folder goes last. A root that cannot be walked (a missing or damaged dag-pb node)
 * stays unindexed and the old folder stays, so nothing is lost and the next start tries again;
 * a missing raw leaf is logged (such content was unreadable before too) and the walk goes on.
 */
import * as dagPb from "@ipld/dag-pb";
import type { FsBlockstore } from "blockstore-fs";
import { UnixFS } from "ipfs-unixfs";
import type { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { BlobGuard, Lease } from "../../blob/guard.ts";
import type { Sql } from "../../db/sql.ts";
import type { Logger } from "../../log.ts";
import { blockKey, readBlock, verifyBlock } from "./blocks.ts";
import { parseCid } from "./cids.ts";
import { indexRoot, unindexedRoots } from "./pins.ts";
import type { BlockSizes } from "./put.ts";


export interface MigrateResult {
  /** Pinned roots indexed now. */
  indexed: number;
  /** Blocks written into the blob store from the old folder. */
  copied: number;
  /** Raw leaves of pinned content found nowhere. */
  missingLeaves: number;
  /** Roots that could not be walked (left unindexed, with the old folder). */
  broken: number;
  /** Whether the old folder was removed. */
  removedOld: boolean;
}

export async function migrateOldBlocks(deps: { dir: string; sql: Sql; guard: BlobGuard; log: Logger }): Promise<MigrateResult> {
  const { sql, guard, log } = deps;
  const oldDir = join(deps.dir, "blocks");
  const hasOld = existsSync(oldDir);
  const result: MigrateResult = { indexed: 0, copied: 0, missingLeaves: 0, broken: 0, removedOld: false };
  const roots = await unindexedRoots(sql);
  if (!hasOld && roots.length === 0) return result;

  // Loaded only for an old data dir: every start runs this, few ever need blockstore-fs.
  const old = hasOld ? await openOld(oldDir) : undefined;
  await old?.open();
  try {
    for (const root of roots) {
      const blocks: BlockSizes = new Map();
      // One lease per root: its pins hold the copied blocks until the root's rows commit.
      const lease = guard.lease();
      try {
        const walked = await walk({ guard, lease, old }, parseCid(root), blocks);
        result.copied += walked.copied;
        result.missingLeaves += walked.missing;
        if (walked.missing > 0) log.error("ipfs migration: pinned content lacks leaves", { cid: root, missing: walked.missing });
        await indexRoot(sql, root, blocks);
        result.indexed++;
      } catch (err) {
        result.broken++;
        log.error("ipfs migration: cannot walk a pinned root; the old blocks folder stays", { cid: root, err: String(err) });
      } finally {
        await lease.release();
      }
    }
  } finally {
    await old?.close();
  }
  if (hasOld && result.broken === 0) {
    await rm(oldDir, { recursive: true, force: true });
    result.removedOld = true;
  }
  log.info("ipfs blocks moved to the blob store", { ...result, store: guard.store.kind });
  return result;
}

/** Blocks copied at once: each is a round trip to the store. */
const CONCURRENCY = 8;

/** Copies (or finds) every block under `root`, recording them in `blocks`; a few at a time. */
async function walk(ctx: { guard: BlobGuard; lease: Lease; old?: FsBlockstore }, root: CID, blocks: BlockSizes): Promise<{ copied: number; missing: number }> {
  const counts = { copied: 0, missing: 0 };
  let level: CID[] = [root];
  while (level.length > 0) {
    const fresh = new Map<string, CID>();
    for (const cid of level) {
      const key = blockKey(cid);
      if (!blocks.has(key)) fresh.set(key, cid);
    }
    const todo = [...fresh];
    const next: CID[] = [];
    const worker = async () => {
      for (let item = todo.pop(); item !== undefined; item = todo.pop()) next.push(...(await copyBlock(ctx, item[0], item[1], blocks, counts)));
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    level = next;
  }
  return counts;
}

/** Makes one block present in the store and records it; answers its links. */
async function copyBlock(ctx: { guard: BlobGuard; lease: Lease; old?: FsBlockstore }, key: string, cid: CID, blocks: BlockSizes, counts: { copied: number; missing: number }): Promise<CID[]> {
  const { guard, lease, old } = ctx;
  await lease.pin([key]); // before looking (D15)
  let bytes = old ? await readOld(old, cid) : undefined;
  if (bytes) {
    if (await guard.ensure(key, () => bytes!, bytes.byteLength)) counts.copied++;
  } else if (cid.code === raw.code) {
    // A leaf is only needed for its size here: no read of 1 MiB.
    const size = await guard.present(key);
    if (size === undefined) counts.missing++;
    else blocks.set(key, size);
    return [];
  } else {
    bytes = await readBlock(guard.store, cid); // throws when missing or damaged: a broken root
  }
  blocks.set(key, bytes.byteLength);
  return cid.code === raw.code ? [] : linksOf(cid, bytes);
}

/** The block from the old folder, or undefined when it is missing or does not match its Cid. */
async function readOld(old: FsBlockstore, cid: CID): Promise<Uint8Array | undefined> {
  const parts: Uint8Array[] = [];
  try {
    for await (const part of old.get(cid)) parts.push(part);
  } catch (err) {
    if ((err as Error).name === "NotFoundError") return undefined;
    throw err;
  }
  const bytes = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  try {
    verifyBlock(cid, bytes);
  } catch {
    return undefined;
  }
  return bytes;
}

async function openOld(dir: string): Promise<FsBlockstore> {
  const [{ FsBlockstore }, { NextToLast }] = await Promise.all([import("blockstore-fs"), import("blockstore-fs/sharding")]);
  return new FsBlockstore(dir, { shardingStrategy: new NextToLast() });
}

/** The links of a UnixFS dag-pb node (a file's or a directory's; anything else is a broken root).
 * Decoded here rather than through ipfs-unixfs-exporter, which the server would load only for this. */
function linksOf(cid: CID, bytes: Uint8Array): CID[] {
  if (cid.code !== dagPb.code) throw new Error(`unexpected codec 0x${cid.code.toString(16)} of ${cid}`);
  const node = dagPb.decode(bytes);
  const { type } = UnixFS.unmarshal(node.Data ?? new Uint8Array(0));
  if (type !== "file" && type !== "raw" && type !== "directory" && type !== "hamt-sharded-directory") throw new Error(`unexpected UnixFS ${type} node ${cid}`);
  return node.Links.map((l) => l.Hash);
}
