/**
 * File handling shared by backup and restore: writes that are whole or absent after a crash
 * (temporary name, fsync, rename, fsync of the folder), private modes (files 0600, folders 0700:
 * a backup holds the secrets and everyone's files), and SHA-256 of files read as streams, also
 * while they are copied, so what is checked is what was written.
 */
import { chmodSync, closeSync, fsyncSync, mkdirSync, openSync, readdirSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { fsyncDir } from "../blob/local.ts";

export { fsyncDir };

export interface FileHash {
  size: number;
  sha256: string;
}

/** Reads `path` as a stream, handing each chunk to `each`: its size and SHA-256 (hex). */
async function streamFile(path: string, each?: (chunk: Uint8Array) => void): Promise<FileHash> {
  const hasher = new Bun.CryptoHasher("sha256");
  let size = 0;
  for await (const chunk of Bun.file(path).stream()) {
    hasher.update(chunk);
    each?.(chunk);
    size += chunk.byteLength;
  }
  return { size, sha256: hasher.digest("hex") };
}

/** SHA-256 (hex) and size of a file, read as a stream. */
export const hashFile = (path: string): Promise<FileHash> => streamFile(path);

export const sha256Hex = (bytes: Uint8Array): string => new Bun.CryptoHasher("sha256").update(bytes).digest("hex");

/** Makes `dir` and its missing parents, private. */
export function makeDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/**
 * Writes `path` so that a crash leaves the old file or the new one, never half: `fill` writes the
 * content through `write` into a temporary name (0600), which is fsynced and renamed into place.
 */
async function writeWhole(path: string, fill: (write: (bytes: Uint8Array) => void) => Promise<void> | void): Promise<void> {
  makeDir(dirname(path));
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = openSync(tmp, "w", 0o600);
  try {
    await fill((bytes) => {
      for (let done = 0; done < bytes.byteLength; ) done += writeSync(fd, bytes, done, bytes.byteLength - done);
    });
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, path);
  await fsyncDir(dirname(path));
}

/** Writes `bytes` to `path` whole or not at all (writeWhole); the bytes written. */
export async function writeDurably(path: string, bytes: Uint8Array | string): Promise<number> {
  const data = typeof bytes === "string" ? Buffer.from(bytes, "utf8") : bytes;
  await writeWhole(path, (write) => write(data));
  return data.length;
}

/** Copies `from` to `to` whole or not at all (writeWhole), as a stream: the size and SHA-256 of what was written. */
export async function copyDurably(from: string, to: string): Promise<FileHash> {
  let hash: FileHash | undefined;
  await writeWhole(to, async (write) => {
    hash = await streamFile(from, write);
  });
  return hash as FileHash;
}

/** fsyncs `dir` and every folder under it: the entries of files made durable one by one, and of the folders holding them. */
export async function fsyncTree(dir: string): Promise<void> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) await fsyncTree(join(dir, entry.name));
  await fsyncDir(dir);
}

/** fsyncs a file already written (by SQLite's VACUUM INTO, say). */
export function fsyncFile(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Tightens a folder of ours to 0700 (a backup's destination made by hand, say). */
export function makePrivateDir(dir: string): void {
  const mode = statSync(dir).mode & 0o777;
  if (mode & 0o077) chmodSync(dir, 0o700);
}
