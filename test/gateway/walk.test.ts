/**
 * The CAR walk (src/gateway/walk.ts) over a deep UnixFS DAG, made with the real importer (small
 * chunks and ten links per node, so three levels of dag-pb nodes): blocks come depth first, each
 * once with dups=n; entity-bytes picks exactly the leaves of the range (and the nodes above
 * them), at any depth; and the walk reads as it goes, a few siblings ahead, never the whole DAG
 * first (so a CAR of any size streams in bounded memory).
 */
import { describe, expect, test } from "bun:test";
import { unixfs } from "@helia/unixfs";
import * as dagPb from "@ipld/dag-pb";
import { fixedSize } from "ipfs-unixfs-importer/chunker";
import { balanced } from "ipfs-unixfs-importer/layout";
import type { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { resolveEntityBytes, walkCar, type Block } from "../../src/gateway/walk.ts";

const CHUNK = 100;
const content = new Uint8Array(1234 * CHUNK / 10).map((_, i) => (i * 7) % 251); // 123 chunks and a bit
const blocks = new Map<string, Uint8Array>();
const sink = {
  async put(cid: CID, bytes: Uint8Array) {
    blocks.set(cid.toString(), bytes);
    return cid;
  },
  async *get(cid: CID) {
    const b = blocks.get(cid.toString());
    if (!b) throw new Error(`no block ${cid}`);
    yield b;
  },
  async has(cid: CID) {
    return blocks.has(cid.toString());
  },
};
// biome-ignore lint: the importer wants a whole blockstore type; put/get/has are what it calls.
const root = await unixfs({ blockstore: sink as any }).addBytes(content, { cidVersion: 1, rawLeaves: true, chunker: fixedSize({ chunkSize: CHUNK }), layout: balanced({ maxChildrenPerNode: 10 }) });

/** The walk with a read that counts, collected. */
async function walk(o: { scope?: "all" | "entity" | "block"; dups?: "y" | "n"; from?: number; to?: number | "*" } = {}) {
  let reads = 0;
  const read = async (cid: CID) => {
    reads++;
    return blocks.get(cid.toString()) as Uint8Array;
  };
  const out: Block[] = [];
  const entityBytes = o.from === undefined ? undefined : { from: o.from, to: o.to ?? "*" };
  for await (const b of walkCar(read, { cid: root, bytes: blocks.get(root.toString()) as Uint8Array }, { scope: o.scope ?? (entityBytes ? "entity" : "all"), dups: o.dups ?? "n", entityBytes, signal: new AbortController().signal })) out.push(b);
  return { out, reads };
}

/** The file's bytes of the raw leaves among `out`, in order. */
const leafBytes = (out: Block[]) => Buffer.concat(out.filter((b) => b.cid.code === raw.code).map((b) => b.bytes));

describe("walkCar", () => {
  test("all: every block once, depth first (each node before its children, children in order)", async () => {
    const { out } = await walk();
    expect(out.length).toBe(blocks.size);
    expect(new Set(out.map((b) => b.cid.toString())).size).toBe(out.length);
    expect(out[0]?.cid.toString()).toBe(root.toString());
    // Depth first: reading the DAG back from the root visits the blocks in the CAR's order.
    const order: string[] = [];
    const visit = (cid: CID) => {
      order.push(cid.toString());
      if (cid.code === dagPb.code) for (const l of dagPb.decode(blocks.get(cid.toString()) as Uint8Array).Links) visit(l.Hash);
    };
    visit(root);
    expect(out.map((b) => b.cid.toString())).toEqual(order);
    expect(leafBytes(out)).toEqual(Buffer.from(content));
  });

  test("entity-bytes: exactly the leaves of the range and the nodes above them, at every depth", async () => {
    for (const [from, to] of [
      [0, 0],
      [CHUNK * 37 + 5, CHUNK * 61 + 2],
      [-250, "*"],
      [CHUNK * 100, CHUNK * 100],
      [CHUNK * 99 + 99, CHUNK * 100],
    ] as [number, number | "*"][]) {
      const { out } = await walk({ from, to });
      const range = resolveEntityBytes({ from, to }, content.byteLength) as { start: number; end: number };
      const first = Math.floor(range.start / CHUNK);
      const last = Math.floor(range.end / CHUNK);
      // The leaves hold the range's chunks, whole, and nothing else.
      expect({ from, to, bytes: leafBytes(out) }).toEqual({ from, to, bytes: Buffer.from(content.subarray(first * CHUNK, (last + 1) * CHUNK)) });
      // Each node sent is needed: it lies on the path from the root to a leaf sent.
      const sent = new Set(out.map((b) => b.cid.toString()));
      for (const b of out.filter((x) => x.cid.code === dagPb.code && !x.cid.equals(root))) {
        const kids = dagPb.decode(b.bytes).Links.map((l) => l.Hash.toString());
        expect(kids.some((k) => sent.has(k))).toBe(true);
      }
    }
  });

  test("resolveEntityBytes: negative offsets count from the end; outside the file is nothing", () => {
    expect(resolveEntityBytes({ from: 0, to: "*" }, 10)).toEqual({ start: 0, end: 9 });
    expect(resolveEntityBytes({ from: -3, to: "*" }, 10)).toEqual({ start: 7, end: 9 });
    expect(resolveEntityBytes({ from: -30, to: -2 }, 10)).toEqual({ start: 0, end: 8 });
    expect(resolveEntityBytes({ from: 2, to: 99 }, 10)).toEqual({ start: 2, end: 9 });
    expect(resolveEntityBytes({ from: 10, to: "*" }, 10)).toBeUndefined();
    expect(resolveEntityBytes({ from: 5, to: -8 }, 10)).toBeUndefined();
  });

  test("reads as it sends: a few siblings ahead, never the whole DAG first", async () => {
    let reads = 0;
    const read = async (cid: CID) => {
      reads++;
      return blocks.get(cid.toString()) as Uint8Array;
    };
    const it = walkCar(read, { cid: root, bytes: blocks.get(root.toString()) as Uint8Array }, { scope: "all", dups: "n", signal: new AbortController().signal });
    for (let taken = 1; taken <= 20; taken++) {
      await it.next();
      // Three levels below the root, each with at most AHEAD (4) blocks in flight.
      expect(reads).toBeLessThanOrEqual(taken + 3 * 4);
    }
    await it.return(undefined);
    expect(reads).toBeLessThan(blocks.size / 2);
  });
});
