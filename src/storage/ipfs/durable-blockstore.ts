/**
 * blockstore-fs with two fixes the upload protocol needs (measured on blockstore-fs 4.0.1):
 *
 * - Durability: it writes a temporary file and renames it, but never fsyncs, so a power cut after
 *   `commit()` could leave a pinned Cid naming a block that is not on disk. Here each new block
 *   and its folder entry are fsynced before `put` resolves.
 * - Same-block races: its temporary name is fixed per block (`.NAME.data.tmp`), so two uploads
 *   writing the same block at once write into one temporary file and the first rename can publish
 *   it half-written. Here puts of one block are serialised within the process (the only writer).
 */
import { FsBlockstore } from "blockstore-fs";
import { NextToLast } from "blockstore-fs/sharding";
import type { AbortOptions } from "@libp2p/interface";
import type { CID } from "multiformats/cid";
import { open } from "node:fs/promises";
import { join } from "node:path";

type BlockBytes = Parameters<FsBlockstore["put"]>[1];

/** Where blockstore-fs puts a block: `<last 2 chars>/<base32upper multihash>.data`. */
export const sharding = new NextToLast();

export class DurableFsBlockstore extends FsBlockstore {
  readonly #writing = new Map<string, Promise<CID>>();

  constructor(location: string) {
    super(location, { shardingStrategy: sharding });
  }

  /** Absolute path of a block's file. */
  fileOf(cid: CID): string {
    const { dir, file } = sharding.encode(cid);
    return join(this.path, dir, file);
  }

  override async put(key: CID, val: BlockBytes, options?: AbortOptions): Promise<CID> {
    const name = sharding.encode(key).file;
    const running = this.#writing.get(name);
    if (running) {
      await running;
      return key;
    }
    const write = (async () => {
      await super.put(key, val, options);
      await fsyncPath(this.fileOf(key));
      await fsyncPath(join(this.path, sharding.encode(key).dir));
      return key;
    })();
    this.#writing.set(name, write);
    try {
      return await write;
    } finally {
      this.#writing.delete(name);
    }
  }
}

async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
