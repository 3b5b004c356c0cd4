/**
 * UnixFS paths for the path gateway: `/ipfs/<root>/a/b` walked from the root through its
 * directories to what the path names, every block read through `read` (which checks it against
 * its Cid). What the ipfs back-end stores: raw leaves and dag-pb UnixFS files, directories and
 * HAMT-sharded directories (from imports of whole trees).
 *
 * A plain directory is one block whose links are its entries by name: looked up here. A sharded
 * directory spreads its entries over a tree of blocks by a hash of their names; its lookups go
 * through ipfs-unixfs-exporter (loaded the first time one is met: most gateways never do), and its
 * listing walks the shards (an entry's link name is the bucket's hex prefix, then its name).
 *
 * @example
 *   const target = await resolvePath(read, root, ["docs", "a.pdf"])
 *   if (target.kind === "file") …
 */
import * as dagPb from "@ipld/dag-pb";
import { UnixFS } from "ipfs-unixfs";
import type { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";

const IDENTITY = 0x00;

/** Reads a block, checked against its Cid. */
export type ReadBlock = (cid: CID) => Promise<Uint8Array>;

export interface Blocks {
  read: ReadBlock;
  /** A stored block's size without reading it, if known (a raw leaf's file size). */
  size(cid: CID): Promise<number | undefined>;
}

/** What a path names. */
export type Target =
  | { kind: "file"; cid: CID; size: number }
  | { kind: "directory"; cid: CID; node: dagPb.PBNode; sharded: boolean }
  /** An identity Cid: its bytes are in the Cid itself. */
  | { kind: "inline"; cid: CID; bytes: Uint8Array };

/** A path names nothing here (no such entry, or a file where a directory was needed). */
export class PathNotFound extends Error {
  override name = "PathNotFound";
}

/** What the gateway does not serve: another codec, a symlink. */
export class PathUnsupported extends Error {
  override name = "PathUnsupported";
}

/** One entry of a directory listing: its name, Cid and the size its link declares (a DAG's size, near the file's). */
export interface DirEntry {
  name: string;
  cid: CID;
  size: number;
}

function unixfsOf(cid: CID, node: dagPb.PBNode): UnixFS {
  try {
    return UnixFS.unmarshal(node.Data ?? new Uint8Array(0));
  } catch {
    throw new PathUnsupported(`${cid} is a dag-pb node without UnixFS data`);
  }
}

/** The target a block is, by its codec and UnixFS type. */
async function targetOf(blocks: Blocks, cid: CID): Promise<Target> {
  if (cid.multihash.code === IDENTITY) return { kind: "inline", cid, bytes: cid.multihash.digest };
  if (cid.code === raw.code) return { kind: "file", cid, size: (await blocks.size(cid)) ?? (await blocks.read(cid)).byteLength };
  if (cid.code !== dagPb.code) throw new PathUnsupported(`${cid} is not UnixFS (codec 0x${cid.code.toString(16)}): ask for it as a block or a CAR (?format=raw|car)`);
  const bytes = await blocks.read(cid);
  let node: dagPb.PBNode;
  try {
    node = dagPb.decode(bytes);
  } catch {
    throw new PathUnsupported(`${cid} is not a dag-pb node`);
  }
  const fs = unixfsOf(cid, node);
  if (fs.type === "file" || fs.type === "raw") return { kind: "file", cid, size: Number(fs.fileSize()) };
  if (fs.type === "directory" || fs.type === "hamt-sharded-directory") return { kind: "directory", cid, node, sharded: fs.type === "hamt-sharded-directory" };
  throw new PathUnsupported(`${cid} is a UnixFS ${fs.type}, which is not served`);
}

/** The Cid of `name` in a sharded directory, through the exporter's HAMT lookup. */
async function shardedLookup(read: ReadBlock, dir: CID, name: string): Promise<CID | undefined> {
  const { walkPath } = await import("ipfs-unixfs-exporter");
  const blockstore = {
    async *get(cid: CID) {
      yield await read(cid);
    },
  };
  let last: CID | undefined;
  try {
    // Escaped: the exporter splits its path at unescaped slashes.
    for await (const entry of walkPath(`${dir}/${name.replaceAll("\\", "\\\\")}`, blockstore)) last = entry.cid;
  } catch (err) {
    if (err instanceof Error && (err.name === "NotFoundError" || (err as { code?: string }).code === "ERR_NOT_FOUND")) return undefined;
    throw err;
  }
  return last && !last.equals(dir) ? last : undefined;
}

/**
 * What `segments` (decoded path segments, none for the root itself) name below `root`, and every
 * Cid met on the way, the target's last (for the denylist's check of each).
 */
export async function resolvePath(blocks: Blocks, root: CID, segments: readonly string[]): Promise<{ target: Target; visited: CID[] }> {
  const visited: CID[] = [root];
  let target = await targetOf(blocks, root);
  for (const segment of segments) {
    if (target.kind !== "directory") throw new PathNotFound(`${target.cid} is a file: nothing is below it`);
    const next = await entryNamed(blocks, target, segment);
    if (!next) throw new PathNotFound(`no ${JSON.stringify(segment)} in the directory ${target.cid}`);
    visited.push(next);
    target = await targetOf(blocks, next);
  }
  return { target, visited };
}

/** What the Cid `cid` (met in a walk) is. */
export const targetAt = targetOf;

/** The link named `name` in a plain directory, or (sharded) found by lookup; undefined when absent. */
export async function entryNamed(blocks: Blocks, dir: Extract<Target, { kind: "directory" }>, name: string): Promise<CID | undefined> {
  if (dir.sharded) return shardedLookup(blocks.read, dir.cid, name);
  return dir.node.Links.find((l) => l.Name === name)?.Hash;
}

/** Shard blocks a listing reads ahead of the one it walks, per level (over S3 each read is a round trip). */
const SHARDS_AHEAD = 8;
/** Bits of a name's hash that place it in a sharded directory (UnixFS: murmur3's 64). */
const HASH_BITS = 64;

/**
 * Up to `limit` entries of a directory, in its own order, and whether more were left out. A
 * sharded one's shards are read as the listing reaches them, a few ahead on each level, and at
 * most `limit` of them: a real directory's sub-shard holds two entries or more (a bucket of one is
 * an entry), so `limit` entries never need more, while a crafted tree — shards of links to one
 * shard without entries — would otherwise make one request read its blocks without end. Nor is a
 * shard deeper than its name hash's bits reach walked: no real directory has one.
 */
export async function listDirectory(read: ReadBlock, dir: Extract<Target, { kind: "directory" }>, limit: number): Promise<{ entries: DirEntry[]; more: boolean }> {
  const entries: DirEntry[] = [];
  const add = (name: string, link: dagPb.PBLink) => {
    if (entries.length >= limit) return false;
    entries.push({ name, cid: link.Hash, size: Number(link.Tsize ?? 0) });
    return true;
  };
  if (!dir.sharded) {
    for (const link of dir.node.Links) if (!add(link.Name ?? "", link)) return { entries, more: true };
    return { entries, more: false };
  }
  /** Shard reads started, of every level. */
  let reads = 0;
  async function walk(node: dagPb.PBNode, cid: CID, depth: number): Promise<boolean> {
    const fanout = Number(unixfsOf(cid, node).fanout ?? 256n);
    const bits = Math.log2(fanout);
    if (!Number.isInteger(bits) || bits < 1 || depth * bits > HASH_BITS) return false;
    const prefix = (fanout - 1).toString(16).length;
    const links = node.Links;
    const isShard = (i: number) => (links[i]?.Name ?? "").length === prefix;
    const started: (Promise<Uint8Array> | undefined)[] = [];
    let next = 0;
    let ahead = 0;
    /** Starts the reads of the shards from `i` on, while few of this level's are ahead and reads remain. */
    const readFrom = (i: number) => {
      for (next = Math.max(next, i); next < links.length; next++) {
        if (!isShard(next)) continue;
        if (reads >= limit || ahead >= SHARDS_AHEAD) return;
        const block = read((links[next] as dagPb.PBLink).Hash);
        // Left unawaited when the listing stops early: its failure is no one's.
        block.catch(() => {});
        started[next] = block;
        reads++;
        ahead++;
      }
    };
    for (let i = 0; i < links.length; i++) {
      const link = links[i] as dagPb.PBLink;
      if (!isShard(i)) {
        if (!add((link.Name ?? "").slice(prefix), link)) return false;
        continue;
      }
      if (!started[i]) readFrom(i);
      const block = started[i];
      if (!block) return false;
      ahead--;
      const child = dagPb.decode(await block);
      readFrom(i + 1);
      if (!(await walk(child, link.Hash, depth + 1))) return false;
    }
    return true;
  }
  const whole = await walk(dir.node, dir.cid, 0);
  return { entries, more: !whole };
}
