/**
 * Chunk files: `ROOT/ab/cd/abcd…` (two-level fan-out by the first four hex digits of the SHA-256, so
 * no folder holds more than a few thousand files even at millions of chunks).
 *
 * A chunk appears under its final name only complete and durable: written to `HASH.tmp-RANDOM` in
 * the same folder, fsync'd, renamed; the folder is fsync'd before any manifest names the chunk (the
 * rename itself must survive a power cut).
 */
import { mkdir, open, rename, stat, unlink, writeFile } from "node:fs/promises";
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { CorruptChunkError } from "./errors.ts";
import type { Pins } from "./pins.ts";

export const TEMP_MARK = ".tmp-";
const HASH_NAME = /^[0-9a-f]{64}$/;
const DIR_SYNC_CONCURRENCY = 8;

/** SHA-256 in hex. WebCrypto's digest runs off the JavaScript thread in Bun (measured), so
 * checking chunks does not compete with the importer's hashing for the event loop. */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  // The cast only narrows ArrayBufferLike: chunks are never in a SharedArrayBuffer.
  return Buffer.from(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>)).toString("hex");
}

export function isChunkName(name: string): boolean {
  return HASH_NAME.test(name);
}

export function isTempName(name: string): boolean {
  return name.includes(TEMP_MARK);
}

export class ChunkFiles {
  /** Folders known to exist: nothing removes them while the store runs. */
  private readonly made = new Set<string>();

  constructor(
    readonly root: string,
    private readonly pins: Pins,
  ) {}

  dirOf(hash: string): string {
    return join(this.root, hash.slice(0, 2), hash.slice(2, 4));
  }

  pathOf(hash: string): string {
    return join(this.dirOf(hash), hash);
  }

  /**
   * Puts the chunk's bytes, fsync'd, under its final name. A file already there is reused only if
   * its bytes hash right (so uploading the same content again repairs a damaged chunk). The caller
   * must have pinned `hash` first, and must `syncDirs` the chunk's folder before a manifest names
   * it (done per upload, not per chunk: every extra await here costs a turn of a busy event loop).
   * Returns whether bytes were written.
   */
  async store(hash: string, bytes: Uint8Array): Promise<boolean> {
    const dir = this.dirOf(hash);
    await this.ensureDir(dir);
    if (await this.holds(hash, bytes.length)) return false;
    await this.writeAtomically(dir, hash, bytes);
    return true;
  }

  /** Makes the renames in these folders durable. Also for chunks found already there: the upload
   * that renamed them may not have synced the folder yet. */
  async syncDirs(dirs: Iterable<string>): Promise<void> {
    const list = [...dirs];
    const next = async (): Promise<void> => {
      for (let dir = list.pop(); dir !== undefined; dir = list.pop()) await fsyncDir(dir);
    };
    await Promise.all(Array.from({ length: DIR_SYNC_CONCURRENCY }, next));
  }

  /** Reads a whole chunk and checks its size and SHA-256; never returns wrong bytes. */
  async load(hash: string, size: number): Promise<Uint8Array> {
    let bytes: Uint8Array;
    try {
      bytes = await Bun.file(this.pathOf(hash)).bytes();
    } catch (e) {
      if (errorCode(e) === "ENOENT") throw new CorruptChunkError(hash, "file missing");
      throw e;
    }
    if (bytes.length !== size) throw new CorruptChunkError(hash, `size ${bytes.length}, expected ${size}`);
    if ((await sha256Hex(bytes)) !== hash) throw new CorruptChunkError(hash, "SHA-256 mismatch");
    return bytes;
  }

  private async holds(hash: string, size: number): Promise<boolean> {
    const path = this.pathOf(hash);
    const st = await stat(path).catch(() => undefined);
    if (st?.size !== size) return false;
    return (await sha256Hex(await Bun.file(path).bytes())) === hash;
  }

  private async writeAtomically(dir: string, hash: string, bytes: Uint8Array): Promise<void> {
    const temp = join(dir, `${hash}${TEMP_MARK}${randomBytes(6).toString("hex")}`);
    this.pins.addTemp(temp); // before the file exists, so no sweep takes it for a crash's leftover
    try {
      await writeFile(temp, bytes, { flag: "wx", mode: 0o600, flush: true }); // flush: fsync before close
      await rename(temp, this.pathOf(hash));
    } catch (e) {
      await unlink(temp).catch(() => {});
      throw e;
    } finally {
      this.pins.removeTemp(temp);
    }
  }

  private async ensureDir(dir: string): Promise<void> {
    if (this.made.has(dir)) return;
    const created = await mkdir(dir, { recursive: true, mode: 0o700 });
    // A new folder's own entry must be durable too (once per folder, at most 65,792 times ever).
    if (created !== undefined) await this.syncDirs([dirname(dir), this.root]);
    this.made.add(dir);
  }
}

/** Makes a folder's entries (a rename) durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

export function errorCode(e: unknown): string | undefined {
  if (typeof e !== "object" || e === null || !("code" in e)) return undefined;
  return typeof e.code === "string" ? e.code : undefined;
}
