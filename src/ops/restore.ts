/**
 * `stowage admin restore SRC --data-dir DIR` (D26): a backup into a new data dir that `stowage
 * serve` starts on. Nothing is written before everything is verified: every part's size and
 * SHA-256 against the manifest (the parts are in the generation folder it names), every listed
 * blob against its content address (its key is its hash). A part that differs is refused by name.
 * Then the files are copied into a folder beside DIR, checked again as they are copied (a backup
 * run into SRC meanwhile may have switched generations and removed this one: the restore then
 * fails), made durable, and the folder renamed to DIR: a failure or a kill leaves no
 * half-restored DIR, only that folder.
 *
 * DIR must not exist or be empty: a restore never mixes a backup with another data dir. With
 * `verifyOnly` it checks the backup and writes nothing.
 *
 * @example
 *   await runRestore({ src: "/backups/stowage", dataDir: "/var/lib/stowage" })
 */
import { existsSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import { ConfigError } from "../config-error.ts";
import { LocalBlobStore } from "../blob/local.ts";
import { contentProblem } from "./blob-content.ts";
import { copyDurably, fsyncDir, hashFile, makeDir, type FileHash } from "./files.ts";
import { BackupError, BLOBS_DIR, INCOMPLETE_FILE, MANIFEST_FILE, parseBlobList, parseManifest, type BackupManifest, type BackupPart, type ListedBlob } from "./manifest.ts";

export interface RestoreProgress {
  step: "verify" | "write";
  done: number;
  total: number;
}

export interface RestoreReport {
  src: string;
  /** Where it was restored; undefined when only verified. */
  dataDir?: string;
  manifest: BackupManifest;
  parts: number;
  blobs: number;
  /** Bytes verified (and, when restoring, written). */
  bytes: number;
  seconds: number;
  /** Blobs the source did not hold whole when the backup was made (the manifest lists them). */
  damaged: string[];
}

export interface RestoreOptions {
  src: string;
  /** Required unless `verifyOnly`. */
  dataDir?: string;
  verifyOnly?: boolean;
  progress?: (p: RestoreProgress) => void;
}

/** Problems shown by name before the list is cut. */
const SHOWN = 10;

export async function runRestore(opts: RestoreOptions): Promise<RestoreReport> {
  const started = performance.now();
  const src = resolve(opts.src);
  // Everything written is private (files 0600, folders 0700), SQLite's copy included.
  process.umask(0o077);
  const progress = opts.progress ?? (() => {});
  const manifest = readBackupManifest(src);
  const dataDir = opts.dataDir === undefined ? undefined : resolve(opts.dataDir);
  if (!opts.verifyOnly) {
    if (dataDir === undefined) throw new ConfigError("restore needs --data-dir DIR (a new, empty data dir)");
    if (existsSync(dataDir) && readdirSync(dataDir).length > 0) throw new ConfigError(`${dataDir} is not empty: restore only into a new or empty data dir`);
  }

  // Verify everything first. The parts are in the generation the manifest names.
  const gen = join(src, manifest.generation);
  const blobList = manifest.blobs.list;
  const listPart = manifest.parts.find((p) => p.path === blobList) as BackupPart;
  const damaged = new Set(manifest.blobs.damaged.map((d) => d.split(":")[0] as string));
  const problems: string[] = [];
  let bytes = 0;
  for (const part of manifest.parts) {
    const problem = await copyVerified(join(gen, part.path), part);
    if (problem) problems.push(`${part.path} (${part.name}): ${problem}`);
    else bytes += part.size;
  }
  // The list itself verified, its blobs are checked against their keys.
  let blobs: ListedBlob[] = [];
  if (!problems.some((p) => p.startsWith(`${listPart.path} `))) {
    blobs = parseBlobList(readFileSync(join(gen, listPart.path), "utf8"));
    if (blobs.length !== manifest.blobs.count) problems.push(`${listPart.path}: lists ${blobs.length} blobs, the manifest says ${manifest.blobs.count}`);
  }
  const copied = manifest.blobs.copied ? blobs.filter((b) => !damaged.has(b.key)) : [];
  const store = new LocalBlobStore(join(src, BLOBS_DIR));
  let done = 0;
  for (const blob of copied) {
    const problem = await blobProblem(store, blob);
    if (problem) problems.push(`${BLOBS_DIR}/${blob.key}: ${problem}`);
    else bytes += blob.size;
    if (++done % 256 === 0) progress({ step: "verify", done, total: copied.length });
  }
  progress({ step: "verify", done, total: copied.length });
  if (problems.length > 0) {
    const shown = problems.slice(0, SHOWN).map((p) => `  ${p}`);
    const more = problems.length > SHOWN ? [`  … and ${problems.length - SHOWN} more`] : [];
    throw new BackupError([`the backup ${src} does not match its manifest; nothing was written:`, ...shown, ...more].join("\n"));
  }
  const report = { src, manifest, parts: manifest.parts.length, blobs: copied.length, bytes, damaged: [...manifest.blobs.damaged] };
  if (opts.verifyOnly || dataDir === undefined) return { ...report, seconds: (performance.now() - started) / 1000 };

  // Then write, into a folder beside DIR that becomes DIR at the end.
  const parent = dirname(dataDir);
  makeDir(parent);
  const staging = `${dataDir}.restoring-${randomBytes(4).toString("hex")}`;
  makeDir(staging);
  try {
    // The blob list is the backup's own index, not a file of the data dir.
    for (const part of manifest.parts.filter((p) => p.path !== blobList)) {
      const problem = await copyVerified(join(gen, part.path), part, join(staging, part.path));
      if (problem) throw new BackupError(`${part.path} (${part.name}) changed while it was restored: ${problem}; nothing was restored`);
    }
    const target = new LocalBlobStore(join(staging, BLOBS_DIR));
    const batch = target.batch();
    done = 0;
    for (const blob of copied) {
      const read = await store.bytes(blob.key).catch(() => undefined);
      const problem = read === undefined ? "missing" : read.length !== blob.size ? `${read.length} bytes, listed as ${blob.size}` : contentProblem(blob.key, read);
      if (problem || !read) throw new BackupError(`${BLOBS_DIR}/${blob.key} changed while it was restored: ${problem}; nothing was restored`);
      await batch.put(blob.key, read);
      if (++done % 256 === 0) progress({ step: "write", done, total: copied.length });
    }
    await batch.sync();
    progress({ step: "write", done, total: copied.length });
    if (existsSync(dataDir)) rmdirSync(dataDir); // empty, as checked
    renameSync(staging, dataDir);
    await fsyncDir(parent);
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    throw err;
  }
  return { ...report, dataDir, seconds: (performance.now() - started) / 1000 };
}

/** The backup's manifest, or why there is none to restore from. */
export function readBackupManifest(src: string): BackupManifest {
  if (!existsSync(src)) throw new ConfigError(`no backup at ${src}`);
  const file = join(src, MANIFEST_FILE);
  if (!existsSync(file)) {
    if (existsSync(join(src, INCOMPLETE_FILE))) throw new BackupError(`${src} is an unfinished backup (it has no ${MANIFEST_FILE}): run \`stowage admin backup ${src}\` again to finish it`);
    throw new BackupError(`${src} is not a Stowage backup: it has no ${MANIFEST_FILE}`);
  }
  return parseManifest(readFileSync(file, "utf8"));
}

/** Why a listed blob in the backup is not what its key names, or undefined. */
async function blobProblem(store: LocalBlobStore, blob: ListedBlob): Promise<string | undefined> {
  let bytes: Uint8Array;
  try {
    bytes = await store.bytes(blob.key);
  } catch {
    return "missing";
  }
  if (bytes.length !== blob.size) return `${bytes.length} bytes, listed as ${blob.size}`;
  return contentProblem(blob.key, bytes);
}

/** Why a file's size and SHA-256 differ from its part's in the manifest, or undefined. */
const partProblem = (got: FileHash, part: BackupPart): string | undefined =>
  got.size !== part.size ? `${got.size} bytes, the manifest says ${part.size}` : got.sha256 !== part.sha256 ? "SHA-256 differs from the manifest" : undefined;

/** Checks the part at `from` against the manifest; with `to`, copies it there (0600, durable), checking what it wrote. */
async function copyVerified(from: string, part: BackupPart, to?: string): Promise<string | undefined> {
  if (!existsSync(from)) return "missing";
  return partProblem(to === undefined ? await hashFile(from) : await copyDurably(from, to), part);
}
