/**
 * Data dirs from before the blob store: blocks in blockstore-fs under DATA/ipfs/blocks (the layout
 * the old back-end wrote, `<last 2>/<BASE32UPPER multihash>.data`) and pins without block rows.
 * The start moves the pinned content's blocks into the blob store, indexes it, and removes the old
 * folder; unpinned leftovers are not carried over; a root that cannot be walked keeps the old
 * folder until it can.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { FsBlockstore } from "blockstore-fs";
import { NextToLast } from "blockstore-fs/sharding";
import { importer } from "ipfs-unixfs-importer";
import { CID } from "multiformats/cid";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { testDatabase } from "../../support/db.ts";
import { blockKey, cidOfKey } from "../../../src/storage/ipfs/blocks.ts";
import { d9ImporterOptions } from "../../../src/storage/ipfs/index.ts";
import { tempDir } from "../../support/tmp.ts";
import { MiB, blockKeys, blockRows, collect, openBackend, randomBytes, sha256 } from "./helpers.ts";

setDefaultTimeout(60_000);

const sharding = new NextToLast();

/** Writes `files` as the old back-end did; pins those marked pinned. Answers each file's Cid and block keys. */
async function oldDataDir(files: Array<{ bytes: Uint8Array; pinned: boolean }>) {
  const dataDir = tempDir("ipfs-old");
  const blocksDir = join(dataDir, "ipfs", "blocks");
  const fs = new FsBlockstore(blocksDir, { shardingStrategy: sharding });
  await fs.open();
  const out: Array<{ cid: string; keys: string[]; path: (cid: CID) => string }> = [];
  const database = testDatabase(dataDir);
  for (const file of files) {
    const keys = new Set<string>();
    const recording = {
      async put(cid: CID, bytes: Uint8Array) {
        keys.add(blockKey(cid));
        return fs.put(cid, bytes);
      },
    };
    let root: CID | undefined;
    for await (const entry of importer([{ content: file.bytes }], recording, d9ImporterOptions())) root = entry.cid;
    const cid = root!.toV1().toString();
    if (file.pinned) await database.sql.run("insert into ipfs_pins (cid, refs, size) values ($1, 1, $2)", [cid, file.bytes.byteLength]);
    out.push({ cid, keys: [...keys].sort(), path: (c) => join(blocksDir, sharding.encode(c).dir, sharding.encode(c).file) });
  }
  await database.close();
  await fs.close();
  return { dataDir, blocksDir, files: out };
}

describe("moving an old data dir's blocks into the blob store", () => {
  test("pinned content moves and stays readable, leftovers do not, the old folder goes; a second start has nothing to do", async () => {
    const a = randomBytes(3 * MiB + 17);
    const b = new TextEncoder().encode("hello world\n");
    const garbage = randomBytes(MiB + 1);
    const old = await oldDataDir([
      { bytes: a, pinned: true },
      { bytes: b, pinned: true },
      { bytes: garbage, pinned: false },
    ]);
    const [fa, fb, fg] = old.files;
    expect(fb!.cid).toBe("bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4");

    let o = await openBackend(old.dataDir);
    expect(o.ipfs.migrated).toEqual({ indexed: 2, copied: 6, missingLeaves: 0, broken: 0, removedOld: true });
    expect(existsSync(old.blocksDir)).toBe(false);
    await o.ipfs.swept;
    const keys = [...fa!.keys, ...fb!.keys].sort();
    expect(await blockKeys(o.store)).toEqual(keys);
    expect(fg!.keys.some((k) => keys.includes(k))).toBe(false);
    expect([...(await blockRows(o)).keys()].sort()).toEqual(keys);
    expect(sha256(await collect(o.ipfs.read(fa!.cid)))).toBe(sha256(a));
    expect(await collect(o.ipfs.read(fb!.cid))).toEqual(b);
    await o.close();

    o = await openBackend(old.dataDir);
    expect(o.ipfs.migrated).toEqual({ indexed: 0, copied: 0, missingLeaves: 0, broken: 0, removedOld: false });
    // Indexed like new content: releasing deletes its blocks.
    await o.ipfs.release(fa!.cid);
    expect(await blockKeys(o.store)).toEqual(fb!.keys);
    await o.close();
  });

  test("a pinned root that cannot be walked keeps the old folder; once repaired, the next start moves it", async () => {
    const a = randomBytes(2 * MiB + 3);
    const old = await oldDataDir([{ bytes: a, pinned: true }]);
    const [fa] = old.files;
    const rootFile = fa!.path(CID.parse(fa!.cid));
    const rootBytes = await Bun.file(rootFile).bytes();
    rmSync(rootFile);

    let o = await openBackend(old.dataDir);
    expect(o.ipfs.migrated).toMatchObject({ indexed: 0, broken: 1, removedOld: false });
    expect(existsSync(old.blocksDir)).toBe(true);
    expect(await o.ipfs.stat(fa!.cid)).toEqual({ size: a.byteLength }); // still pinned
    await o.close();

    await Bun.write(rootFile, rootBytes);
    o = await openBackend(old.dataDir);
    expect(o.ipfs.migrated).toMatchObject({ indexed: 1, broken: 0, removedOld: true });
    await o.ipfs.swept;
    expect(await blockKeys(o.store)).toEqual(fa!.keys);
    expect(sha256(await collect(o.ipfs.read(fa!.cid)))).toBe(sha256(a));
    await o.close();
  });

  test("a missing leaf is reported and the rest moves (such content was unreadable before too)", async () => {
    const a = randomBytes(2 * MiB + 3);
    const old = await oldDataDir([{ bytes: a, pinned: true }]);
    const [fa] = old.files;
    const leaves = fa!.keys.filter((k) => k !== blockKey(CID.parse(fa!.cid)));
    rmSync(fa!.path(cidOfKey(leaves[0]!)!));

    const o = await openBackend(old.dataDir);
    expect(o.ipfs.migrated).toEqual({ indexed: 1, copied: 3, missingLeaves: 1, broken: 0, removedOld: true });
    await o.ipfs.swept;
    expect(await blockKeys(o.store)).toEqual(fa!.keys.filter((k) => k !== leaves[0]));
    expect(await collect(o.ipfs.read(fa!.cid)).then(() => undefined, (e: unknown) => e)).toMatchObject({ code: "IPFS_BLOCK_MISSING" });
    await o.close();
  });
});
