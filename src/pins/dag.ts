/**
 * Walks a pin's DAG from its root, block by block: each block is fetched (the blob store, else
 * bitswap), checked against its Cid, counted (`onBytes`: the quota's holds, which refuse once the
 * account's pools are full) and kept, then its links are followed. A block met twice is fetched
 * once. The walk is bounded: at most `maxBlocks` blocks, each at most MAX_BLOCK bytes (what
 * bitswap carries), and FETCHES_AHEAD fetches in flight; the first failure stops it and fails it.
 *
 * Codecs: dag-pb (UnixFS files and directories, what `ipfs add` makes) and raw leaves. Other
 * codecs are refused, naming the codec: this gateway serves files, and reads UnixFS only.
 *
 * The content's size is what a download of it holds: a UnixFS file's (or raw block's) bytes; for
 * a directory, every block's.
 */
import * as dagPb from "@ipld/dag-pb";
import { UnixFS } from "ipfs-unixfs";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { failure } from "../failure.ts";

/** Blocks larger than bitswap carries are no block a peer sends. */
export const MAX_BLOCK = 4 * 1024 * 1024;
const FETCHES_AHEAD = 8;
const IDENTITY = 0x00;

export interface DagSteps {
  fetch(cid: CID, signal: AbortSignal): Promise<Uint8Array>;
  /** Holds the bytes (throws when they do not fit). */
  onBytes(n: number): Promise<void>;
  keep(cid: CID, bytes: Uint8Array): Promise<void>;
}

/** The Cids a block links to (dag-pb, raw); refuses other codecs. */
function linksOf(cid: CID, bytes: Uint8Array): CID[] {
  if (cid.code === raw.code) return [];
  if (cid.code === dagPb.code) {
    try {
      return dagPb.decode(bytes).Links.map((l) => l.Hash);
    } catch (err) {
      throw failure("bad-input", `block ${cid} is not valid dag-pb: ${(err as Error).message}`);
    }
  }
  throw failure("unsupported", `block ${cid} has codec 0x${cid.code.toString(16)}: only UnixFS (dag-pb and raw) is pinned here`);
}

/** The size a download of the content holds (see the header). */
function contentSize(root: CID, rootBytes: Uint8Array, total: number): number {
  if (root.code === raw.code) return rootBytes.byteLength;
  const data = dagPb.decode(rootBytes).Data;
  if (!data) return total;
  try {
    const fs = UnixFS.unmarshal(data);
    return fs.type === "file" || fs.type === "raw" ? Number(fs.fileSize()) : total;
  } catch {
    return total;
  }
}

/** Walks the DAG under `root`; resolves with the content's size once every block is kept. */
export async function walkDag(root: CID, steps: DagSteps, limits: { maxBlocks: number }, outer: AbortSignal): Promise<number> {
  const stop = new AbortController();
  const signal = AbortSignal.any([outer, stop.signal]);
  const seen = new Set<string>();
  const waiting: CID[] = [];
  let blocks = 0;
  let total = 0;
  let rootBytes: Uint8Array | undefined;

  const want = (cid: CID) => {
    const key = String(cid.multihash.bytes.join(","));
    if (seen.has(key)) return;
    seen.add(key);
    if (seen.size > limits.maxBlocks) throw failure("too-large", `the DAG has more than ${limits.maxBlocks} blocks`);
    waiting.push(cid);
  };

  async function visit(cid: CID): Promise<void> {
    let bytes: Uint8Array;
    if (cid.multihash.code === IDENTITY) bytes = cid.multihash.digest;
    else {
      bytes = await steps.fetch(cid, signal);
      if (bytes.byteLength > MAX_BLOCK) throw failure("too-large", `block ${cid} is larger than ${MAX_BLOCK} bytes`);
      await steps.onBytes(bytes.byteLength);
      await steps.keep(cid, bytes);
      blocks += 1;
      total += bytes.byteLength;
    }
    if (cid.equals(root)) rootBytes = bytes;
    for (const link of linksOf(cid, bytes)) want(link);
  }

  want(root);
  // On a failure the other fetches are stopped, and the walk fails once none is left running: no
  // block is kept after the caller has started to drop what was.
  await new Promise<void>((done, fail) => {
    let active = 0;
    let first: { err: unknown } | undefined;
    const settle = (err?: { err: unknown }) => {
      active -= 1;
      if (err && !first) {
        first = err;
        stop.abort(err.err);
      }
      pump();
    };
    const pump = () => {
      if (first) {
        if (active === 0) fail(first.err);
        return;
      }
      if (waiting.length === 0 && active === 0) return done();
      while (active < FETCHES_AHEAD && waiting.length > 0) {
        const cid = waiting.shift() as CID;
        active += 1;
        visit(cid).then(() => settle(), (err: unknown) => settle({ err }));
      }
    };
    pump();
  });
  if (blocks === 0 || !rootBytes) throw failure("bad-input", `the root ${root} is an identity Cid: nothing to pin`);
  return contentSize(root, rootBytes, total);
}

export { CID };
