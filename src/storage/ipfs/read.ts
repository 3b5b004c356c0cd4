/**
 * Streams pinned content, or an inclusive byte range of it, from the blob store only (D9: downloads
 * never fetch from the network). Missing or damaged blocks error the stream.
 *
 * The file's DAG is walked here rather than through @helia/unixfs `cat`: every dag-pb node says
 * how many bytes each child holds (UnixFS blockSizes), so the leaves overlapping the range are
 * known as the walk meets them, and are fetched LEAVES_AHEAD at a time in file order, each checked
 * against its Cid (readBlock) and the size its parent gives before any of its bytes go out. The
 * exporter cost a copy of every block (it collects each block's stream with it-to-buffer) and
 * its queues ≈ 0.9 ms of CPU per MiB on Ceph RGW, a quarter of a download's; and it read leaves
 * into an unbounded queue, which needed a gate. Here memory is the LEAVES_AHEAD leaves in flight
 * (1 MiB each with D9's chunker), however slowly the consumer reads.
 *
 * On the local store, leaves are read into buffers lent from a pool of the download's own
 * (http/lent.ts): the listener gives each back once written, and the next leaves are read into
 * them — a fresh 1 MiB buffer per leaf, collected late, was most of a big download's peak RSS
 *. A consumer that keeps what it reads never gives back and gets fresh ones. On S3 a
 * leaf is a fresh object read whole: lent to be freed (`lendToFree`) once the listener sent it.
 *
 * A short range (up to one chunk: what the service reads whole before answering) is one part:
 * the leaves it overlaps are read side by side into one buffer, each checked, and the range is a
 * view of it. As one part per leaf, a 1 MiB range across two leaves was copied into a fresh
 * buffer by the service (≈ 12 % of an ipfs ranged GET's samples).
 *
 * The inner (dag-pb) nodes a read meets (those with links) are kept, decoded, in a `NodeCache`
 * (bounded by their estimated memory): a ranged GET read, hashed and decoded the root on every call. A Cid names its bytes,
 * so a kept node is what the store would give (checked when it was read); whether the content is
 * still pinned is asked on every read, before the walk, and every leaf is read and checked.
 */
import * as dagPb from "@ipld/dag-pb";
import { UnixFS } from "ipfs-unixfs";
import type { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { LocalBlobStore, type BlobStore } from "../../blob/index.ts";
import { BufferPool, lendToFree } from "../../http/lent.ts";
import { CHUNK_SIZE } from "../cid-options.ts";
import type { ByteRange } from "../backend.ts";
import { readBlock, readBlockInto } from "./blocks.ts";
import { cidKey, parseCid } from "./cids.ts";
import { IpfsError } from "./errors.ts";
import { readShortRange } from "../short-range.ts";

/** Leaves fetched (or being fetched) ahead of the consumer at most. */
const LEAVES_AHEAD = 8;
/** Leaf buffers a download keeps for reuse: the leaves ahead, and the ones the listener's socket
 * may still be sending. */
const POOL_KEEP = LEAVES_AHEAD + 4;

export interface ReadDeps {
  store: BlobStore;
  /** Inner nodes already read (the back-end's own); none: every node is read from the store. */
  nodes?: NodeCache;
  /** Size of pinned content, or undefined when not pinned (unpinned leftovers count as absent). */
  pinnedSize(cid: string): Promise<number | undefined>;
}

/** A piece of the file, in file order: a leaf to fetch, or bytes a dag-pb node carries itself. */
type Piece = { cid: CID; offset: number; size: number } | { bytes: Uint8Array; offset: number };

interface Walk {
  pieces: AsyncGenerator<Piece>;
  /** Inclusive byte range of the content. */
  start: number;
  end: number;
}

export function readContent(deps: ReadDeps, cidText: string, range?: ByteRange): ReadableStream<Uint8Array> {
  const abort = new AbortController();
  let walk: Walk | undefined;
  let walked = false;
  /** Leaf fetches started, in file order. */
  const ahead: Promise<Uint8Array>[] = [];
  const local = deps.store instanceof LocalBlobStore ? deps.store : undefined;
  const pool = local && new BufferPool(CHUNK_SIZE, POOL_KEEP);

  const open = async (): Promise<Walk> => {
    const cid = parseCid(cidText);
    const size = await deps.pinnedSize(cidKey(cid));
    if (size === undefined) throw new IpfsError("IPFS_NOT_FOUND", `no pinned content ${cidKey(cid)}`);
    if (range && !validRange(range, size)) throw new IpfsError("IPFS_BAD_RANGE", `range ${range.start}-${range.end} outside 0-${size - 1}`);
    const [start, end] = range ? [range.start, range.end] : [0, size - 1];
    return { pieces: piecesOf(deps, cid, { offset: 0, size }, start, end, abort.signal), start, end };
  };

  /** A piece's bytes inside the range, its leaf fetched and checked first. */
  const load = async (piece: Piece, { start, end }: Walk): Promise<Uint8Array> => {
    let bytes: Uint8Array;
    const inRange = (b: Uint8Array) => b.subarray(Math.max(start - piece.offset, 0), Math.max(Math.min(end - piece.offset + 1, b.byteLength), 0));
    if ("bytes" in piece) bytes = piece.bytes;
    else if (local && pool && piece.size > 0 && piece.size <= pool.size) {
      // A leaf of D9's size at most (a larger one, from another importer, gets a buffer of its own).
      const whole = pool.take();
      bytes = await readBlockInto(local, piece.cid, whole.subarray(0, piece.size), { signal: abort.signal });
      return pool.lend(inRange(bytes), whole);
    } else {
      bytes = await readBlock(deps.store, piece.cid, { signal: abort.signal });
      if (bytes.byteLength !== piece.size) throw new IpfsError("IPFS_BLOCK_CORRUPT", `block ${piece.cid} holds ${bytes.byteLength} bytes, expected ${piece.size}`);
      // A block read whole (S3) is the read's own: freed once the listener has sent it.
      return lendToFree(inRange(bytes), bytes);
    }
    return inRange(bytes);
  };

  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          if (!walk) {
            walk = await open();
            if (local && walk.end - walk.start < CHUNK_SIZE) {
              const pieces: Piece[] = [];
              for await (const piece of walk.pieces) pieces.push(piece);
              if (pieces.every((p) => !("cid" in p) || p.size <= CHUNK_SIZE)) {
                walked = true;
                const part = await readShort(local, pieces, walk, abort.signal);
                return part.byteLength > 0 ? controller.enqueue(part) : controller.close();
              }
              walk.pieces = replay(pieces);
            }
          }
          for (;;) {
            while (ahead.length < LEAVES_AHEAD && !walked) {
              const next = await walk.pieces.next(); // reads the inner nodes as it meets them
              if (next.done) walked = true;
              else {
                const part = load(next.value, walk);
                part.catch(() => {}); // awaited in turn below; a cancelled download never awaits it
                ahead.push(part);
              }
            }
            const next = ahead.shift();
            if (next === undefined) return controller.close();
            const part = await next;
            if (part.byteLength > 0) return controller.enqueue(part);
          }
        } catch (err) {
          abort.abort(err);
          controller.error(err);
        }
      },
      async cancel(reason) {
        abort.abort(reason);
        await walk?.pieces.return(undefined);
      },
    },
    { highWaterMark: 0 },
  );
}

/**
 * The range [start, end] from `pieces` (contiguous, in file order, leaves of D9's size at most):
 * one buffer holds them all (short-range.ts), each leaf read into its place and checked against
 * its Cid and size before any byte is returned.
 */
async function readShort(store: LocalBlobStore, pieces: Piece[], { start, end }: Walk, signal: AbortSignal): Promise<Uint8Array> {
  const first = pieces[0];
  if (!first) return new Uint8Array(0);
  const base = first.offset;
  const last = pieces[pieces.length - 1] as Piece;
  const length = last.offset + ("cid" in last ? last.size : last.bytes.byteLength) - base;
  return readShortRange(
    length,
    (all) =>
      Promise.all(
        pieces.map(async (piece) => {
          if ("bytes" in piece) all.set(piece.bytes, piece.offset - base);
          else await readBlockInto(store, piece.cid, all.subarray(piece.offset - base, piece.offset - base + piece.size), { signal });
        }),
      ),
    (all) => all.subarray(start - base, end - base + 1),
  );
}

async function* replay(pieces: Piece[]): AsyncGenerator<Piece> {
  yield* pieces;
}

/** A dag-pb UnixFS file node, decoded: its own bytes, then its children and their sizes. */
interface FileNode {
  own: Uint8Array;
  links: CID[];
  sizes: number[];
  /** Memory it holds, estimated: its block (own bytes and Cids are views of it) and ≈ 256 bytes of objects per link. */
  weight: number;
}

/** Decoded inner nodes by Cid, the least recently used dropped once they weigh over `maxBytes`. */
export class NodeCache {
  private readonly nodes = new Map<string, FileNode>();
  private held = 0;

  /** 4 MiB: ≈ 13 roots of a 1 GiB file (1,024 links), ≈ 700 of a 16 MiB one. */
  constructor(readonly maxBytes = 4 * 1024 * 1024) {}

  /** Estimated bytes held now (≤ maxBytes, but for one node heavier than that alone). */
  get bytes(): number {
    return this.held;
  }

  get(key: string): FileNode | undefined {
    const node = this.nodes.get(key);
    if (node) {
      this.nodes.delete(key);
      this.nodes.set(key, node);
    }
    return node;
  }

  set(key: string, node: FileNode): void {
    if (this.nodes.has(key)) return;
    this.nodes.set(key, node);
    this.held += node.weight;
    for (const [old, { weight }] of this.nodes) {
      if (this.held <= this.maxBytes || old === key) break;
      this.nodes.delete(old);
      this.held -= weight;
    }
  }
}

/** The dag-pb node `cid`, from the cache or read (and checked) from the store. */
async function fileNode({ store, nodes }: ReadDeps, cid: CID, signal: AbortSignal): Promise<FileNode> {
  const key = cid.toString();
  const kept = nodes?.get(key);
  if (kept) return kept;
  let block: Uint8Array;
  let node: dagPb.PBNode;
  let file: UnixFS;
  try {
    block = await readBlock(store, cid, { signal });
    node = dagPb.decode(block);
    file = UnixFS.unmarshal(node.Data ?? new Uint8Array(0));
  } catch (err) {
    if (err instanceof IpfsError) throw err;
    throw new IpfsError("IPFS_BLOCK_CORRUPT", `block ${cid} is no UnixFS node`, { cause: err });
  }
  if (file.type !== "file" && file.type !== "raw") throw new IpfsError("IPFS_NOT_FOUND", `${cid} is a UnixFS ${file.type}, not a file`);
  if (node.Links.length !== file.blockSizes.length) throw new IpfsError("IPFS_BLOCK_CORRUPT", `block ${cid} has ${node.Links.length} links and ${file.blockSizes.length} sizes`);
  const decoded = { own: file.data ?? new Uint8Array(0), links: node.Links.map((link) => link.Hash), sizes: file.blockSizes.map(Number), weight: block.byteLength + 256 * node.Links.length };
  // A node without links is a leaf that carries its bytes (another importer's): data, not kept.
  if (decoded.links.length > 0) nodes?.set(key, decoded);
  return decoded;
}

/**
 * Whether pinned content `cidText` is a file (a raw block, or a dag-pb UnixFS file): a CAR import
 * may pin a folder, which downloads cannot read as one stream. Reads the root node (kept in
 * `nodes` as a download's walk keeps it).
 */
export async function isFileRoot(deps: Pick<ReadDeps, "store" | "nodes">, cidText: string): Promise<boolean> {
  const cid = parseCid(cidText);
  if (cid.code === raw.code) return true;
  try {
    await fileNode({ ...deps, pinnedSize: async () => undefined }, cid, new AbortController().signal);
    return true;
  } catch (err) {
    if (err instanceof IpfsError && err.code === "IPFS_NOT_FOUND") return false;
    // A root that cannot be read now (missing, damaged) is the read's to report, as before.
    return true;
  }
}

/**
 * The pieces of the node `cid` (which holds `at.size` bytes from file offset `at.offset`) that
 * overlap [start, end], in file order. A raw block is a leaf; a dag-pb node is a UnixFS file (or
 * raw) node: its own data first, then its children, whose sizes it lists.
 */
async function* piecesOf(deps: ReadDeps, cid: CID, at: { offset: number; size: number }, start: number, end: number, signal: AbortSignal): AsyncGenerator<Piece> {
  if (cid.code === raw.code) {
    yield { cid, ...at };
    return;
  }
  if (cid.code !== dagPb.code) throw new IpfsError("IPFS_BLOCK_CORRUPT", `block ${cid} is neither raw nor dag-pb`);
  const { own, links, sizes } = await fileNode(deps, cid, signal);
  let offset = at.offset;
  if (own.byteLength > 0 && offset + own.byteLength > start && offset <= end) yield { bytes: own, offset };
  offset += own.byteLength;
  for (let i = 0; i < links.length && offset <= end; i++) {
    const size = sizes[i] as number;
    if (offset + size > start) yield* piecesOf(deps, links[i] as CID, { offset, size }, start, end, signal);
    offset += size;
  }
}

function validRange({ start, end }: ByteRange, size: number): boolean {
  return Number.isSafeInteger(start) && Number.isSafeInteger(end) && start >= 0 && start <= end && end < size;
}
