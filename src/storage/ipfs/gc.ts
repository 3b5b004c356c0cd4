/**
 * Start-up garbage collection: mark every block reachable from the pinned roots, then delete the
 * other block files (and blockstore-fs temporaries a crash left behind). Callers hold the lock
 * exclusively, so no import is writing unpinned-yet blocks meanwhile.
 *
 * Why not `helia.pins` + `helia.gc()`: Helia 7.1.15 keeps a per-block pin count that goes wrong
 * when a block is shared by two roots (`pins.rm` keeps the wrong `pinnedBy` entries, so re-pinning
 * the removed root does not count again) and when one file repeats a block (its walker visits
 * the block once per link and `rm` decrements each time). Both end with a block of pinned content
 * deleted by `gc()`. Reproduced: pin A, pin B sharing a chunk, unpin A, pin A, unpin B, gc → A
 * unreadable; pin F (one zero chunk + 5 bytes), pin Z (two zero chunks + 1 byte), unpin Z, gc → F
 * unreadable. Mark and sweep from our own roots has no per-block state to get wrong.
 *
 * If any pinned root cannot be walked (a missing or damaged intermediate block), nothing is
 * deleted: an incomplete mark would sweep the leaves it could not see. A missing leaf only gets
 * logged: it has no children to lose.
 */
import { exporter } from "ipfs-unixfs-exporter";
import type { CID } from "multiformats/cid";
import { readdir, unlink } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../../log.ts";
import { parseCid } from "./cids.ts";
import { sharding, type DurableFsBlockstore } from "./durable-blockstore.ts";
import { localStore } from "./local-store.ts";

const RAW = 0x55;

export interface GcResult {
  kept: number;
  removed: number;
  /** Pinned roots whose DAG could not be walked (then `removed` is 0). */
  broken: number;
  /** Leaves of pinned content that are not on disk (such content cannot be read whole). */
  missingLeaves: number;
}

export async function collectGarbage(blocks: DurableFsBlockstore, roots: readonly string[], log: Logger): Promise<GcResult> {
  const marked = new Set<string>();
  let broken = 0;
  let missingLeaves = 0;
  for (const root of roots) {
    try {
      const missing = await mark(blocks, parseCid(root), marked);
      if (missing > 0) log.error("ipfs gc: pinned content lacks leaves", { cid: root, missing });
      missingLeaves += missing;
    } catch (err) {
      broken++;
      log.error("ipfs gc: cannot walk a pinned root", { cid: root, err: String(err) });
    }
  }
  if (broken > 0) {
    log.error("ipfs gc: sweep skipped, pinned content is damaged", { broken });
    return { kept: marked.size - missingLeaves, removed: 0, broken, missingLeaves };
  }
  const removed = await sweep(blocks.path, marked);
  return { kept: marked.size - missingLeaves, removed, broken, missingLeaves };
}

/**
 * Adds the file names of every block under `root` to `marked`; reads only dag-pb nodes. Answers
 * how many of its leaves are missing.
 */
async function mark(blocks: DurableFsBlockstore, root: CID, marked: Set<string>): Promise<number> {
  const store = localStore(blocks);
  const stack: CID[] = [root];
  let missing = 0;
  while (stack.length > 0) {
    const cid = stack.pop()!;
    const name = sharding.encode(cid).file;
    if (marked.has(name)) continue;
    // A raw leaf has no links: its name in the parent is all we need (no read of 1 MiB).
    if (cid.code !== RAW) {
      const entry = await exporter(cid, store, { offline: true });
      if (entry.type !== "file" && entry.type !== "directory") throw new Error(`unexpected ${entry.type} node ${cid}`);
      for (const link of entry.node.Links) stack.push(link.Hash);
    } else if (!(await blocks.has(cid))) {
      missing++;
    }
    marked.add(name);
  }
  return missing;
}

async function sweep(dir: string, marked: ReadonlySet<string>): Promise<number> {
  let removed = 0;
  for (const shard of await readdir(dir, { withFileTypes: true })) {
    if (!shard.isDirectory()) continue;
    const shardDir = join(dir, shard.name);
    for (const name of await readdir(shardDir)) {
      const leftover = name.startsWith(".") && name.endsWith(".tmp");
      if (!leftover && (!name.endsWith(sharding.extension) || marked.has(name))) continue;
      await unlink(join(shardDir, name)).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== "ENOENT") throw err;
      });
      if (!leftover) removed++;
    }
  }
  return removed;
}
