/**
 * The ipfs back-end's CAR import on a real blob store (local files, or Ceph RGW with
 * STOWAGE_TEST_BLOBS=s3) and a real database: CARs made by the `ipfs-car` command keep the Cids it
 * printed and read back byte-exact; a CAR with a flipped byte, a missing block, a codec or hash
 * not imported, or a block past 2 MiB keeps no block and no row.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import * as dagPb from "@ipld/dag-pb";
import { UnixFS } from "ipfs-unixfs";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { identity } from "multiformats/hashes/identity";
import { sha256 as sha2_256, sha512 } from "multiformats/hashes/sha2";
import { join } from "node:path";
import { mkdirSync } from "node:fs";
import { isIpfsError } from "../../../src/storage/ipfs/index.ts";
import { carParts, flipByteOfBlock, ipfsCarPack, withoutBlock, writeCar } from "../../support/car.ts";
import { tempDir } from "../../support/tmp.ts";
import { MiB, blockKeys, collect, openBackend, randomBytes, sha256, streamOf, type Opened } from "./helpers.ts";

setDefaultTimeout(60_000);

const PINS = "SELECT cid, refs, size FROM ipfs_pins ORDER BY cid";

describe("CAR import", () => {
  let o: Opened;
  const dir = tempDir("car-src");
  const big = randomBytes(3 * MiB + 17);
  const small = new TextEncoder().encode("hello from a CAR\n");
  beforeAll(async () => {
    o = await openBackend();
    mkdirSync(join(dir, "site", "img"), { recursive: true });
    await Bun.write(join(dir, "big.bin"), big);
    await Bun.write(join(dir, "site", "index.html"), "<h1>hi</h1>");
    await Bun.write(join(dir, "site", "img", "a.bin"), randomBytes(1500));
    await Bun.write(join(dir, "small.txt"), small);
  });
  afterAll(() => o.close());

  /** Imports and commits; the roots. */
  async function imported(car: Uint8Array) {
    const pending = await o.ipfs.importCar(streamOf(car, 65_537));
    await pending.commit();
    return pending.roots;
  }

  /** Imports and expects a refusal (IPFS_BAD_CAR) that left the store and the pins as they were. */
  async function refused(car: Uint8Array, message: RegExp) {
    const [keysBefore, pinsBefore] = [await blockKeys(o.store), await o.database.sql.all(PINS)];
    const err = await o.ipfs.importCar(streamOf(car)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isIpfsError(err, "IPFS_BAD_CAR")).toBe(true);
    expect((err as Error).message).toMatch(message);
    expect(await blockKeys(o.store)).toEqual(keysBefore);
    expect(await o.database.sql.all(PINS)).toEqual(pinsBefore);
  }

  test("a file packed by ipfs-car --no-wrap: the Cid it printed, its size, its bytes", async () => {
    const { root, car } = await ipfsCarPack(join(dir, "big.bin"), { wrap: false });
    const roots = await imported(car);
    expect(roots).toEqual([{ cid: CID.parse(root).toV1().toString(), size: big.byteLength, directory: false }]);
    expect(sha256(await collect(o.ipfs.read(root)))).toBe(sha256(big));
    expect(await collect(o.ipfs.read(root, { start: MiB - 3, end: MiB + 2 }))).toEqual(big.subarray(MiB - 3, MiB + 3));
    expect(await o.ipfs.stat(root)).toEqual({ size: big.byteLength });
  });

  test("a directory packed by ipfs-car: one root, sized by its blocks", async () => {
    const { root, car } = await ipfsCarPack(join(dir, "site"));
    const [got] = await imported(car);
    const { blocks } = await carParts(car);
    expect(got).toEqual({ cid: CID.parse(root).toV1().toString(), size: blocks.reduce((n, b) => n + b.bytes.byteLength, 0), directory: true });
    // Every block of the DAG is pinned with the root.
    const rows = await o.database.sql.all<{ key: string }>("SELECT key FROM ipfs_object_blocks WHERE cid = $1", [got?.cid ?? ""]);
    expect(rows.length).toBe(blocks.length);
  });

  test("the same CAR twice: one more reference, no block written again", async () => {
    const { root, car } = await ipfsCarPack(join(dir, "small.txt"), { wrap: false });
    await imported(car);
    const keys = await blockKeys(o.store);
    await imported(car);
    expect(await blockKeys(o.store)).toEqual(keys);
    const pin = await o.database.sql.get<{ refs: number }>("SELECT refs FROM ipfs_pins WHERE cid = $1", [CID.parse(root).toV1().toString()]);
    expect(pin?.refs).toBe(2);
  });

  test("several roots, blocks in any order, and a block no root reaches is not kept", async () => {
    const a = await ipfsCarPack(join(dir, "small.txt"), { wrap: false });
    const b = await ipfsCarPack(join(dir, "site"));
    const strayBytes = randomBytes(64);
    const stray = { cid: CID.createV1(raw.code, await sha2_256.digest(strayBytes)), bytes: strayBytes };
    const parts = [...(await carParts(b.car)).blocks, ...(await carParts(a.car)).blocks].reverse();
    const car = await writeCar([CID.parse(a.root), CID.parse(b.root)], [...parts, stray]);
    const roots = await imported(car);
    expect(roots.map((r) => r.cid)).toEqual([CID.parse(a.root).toV1().toString(), CID.parse(b.root).toV1().toString()]);
    expect(await blockKeys(o.store)).not.toContain(`ipfs/${(await import("multiformats/bases/base32")).base32.baseEncode(stray.cid.multihash.bytes)}`);
  });

  test("sha2-512 and identity Cids are checked and read", async () => {
    const leaf = randomBytes(1000);
    const leafCid = CID.createV1(raw.code, await sha512.digest(leaf));
    const tiny = new TextEncoder().encode("inline");
    const tinyCid = CID.createV1(raw.code, identity.digest(tiny));
    const node = dagPb.encode(dagPb.prepare({ Data: new UnixFS({ type: "file", blockSizes: [1000n, 6n] }).marshal(), Links: [{ Hash: leafCid, Tsize: 1000 }, { Hash: tinyCid, Tsize: 6 }] }));
    const rootCid = CID.createV1(dagPb.code, await sha512.digest(node));
    const [root] = await imported(await writeCar([rootCid], [{ cid: rootCid, bytes: node }, { cid: leafCid, bytes: leaf }]));
    expect(root).toEqual({ cid: rootCid.toString(), size: 1006, directory: false });
    expect(await collect(o.ipfs.read(rootCid.toString()))).toEqual(Buffer.concat([leaf, tiny]));
  });

  describe("refused whole, keeping nothing", () => {
    test("one flipped byte in a block", async () => {
      const { car } = await ipfsCarPack(join(dir, "big.bin"), { wrap: false });
      await refused(await flipByteOfBlock(car, 1), /does not match its Cid/);
    });

    test("a block of the root's DAG missing", async () => {
      const { car } = await ipfsCarPack(join(dir, "site"));
      const { blocks } = await carParts(car);
      const leaf = blocks.find((b) => b.cid.code === raw.code);
      await refused(await withoutBlock(car, leaf!.cid), /is missing from the CAR/);
    });

    test("a CAR cut short", async () => {
      const { car } = await ipfsCarPack(join(dir, "big.bin"), { wrap: false });
      await refused(car.subarray(0, car.byteLength - 100), /ends in the middle of a section/);
    });

    test("a codec that is not UnixFS, a hash not checked here", async () => {
      const bytes = randomBytes(10);
      const cbor = CID.createV1(0x71, await sha2_256.digest(bytes));
      await refused(await writeCar([cbor], [{ cid: cbor, bytes }]), /codec 0x71/);
      const blake = CID.createV1(raw.code, { code: 0x1e, size: 32, digest: new Uint8Array(32), bytes: Uint8Array.of(0x1e, 32, ...new Uint8Array(32)) });
      await refused(await writeCar([blake], [{ cid: blake, bytes }]), /hash 0x1e/);
    });

    test("a block over 2 MiB", async () => {
      const bytes = randomBytes(2 * MiB + 1);
      const cid = CID.createV1(raw.code, await sha2_256.digest(bytes));
      await refused(await writeCar([cid], [{ cid, bytes }]), /at most 2097152 bytes/);
    });

    test("a file whose node lists sizes its children do not hold", async () => {
      const leaf = randomBytes(100);
      const leafCid = CID.createV1(raw.code, await sha2_256.digest(leaf));
      const node = dagPb.encode(dagPb.prepare({ Data: new UnixFS({ type: "file", blockSizes: [1_000_000n] }).marshal(), Links: [{ Hash: leafCid, Tsize: 100 }] }));
      const cid = CID.createV1(dagPb.code, await sha2_256.digest(node));
      await refused(await writeCar([cid], [{ cid, bytes: node }, { cid: leafCid, bytes: leaf }]), /holds 100/);
    });

    test("not a CAR at all, and a CAR with no root", async () => {
      await refused(new TextEncoder().encode("this is not a CAR"), /not a valid CAR/);
      await refused(await writeCar([], []), /names no root/);
    });
  });
});
