/**
 * The blocks of a trustless CAR (D17), in depth-first order (`order=dfs`): the requested block
 * first, then, by `dag-scope`, nothing more (`block`), the blocks of the UnixFS file it starts
 * (`entity`, only those covering `entity-bytes` when given), or every block it links (`all`).
 * `dups=n` sends a block once however often the DAG links it; identity Cids are never sent.
 *
 * A generator: each block is read (and checked against its Cid) when the walk reaches it, with
 * a few siblings fetched ahead, so a CAR of any size holds about AHEAD blocks per DAG level.
 * Only raw and dag-pb (UnixFS) are decoded: the ipfs back-end imports nothing else.
 */
import * as dagPb from "@ipld/dag-pb";
import { UnixFS } from "ipfs-unixfs";
import type { CID } from "multiformats/cid";
import type { DagScope, EntityBytes } from "./model.ts";
import { IpfsError } from "../storage/ipfs/errors.ts";

/** Siblings fetched ahead of the one being sent. */
const AHEAD = 4;
const IDENTITY = 0x00;

export interface Block {
  cid: CID;
  bytes: Uint8Array;
}

/** Reads a block, checked against its Cid. */
export type ReadBlock = (cid: CID, signal: AbortSignal) => Promise<Uint8Array>;

export interface WalkOptions {
  scope: DagScope;
  dups: "y" | "n";
  entityBytes?: EntityBytes;
  signal: AbortSignal;
}

/** Inclusive byte range of a UnixFS file, or undefined for none of it. */
export function resolveEntityBytes(range: EntityBytes, size: number): { start: number; end: number } | undefined {
  const start = range.from < 0 ? Math.max(0, size + range.from) : range.from;
  const rawEnd = range.to === "*" ? size - 1 : range.to < 0 ? size + range.to : range.to;
  const end = Math.min(rawEnd, size - 1);
  return start > end ? undefined : { start, end };
}

/** A byte span within the file: where a node's bytes lie, for the `entity-bytes` walk. */
interface Span {
  offset: number;
  start: number;
  end: number;
}

function decodeNode(cid: CID, bytes: Uint8Array): dagPb.PBNode {
  try {
    return dagPb.decode(bytes);
  } catch (err) {
    throw new IpfsError("IPFS_BLOCK_CORRUPT", `block ${cid} is no dag-pb node`, { cause: err });
  }
}

function unixfsOf(node: dagPb.PBNode): UnixFS | undefined {
  try {
    return UnixFS.unmarshal(node.Data ?? new Uint8Array(0));
  } catch {
    return undefined;
  }
}

const isFile = (u: UnixFS | undefined): u is UnixFS => u !== undefined && (u.type === "file" || u.type === "raw");

export async function* walkCar(read: ReadBlock, root: Block, opts: WalkOptions): AsyncGenerator<Block> {
  const seen = new Set<string>();
  const fresh = (cid: CID) => {
    if (cid.multihash.code === IDENTITY) return false;
    if (opts.dups === "y") return true;
    const key = cid.toString();
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  };

  /** The blocks under `parent` (itself already sent), in DFS order; `span` limits them to a range. */
  async function* below(parent: dagPb.PBNode, span: Span | undefined): AsyncGenerator<Block> {
    const kids = children(parent, span);
    // A block already sent by a whole-DAG walk came with all its blocks: neither read nor walked
    // again. A range walk still descends (the same node at another offset needs other leaves).
    const needed = (kid: Child) => opts.dups === "y" || kid.span !== undefined || !seen.has(kid.cid.toString());
    const pending: (Promise<Uint8Array> | undefined)[] = [];
    for (let i = 0; i < kids.length; i++) {
      while (pending.length < kids.length && pending.length < i + AHEAD) {
        const kid = kids[pending.length] as Child;
        const p = needed(kid) ? read(kid.cid, opts.signal) : undefined;
        p?.catch(() => {}); // awaited in turn below; a walk stopped early never awaits it
        pending.push(p);
      }
      const kid = kids[i] as Child;
      const p = pending[i];
      pending[i] = undefined;
      if (!p || !needed(kid)) continue;
      const bytes = await p;
      if (fresh(kid.cid)) yield { cid: kid.cid, bytes };
      if (kid.cid.code === dagPb.code) yield* below(decodeNode(kid.cid, bytes), kid.span);
    }
  }

  if (fresh(root.cid)) yield root;
  if (opts.scope === "block" || root.cid.code !== dagPb.code) return;

  const node = decodeNode(root.cid, root.bytes);
  if (opts.scope === "all") {
    yield* below(node, undefined);
    return;
  }
  // entity: a UnixFS file's blocks (those covering entity-bytes when given); anything else is
  // one block (a directory's entity would be its shards, which this store never holds).
  const file = unixfsOf(node);
  if (!isFile(file)) return;
  if (!opts.entityBytes) {
    yield* below(node, undefined);
    return;
  }
  const range = resolveEntityBytes(opts.entityBytes, Number(file.fileSize()));
  if (range) yield* below(node, { offset: 0, ...range });
}

interface Child {
  cid: CID;
  span: Span | undefined;
}

/** A node's links to walk: all of them, or (with a span) those whose bytes overlap it, by the
 * UnixFS blockSizes of the node. */
function children(node: dagPb.PBNode, span: Span | undefined): Child[] {
  const links = node.Links.map((l) => l.Hash);
  if (!span) return links.filter((c) => c.multihash.code !== IDENTITY).map((cid) => ({ cid, span: undefined }));
  const file = unixfsOf(node);
  if (!isFile(file) || file.blockSizes.length !== links.length) throw new IpfsError("IPFS_BLOCK_CORRUPT", "a file node's links and block sizes disagree");
  const out: Child[] = [];
  let offset = span.offset + (file.data?.byteLength ?? 0);
  for (let i = 0; i < links.length && offset <= span.end; i++) {
    const size = Number(file.blockSizes[i]);
    const cid = links[i] as CID;
    if (offset + size > span.start && size > 0 && cid.multihash.code !== IDENTITY) out.push({ cid, span: { offset, start: span.start, end: span.end } });
    offset += size;
  }
  return out;
}
