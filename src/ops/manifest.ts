/**
 * A backup's manifest (D26): `manifest.json` at the top of the backup, written last, so a backup
 * without one is incomplete (an `INCOMPLETE` file says so to a human too). It names the format and
 * its version, the gateway and installation, when the database's snapshot was taken, the
 * generation folder that holds this backup's parts, and each part's path, size and SHA-256. Blobs
 * are listed apart, in `blobs.list` (a part itself): one `KEY SIZE` line per blob the database
 * names, each blob checked against its content address (its key is its hash), so the manifest
 * stays small however many there are.
 *
 * A backup folder holds one manifest, the generations (`generations/<id>/`: a database snapshot,
 * the chain's state, the secrets, the blob list) and the blobs, shared by all generations under
 * their content names. A new backup into the folder writes a new generation beside the one the
 * manifest names and switches by renaming its manifest into place, so the folder always holds
 * one complete backup (backup.ts).
 *
 * Everything read from a backup is checked before use: a path that could leave the backup or the
 * data dir, a key that is no blob key, a field of the wrong type is refused with the part's name.
 */
import { checkKey } from "../blob/store.ts";

export const BACKUP_FORMAT = "stowage-backup";
/** The layout this stowage writes and reads: the parts in a generation folder (`generation`). */
export const BACKUP_VERSION = 2;
export const MANIFEST_FILE = "manifest.json";
export const INCOMPLETE_FILE = "INCOMPLETE";
export const BLOB_LIST_FILE = "blobs.list";
export const BLOBS_DIR = "blobs";
export const GENERATIONS_DIR = "generations";
/** The keys a backup's blobs may have: dfs chunks and ipfs blocks. */
const BLOB_PREFIXES = ["dfs/", "ipfs/"];

export type ChainEngine = "anvil" | "evm";

export interface BackupPart {
  /** What it is, for people: "database", "chain state", "secret jwt.key", … */
  name: string;
  /** Where it is, relative to the generation's folder and to the data dir it restores into. */
  path: string;
  size: number;
  sha256: string;
}

export interface BackupManifest {
  format: typeof BACKUP_FORMAT;
  version: number;
  /** The version of stowage that wrote it. */
  stowage: string;
  gatewayId: string | null;
  installationId: string | null;
  /** When the manifest was written (ISO 8601). */
  createdAt: string;
  /** When the database's snapshot began (ISO 8601): the backup is the gateway at this moment. */
  snapshotAt: string;
  /** The folder, relative to the backup, that holds `parts`: `generations/<id>`. */
  generation: string;
  source: {
    dataDir: string;
    /** Whether a server was running on the data dir. */
    running: boolean;
    /** The embedded chain's engine, or null for an external chain (STOWAGE_CHAIN_RPC). */
    chain: ChainEngine | null;
    blobStore: "local" | "s3";
  };
  parts: BackupPart[];
  blobs: {
    /** The blob list's path (also one of `parts`). */
    list: string;
    count: number;
    bytes: number;
    /** false when the blobs live in an object store, which backs itself up (README). */
    copied: boolean;
    /** Blobs the database names that the source did not hold whole: not in the backup. */
    damaged: string[];
  };
}

export class BackupError extends Error {
  override name = "BackupError";
}

/** A relative path of plain segments (no `..`, no `.`, no empty one, no absolute start). */
export function isSafePath(path: string): boolean {
  return /^[A-Za-z0-9_-][A-Za-z0-9._-]*(?:\/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$/.test(path) && !path.split("/").some((s) => s === "." || s === "..");
}

/** `generations/<one plain segment>`: where a manifest may point. */
export const isGeneration = (path: string): boolean => isSafePath(path) && path.split("/").length === 2 && path.startsWith(`${GENERATIONS_DIR}/`);

const isString = (v: unknown): v is string => typeof v === "string";
const isCount = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;

export function parseManifest(text: string): BackupManifest {
  let m: unknown;
  try {
    m = JSON.parse(text);
  } catch {
    throw new BackupError(`${MANIFEST_FILE} is not JSON`);
  }
  const bad = (what: string): never => {
    throw new BackupError(`${MANIFEST_FILE}: ${what}`);
  };
  if (typeof m !== "object" || m === null) return bad("not an object");
  const o = m as Record<string, unknown>;
  if (o.format !== BACKUP_FORMAT) return bad(`not a Stowage backup (format ${JSON.stringify(o.format)})`);
  if (o.version !== BACKUP_VERSION) return bad(`format version ${JSON.stringify(o.version)}: this stowage reads version ${BACKUP_VERSION}`);
  if (!isString(o.snapshotAt) || Number.isNaN(Date.parse(o.snapshotAt))) bad("snapshotAt is not a time");
  if (!isString(o.generation) || !isGeneration(o.generation)) bad(`generation is not a folder of ${GENERATIONS_DIR}/: ${JSON.stringify(o.generation)}`);
  if (!Array.isArray(o.parts)) return bad("parts is not a list");
  const paths = new Set<string>();
  for (const p of o.parts as unknown[]) {
    const part = p as Partial<BackupPart>;
    if (typeof p !== "object" || p === null || !isString(part.name) || !isString(part.path) || !isCount(part.size) || !isString(part.sha256) || !/^[0-9a-f]{64}$/.test(part.sha256)) bad(`a part is malformed: ${JSON.stringify(p).slice(0, 200)}`);
    if (!isSafePath(part.path as string) || (part.path as string).startsWith(`${BLOBS_DIR}/`)) bad(`part ${part.name} has a path that is not allowed: ${JSON.stringify(part.path)}`);
    if (paths.has(part.path as string)) bad(`two parts at ${part.path}`);
    paths.add(part.path as string);
  }
  const blobs = o.blobs as Partial<BackupManifest["blobs"]> | undefined;
  if (typeof blobs !== "object" || blobs === null || !isString(blobs.list) || !paths.has(blobs.list) || !isCount(blobs.count) || !isCount(blobs.bytes) || typeof blobs.copied !== "boolean" || !Array.isArray(blobs.damaged)) bad("blobs is malformed");
  const source = o.source as Partial<BackupManifest["source"]> | undefined;
  if (typeof source !== "object" || source === null || (source.chain !== null && source.chain !== "anvil" && source.chain !== "evm")) bad("source is malformed");
  return o as unknown as BackupManifest;
}

/** One blob the database names: its key and size. */
export interface ListedBlob {
  key: string;
  size: number;
}

export function formatBlobLine(b: ListedBlob): string {
  return `${b.key} ${b.size}\n`;
}

/** The blob list's lines, each key checked to be a dfs chunk's or ipfs block's. */
export function parseBlobList(text: string): ListedBlob[] {
  const out: ListedBlob[] = [];
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  for (const [i, line] of lines.entries()) {
    const m = /^(\S+) (\d+)$/.exec(line);
    const key = m?.[1];
    let ok = m !== null && key !== undefined && BLOB_PREFIXES.some((p) => key.startsWith(p)) && Number.isSafeInteger(Number(m[2]));
    if (ok) {
      try {
        checkKey(key as string);
      } catch {
        ok = false;
      }
    }
    if (!ok) throw new BackupError(`${BLOB_LIST_FILE}, line ${i + 1}: not a blob key and size: ${JSON.stringify(line.slice(0, 120))}`);
    out.push({ key: key as string, size: Number(m?.[2]) });
  }
  return out;
}
