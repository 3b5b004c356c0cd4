/**
 * File handling shared by backup and restore: writes that are whole or absent after a crash
 * (temporary name, fsync, rename, fsync of the folder), private modes (files 0600, folders 0700:
 * a backup holds the secrets and everyone's files), and SHA-256 of files read as streams.
 */
import { chmodSync, closeSync, fsyncSync, mkdirSync, openSync, renameSync, statSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { fsyncDir } from "../blob/local.ts";

export { fsyncDir };

/** SHA-256 (hex) and size of a file, read as a stream. */
export async function hashFile(path: string): Promise<{ size: number; sha256: string }> {
  const hasher = new Bun.CryptoHasher("sha256");
  let size = 0;
  for await (const chunk of Bun.file(path).stream()) {
    hasher.update(chunk);
    size += chunk.byteLength;
  }
  return { size, sha256: hasher.digest("hex") };
}

export const sha256Hex = (bytes: Uint8Array): string => new Bun.CryptoHasher("sha256").update(bytes).digest("hex");

/** Makes `dir` and its missing parents, private. */
export function makeDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/** Writes `bytes` to `path` so that a crash leaves the old file or the new one, never half. */
export async function writeDurably(path: string, bytes: Uint8Array | string): Promise<number> {
  makeDir(dirname(path));
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = openSync(tmp, "w", 0o600);
  const data = typeof bytes === "string" ? Buffer.from(bytes, "utf8") : bytes;
  try {
    for (let done = 0; done < data.length; ) done += writeSync(fd, data, done, data.length - done);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  await fsyncDir(dirname(path));
  return data.length;
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
