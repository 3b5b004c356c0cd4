/** Downloads keep memory bounded: the reader may not fetch far ahead of a slow consumer. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { CID } from "multiformats/cid";
import type { BlobStore } from "../../../src/blob/index.ts";
import { blockKey } from "../../../src/storage/ipfs/blocks.ts";
import { readContent } from "../../../src/storage/ipfs/read.ts";
import { MiB, collect, openBackend, randomBytes, sha256, streamOf, within, type Opened } from "./helpers.ts";

let o: Opened;
const bytes = randomBytes(40 * MiB);
let cid = "";
beforeAll(async () => {
  o = await openBackend();
  const p = await o.ipfs.put(streamOf(bytes, MiB / 2));
  await p.commit();
  cid = p.cid;
}, 60_000); // the database may start here (PostgreSQL pass), and 40 MiB go to S3 on that pass
afterAll(() => o.close());

/** The same stored blocks, counting the leaves read (every block but the root is a leaf here). */
function counted() {
  const inner = o.store;
  const root = blockKey(CID.parse(cid));
  const blocks = { leaves: 0 };
  const store: BlobStore = {
    kind: inner.kind,
    put: (key, source) => inner.put(key, source),
    get: (key, range) => {
      if (key !== root) blocks.leaves++;
      return inner.get(key, range);
    },
    bytes: (key) => {
      if (key !== root) blocks.leaves++;
      return inner.bytes(key);
    },
    stat: (key) => inner.stat(key),
    delete: (key) => inner.delete(key),
    list: (prefix, options) => inner.list(prefix, options),
  };
  return { store, blocks, pinnedSize: async () => bytes.byteLength };
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
