/**
 * CARs for the import tests, made as a user makes them: the npm `ipfs-car` command (`pack`, which
 * prints the root's Cid), and @ipld/car to take one apart and put it together again with a block
 * left out, a byte flipped or other roots; and a folder's DAG built in memory as the gateway's
 * own importer settings build it.
 */
import { CarBlockIterator, CarIndexer, CarWriter } from "@ipld/car";
import { importer } from "ipfs-unixfs-importer";
import { CID } from "multiformats/cid";
import { join } from "node:path";
import { d9ImporterOptions } from "../../src/storage/cid-options.ts";

const IPFS_CAR = join(import.meta.dir, "..", "..", "node_modules", "ipfs-car", "bin.js");

/** `ipfs-car pack PATH` (under Node, as its users run it): the Cid it printed and the CAR it wrote. */
export async function ipfsCarPack(path: string, opts: { wrap?: boolean } = {}): Promise<{ root: string; car: Uint8Array }> {
  const out = `${path}.${crypto.randomUUID()}.car`;
  const child = Bun.spawn(["node", IPFS_CAR, "pack", path, ...(opts.wrap === false ? ["--no-wrap"] : []), "--output", out], { stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  if (code !== 0) throw new Error(`ipfs-car pack failed (${code}): ${stderr}`);
  const root = stdout.trim().split("\n").at(-1) ?? "";
  return { root, car: await Bun.file(out).bytes() };
}

export interface Block {
  cid: CID;
  bytes: Uint8Array;
}

/** The roots and blocks of a CAR, in its order. */
export async function carParts(car: Uint8Array): Promise<{ roots: CID[]; blocks: Block[] }> {
  const it = await CarBlockIterator.fromBytes(car);
  const blocks: Block[] = [];
  for await (const b of it) blocks.push({ cid: b.cid, bytes: b.bytes });
  return { roots: await it.getRoots(), blocks };
}

/** A CARv1 of `roots` and `blocks`, in that order. */
export async function writeCar(roots: CID[], blocks: readonly Block[]): Promise<Uint8Array> {
  const { writer, out } = CarWriter.create(roots);
  const parts: Uint8Array[] = [];
  const collecting = (async () => {
    for await (const part of out) parts.push(part);
  })();
  for (const b of blocks) await writer.put(b);
  await writer.close();
  await collecting;
  return Buffer.concat(parts);
}

/** The CAR with one byte of block `index`'s data flipped (its Cid kept). */
export async function flipByteOfBlock(car: Uint8Array, index: number): Promise<Uint8Array> {
  const indexer = await CarIndexer.fromBytes(car);
  let i = 0;
  for await (const entry of indexer) {
    if (i++ !== index) continue;
    const out = car.slice();
    const at = entry.blockOffset + Math.floor(entry.blockLength / 2);
    out[at] = (out[at] as number) ^ 0x01;
    return out;
  }
  throw new Error(`the CAR has no block ${index}`);
}

/** The CAR without the block `cid`. */
export async function withoutBlock(car: Uint8Array, cid: CID | string): Promise<Uint8Array> {
  const gone = typeof cid === "string" ? CID.parse(cid) : cid;
  const { roots, blocks } = await carParts(car);
  const kept = blocks.filter((b) => !b.cid.equals(gone));
  if (kept.length === blocks.length) throw new Error(`the CAR has no block ${gone}`);
  return writeCar(roots, kept);
}

/** `files` under one directory, as the gateway imports a tree (HAMT-sharded past `shardAbove`
 * bytes of links): the directory's Cid and every block, in memory. */
export async function importTree(files: { path: string; content: Uint8Array }[], o: { shardAbove?: number } = {}): Promise<{ root: CID; blocks: Block[] }> {
  const blocks = new Map<string, Block>();
  const blockstore = {
    async put(cid: CID, bytes: Uint8Array) {
      blocks.set(cid.toString(), { cid, bytes });
      return cid;
    },
  };
  let root: CID | undefined;
  const options = { ...d9ImporterOptions(), wrapWithDirectory: true, ...(o.shardAbove !== undefined && { shardSplitThresholdBytes: o.shardAbove }) };
  for await (const entry of importer(files, blockstore, options)) root = entry.cid;
  if (!root) throw new Error("nothing imported");
  return { root, blocks: [...blocks.values()] };
}
