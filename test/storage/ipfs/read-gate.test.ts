/** Downloads keep memory bounded: the exporter may not read far ahead of a slow consumer. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { AbortOptions } from "@libp2p/interface";
import type { CID } from "multiformats/cid";
import { join } from "node:path";
import { DurableFsBlockstore } from "../../../src/storage/ipfs/durable-blockstore.ts";
import { readContent } from "../../../src/storage/ipfs/read.ts";
import { MiB, collect, openBackend, randomBytes, sha256, streamOf, within, type Opened } from "./helpers.ts";

/** The same on-disk blocks, counting the leaves read. */
class CountingBlockstore extends DurableFsBlockstore {
  leaves = 0;
  override async *get(cid: CID, options?: AbortOptions): AsyncGenerator<Uint8Array> {
    if (cid.code === 0x55) this.leaves++;
    yield* super.get(cid, options);
  }
}

let o: Opened;
const bytes = randomBytes(40 * MiB);
let cid = "";
beforeAll(async () => {
  o = await openBackend();
  const p = await o.ipfs.put(streamOf(bytes, MiB / 2));
  await p.commit();
  cid = p.cid;
});
afterAll(() => o.close());

function counted() {
  const blocks = new CountingBlockstore(join(o.dataDir, "ipfs", "blocks"));
  return { blocks, pinnedSize: () => bytes.byteLength };
}

/** Waits until `value()` stops changing for 100 ms (at most 3 s): time for a runaway reader to run. */
async function settle(value: () => number): Promise<number> {
  const end = Date.now() + 3_000;
  let last = -1;
  while (value() !== last && Date.now() < end) {
    last = value();
    await Bun.sleep(100);
  }
  return value();
}

describe("read-ahead is bounded", () => {
  test("a consumer that stops after one chunk leaves the rest of a 40-leaf file unread", async () => {
    const deps = counted();
    const reader = readContent(deps, cid).getReader();
    expect((await reader.read()).done).toBe(false);
    // 8 MiB of read-ahead (reads in flight included) and the chunk handed over, far below 40 leaves.
    expect(await settle(() => deps.blocks.leaves)).toBeLessThanOrEqual(10);
    await reader.cancel();
  });

  test("the bounded reader still delivers everything, and ranges with partial edge leaves", async () => {
    const deps = counted();
    expect(sha256(await within(20_000, collect(readContent(deps, cid))))).toBe(sha256(bytes));
    expect(deps.blocks.leaves).toBe(40);
    const range = { start: MiB / 2 + 3, end: 30 * MiB + 7 };
    const got = await within(20_000, collect(readContent(counted(), cid, range)));
    expect(Buffer.from(got).equals(bytes.subarray(range.start, range.end + 1))).toBe(true);
  });
});
