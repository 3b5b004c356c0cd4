/**
 * `stowage admin backup DEST` (D26): a backup of an embedded gateway, running or stopped, into a
 * folder, without stopping it. Once the folder holds a complete backup it always holds one: each
 * run writes a new generation (`generations/<id>/`: the database, the chain, the secrets, the blob
 * list) beside the one `manifest.json` names, adds the blobs it lacks to the blobs every
 * generation shares (a content name holds one content), and switches to it by renaming its
 * manifest into place. In this order, each step for a reason:
 *
 * 1. `INCOMPLETE` is written, and generations the manifest does not name (killed runs') go. The
 *    manifest and its generation stay: until step 6 they are the folder's backup.
 * 2. A hold on every blob deletion (src/blob/guard.ts `holdDeletions`, a pin all deleters read):
 *    from here on no blob is deleted until the hold ends or lapses.
 * 3. The database through SQLite's `VACUUM INTO`, one read transaction on a thread of its own:
 *    the rows as one moment left them, whatever the server commits meanwhile (never a file copy,
 *    which would tear the log from the database). Every blob it names exists now (an upload
 *    writes its blobs before the rows naming them commit, D9/D15) and stays, held by step 2.
 *    The copy's pins are dropped: they are claims of the source's processes, the hold among them;
 *    releases in flight are finished in it (references.ts), as no process will finish them there.
 * 4. The embedded chain's state, after the snapshot, so the chain is never behind the rows
 *    (chain-state.ts); then the secrets (0600), the gateway id and the IPFS peer key.
 * 5. The blobs the snapshot names, under their content names, each checked against its key as it
 *    is copied; those DEST has already are not copied again. Then the hold ends.
 * 6. The manifest (temporary name, fsync, rename): from this rename on the folder is the new
 *    backup. Then `INCOMPLETE` goes.
 * 7. What only the old generation needed: its folder, and the blobs the new one does not name.
 *
 * A kill at any step leaves the last complete backup restorable (before the first one, a folder
 * marked unfinished), and running the command again finishes the new one, keeping the blobs the
 * killed run copied. While a run is under way the folder holds two databases: DEST needs room for
 * a second copy of the database besides the new blobs.
 *
 * With blobs in an object store (STOWAGE_S3_ENDPOINT) the blobs are the store's to back up (its
 * versioning or replication, README): the backup holds the rest and the list of blobs the
 * database names. A PostgreSQL database is backed up with PostgreSQL's tools (README).
 *
 * @example
 *   const report = await runBackup({ config, dest: "/backups/stowage", progress: (p) => … })
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { join, relative, resolve, sep } from "node:path";
import { randomBytes } from "node:crypto";
import type { Config } from "../config.ts";
import { acquireLock } from "../datadir/lock.ts";
import { readGatewayId } from "../datadir/gateway-id.ts";
import { secretsDir } from "../datadir/secrets.ts";
import { openExisting } from "../db/open.ts";
import { readInstallationId } from "../db/installation.ts";
import { clearPins, holdDeletions } from "../blob/guard.ts";
import { LocalBlobStore, openBlobStore, type BlobStore } from "../blob/index.ts";
import { keptChunks } from "../storage/dfs/audit.ts";
import { keptBlocks } from "../storage/ipfs/audit.ts";
import { version } from "../version.ts";
import { workerScript } from "../worker-script.ts";
import { contentProblem } from "./blob-content.ts";
import { settleReleases } from "./references.ts";
import { deploymentPath, readChainState } from "./chain-state.ts";
import { fsyncDir, fsyncFile, fsyncTree, hashFile, makeDir, makePrivateDir, writeDurably } from "./files.ts";
import {
  BACKUP_FORMAT,
  BACKUP_VERSION,
  BackupError,
  BLOB_LIST_FILE,
  BLOBS_DIR,
  formatBlobLine,
  GENERATIONS_DIR,
  INCOMPLETE_FILE,
  MANIFEST_FILE,
  parseManifest,
  type BackupManifest,
  type BackupPart,
  type ListedBlob,
} from "./manifest.ts";
import type { SnapshotReply, SnapshotRequest } from "./snapshot-worker.ts";

/** Progress, in order; "prune" comes after the manifest: the new backup is complete by then. */
export type BackupStep = "database" | "chain" | "secrets" | "blobs" | "manifest" | "prune";

export interface BackupProgress {
  step: BackupStep;
  /** Blobs: how many of `total` are done, and the bytes copied so far. */
  done?: number;
  total?: number;
  copiedBytes?: number;
}

export interface BackupReport {
  dest: string;
  snapshotAt: string;
  running: boolean;
  manifest: BackupManifest;
  blobs: { listed: number; listedBytes: number; copied: number; copiedBytes: number; present: number; pruned: number; damaged: string[] };
  /** Bytes written into DEST, every file counted (the database, blobs copied, the manifest, …). */
  written: number;
  seconds: number;
  /** What the operator should know: secrets set in the environment, blobs left to the object store. */
  notes: string[];
}

export interface BackupOptions {
  config: Pick<Config, "dataDir" | "databaseUrl" | "chainRpc" | "s3Endpoint" | "s3Bucket" | "s3Region" | "s3Prefix" | "s3AccessKeyId" | "s3SecretAccessKey" | "jwtKey" | "secretsKey" | "operatorKey" | "adminKey" | "ageIdentity">;
  dest: string;
  progress?: (p: BackupProgress) => void;
  /** Blobs copied at once (default 4 from local files, 16 from an object store). */
  concurrency?: number;
}

/** The secret files a data dir may hold (src/datadir/secrets.ts), and the other identities kept. */
const IDENTITY_FILES = [
  { name: "gateway id", path: "gateway-id" },
  { name: "IPFS peer key", path: join("ipfs", "peer.key") },
];

export async function runBackup(opts: BackupOptions): Promise<BackupReport> {
  const started = performance.now();
  const { config } = opts;
  // Everything written is private (files 0600, folders 0700), SQLite's copy included.
  process.umask(0o077);
  const progress = opts.progress ?? (() => {});
  if (config.databaseUrl) throw new BackupError("the database is PostgreSQL: back it up with pg_dump or a base backup with WAL archiving (README, \"Backups of a cluster\"), then verify a restore with `stowage admin check`");
  const dataDir = resolve(config.dataDir);
  const dest = resolve(opts.dest);
  const dbFile = join(dataDir, "stowage.db");
  if (!existsSync(dbFile)) throw new BackupError(`no database at ${dbFile}: is ${dataDir} a stowage data dir?`);
  if (dest === dataDir || dest.startsWith(dataDir + sep) || dataDir.startsWith(dest + sep)) throw new BackupError(`the backup's folder ${dest} and the data dir ${dataDir} must not contain each other`);
  prepareDest(dest);
  // One backup at a time into a folder: the kernel lock, freed when its holder dies.
  const destLock = acquireLock(dest);
  let dataLock: { release(): void } | undefined;
  const notes: string[] = [];
  let written = 0;
  try {
    // 1. Marked unfinished until the new manifest is in place; the last complete backup stays.
    const current = currentBackup(dest);
    if (current.readable) removeGenerations(dest, current.manifest?.generation);
    const begun = new Date().toISOString();
    const marker = current.manifest
      ? `A backup begun ${begun} is not finished. manifest.json still names the last complete backup (as of ${current.manifest.snapshotAt}), which restores as it is. Run \`stowage admin backup ${dest}\` again to finish the new one.\n`
      : `This backup is not finished (begun ${begun}). Run \`stowage admin backup ${dest}\` again to finish it.\n`;
    written += await writeDurably(join(dest, INCOMPLETE_FILE), marker);
    const generation = `${GENERATIONS_DIR}/${begun.replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z")}-${randomBytes(4).toString("hex")}`;
    const genDir = join(dest, generation);
    mkdirSync(genDir, { recursive: true, mode: 0o700 });
    // A stopped gateway's data dir is locked for the backup's time, so no server starts under it.
    try {
      dataLock = acquireLock(dataDir);
    } catch {
      dataLock = undefined;
    }
    const running = dataLock === undefined;
    const db = openExisting(dbFile);
    const blobStore = config.s3Endpoint ? "s3" : "local";
    const parts: BackupPart[] = [];
    const addPart = async (name: string, path: string) => {
      parts.push({ name, path, ...(await hashFile(join(genDir, path))) });
    };
    /** A file of the data dir into the new generation, as the part `name`. */
    const keep = async (name: string, path: string, bytes: Uint8Array) => {
      written += await writeDurably(join(genDir, path), bytes);
      await addPart(name, path);
    };
    let snapshotAt: string;
    let hold: Awaited<ReturnType<typeof holdDeletions>> | undefined;
    let switched = false;
    try {
      const installationId = (await readInstallationId(db.sql)) ?? null;
      const gatewayId = readGatewayId(dataDir) ?? null;
      // 2. No blob is deleted from here on.
      hold = await holdDeletions(db.sql, `backup-${randomBytes(6).toString("hex")}`);
      // 3. The database.
      progress({ step: "database" });
      const snapshotFile = join(genDir, "stowage.db");
      const tmp = `${snapshotFile}.partial`;
      snapshotAt = new Date().toISOString();
      await snapshotDatabase(dbFile, tmp);
      const copy = openExisting(tmp);
      try {
        await clearPins(copy.sql);
        // Releases in flight at the snapshot (a file's row gone, its content not yet released)
        // would never finish in the copy: finished here, as the release would have.
        await settleReleases(copy.sql);
      } finally {
        await copy.close();
      }
      fsyncFile(tmp);
      renameSync(tmp, snapshotFile);
      await fsyncDir(genDir);
      await addPart("database", "stowage.db");
      written += statSync(snapshotFile).size;

      // 4. The chain (after the snapshot), the secrets, the identities.
      progress({ step: "chain" });
      const chain = config.chainRpc ? undefined : await readChainState(dataDir, running);
      if (chain) await keep("chain state", chain.path, chain.bytes);
      if (!config.chainRpc && existsSync(deploymentPath(dataDir))) await keep("contract addresses", relative(dataDir, deploymentPath(dataDir)), readFileSync(deploymentPath(dataDir)));
      progress({ step: "secrets" });
      const secrets = secretsDir(dataDir);
      if (existsSync(secrets)) {
        for (const entry of readdirSync(secrets, { withFileTypes: true })) {
          if (!entry.isFile() || !entry.name.endsWith(".key")) continue;
          await keep(`secret ${entry.name}`, join(relative(dataDir, secrets), entry.name), readFileSync(join(secrets, entry.name)));
        }
      }
      for (const f of IDENTITY_FILES) if (existsSync(join(dataDir, f.path))) await keep(f.name, f.path, readFileSync(join(dataDir, f.path)));
      const fromEnv = (["jwtKey", "secretsKey", "operatorKey", "adminKey", "ageIdentity"] as const).filter((k) => config[k] !== undefined);
      if (fromEnv.length) notes.push(`secrets set in the environment (${fromEnv.join(", ")}) are not in the backup: a restored gateway needs the same settings`);

      // 5. The blobs the snapshot names: from local files, copied; in an object store, listed.
      const source = blobStore === "local" ? await openBlobStore(config, { sweepTemps: false }) : undefined;
      const blobs = await copyBlobs({ snapshotFile, listFile: join(genDir, BLOB_LIST_FILE), dest, source, progress, concurrency: opts.concurrency ?? (blobStore === "local" ? 4 : 16) });
      written += blobs.copiedBytes + blobs.listWritten;
      await addPart("blob list", BLOB_LIST_FILE);
      await hold.release();
      hold = undefined;
      if (blobStore === "s3") notes.push("blobs live in the object store and are not copied: back the bucket up with its versioning or replication (README); the blob list names what this backup's database needs");

      // 6. The manifest: the switch to the new generation, once every folder of it is durable too.
      progress({ step: "manifest" });
      await fsyncTree(genDir);
      await fsyncDir(join(dest, GENERATIONS_DIR));
      await fsyncDir(dest);
      const manifest: BackupManifest = {
        format: BACKUP_FORMAT,
        version: BACKUP_VERSION,
        stowage: version,
        gatewayId,
        installationId,
        createdAt: new Date().toISOString(),
        snapshotAt,
        generation,
        source: { dataDir, running, chain: chain?.engine ?? null, blobStore },
        parts,
        blobs: { list: BLOB_LIST_FILE, count: blobs.listed.size, bytes: blobs.listedBytes, copied: blobStore === "local", damaged: blobs.damaged },
      };
      written += await writeDurably(join(dest, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
      switched = true;
      rmSync(join(dest, INCOMPLETE_FILE), { force: true });
      await fsyncDir(dest);

      // 7. What only the old generation needed.
      progress({ step: "prune" });
      removeGenerations(dest, generation);
      const pruned = await prune(dest, blobs.listed);
      return {
        dest,
        snapshotAt,
        running,
        manifest,
        blobs: { listed: blobs.listed.size, listedBytes: blobs.listedBytes, copied: blobs.copied, copiedBytes: blobs.copiedBytes, present: blobs.present, pruned, damaged: blobs.damaged },
        written,
        seconds: (performance.now() - started) / 1000,
        notes,
      };
    } catch (err) {
      // A run that failed before its switch gives back the room its generation took (a full disk
      // is one way to fail); the blobs it copied stay, for the next run.
      if (!switched) rmSync(genDir, { recursive: true, force: true });
      throw err;
    } finally {
      await hold?.release().catch(() => {});
      await db.close();
    }
  } finally {
    dataLock?.release();
    destLock.release();
  }
}

/** DEST exists, private, and is empty or a backup (finished or not): never someone's other files. */
function prepareDest(dest: string) {
  makeDir(dest);
  makePrivateDir(dest);
  const entries = readdirSync(dest);
  const ours = new Set([MANIFEST_FILE, INCOMPLETE_FILE, "stowage.lock"]);
  if (entries.length > 0 && !entries.some((e) => e === MANIFEST_FILE || e === INCOMPLETE_FILE)) {
    throw new BackupError(`${dest} holds files that are not a Stowage backup (${entries.filter((e) => !ours.has(e)).slice(0, 3).join(", ")}): choose an empty folder, or one an earlier backup wrote`);
  }
}

/**
 * The complete backup DEST holds, if any. `readable` is false when a manifest is there that this
 * stowage cannot read (another format version, or damaged): then nothing of it is removed before
 * the new manifest replaces it.
 */
function currentBackup(dest: string): { manifest?: BackupManifest; readable: boolean } {
  const file = join(dest, MANIFEST_FILE);
  if (!existsSync(file)) return { readable: true };
  try {
    return { manifest: parseManifest(readFileSync(file, "utf8")), readable: true };
  } catch {
    return { readable: false };
  }
}

/** Removes every generation but `keep` (the manifest's), and the manifest's leftover temporary files. */
function removeGenerations(dest: string, keep: string | undefined) {
  const root = join(dest, GENERATIONS_DIR);
  if (existsSync(root)) {
    for (const name of readdirSync(root)) if (`${GENERATIONS_DIR}/${name}` !== keep) rmSync(join(root, name), { recursive: true, force: true });
  }
  for (const name of readdirSync(dest)) if (name.startsWith(`${MANIFEST_FILE}.tmp-`)) rmSync(join(dest, name), { force: true });
}

async function snapshotDatabase(source: string, target: string): Promise<void> {
  const worker = new Worker(workerScript("ops/snapshot-worker.ts"));
  try {
    const reply = await new Promise<SnapshotReply>((ok) => {
      worker.addEventListener("message", (event: MessageEvent<SnapshotReply>) => ok(event.data));
      worker.addEventListener("error", (event: ErrorEvent) => ok({ error: event.message || "the snapshot thread failed" }));
      worker.postMessage({ source, target } satisfies SnapshotRequest);
    });
    if ("error" in reply) throw new BackupError(`the database's snapshot failed: ${reply.error}`);
  } finally {
    worker.terminate();
  }
}

interface CopiedBlobs {
  listed: Set<string>;
  listedBytes: number;
  copied: number;
  copiedBytes: number;
  present: number;
  damaged: string[];
  listWritten: number;
}

/** Lists the blobs the snapshot names (the generation's blobs.list) and, from `source`, copies those DEST lacks. */
async function copyBlobs(o: { snapshotFile: string; listFile: string; dest: string; source?: BlobStore; progress: (p: BackupProgress) => void; concurrency: number }): Promise<CopiedBlobs> {
  const snapshot = openExisting(o.snapshotFile);
  const listed = new Set<string>();
  const all: ListedBlob[] = [];
  let listedBytes = 0;
  try {
    for await (const c of keptChunks(snapshot.sql)) all.push({ key: c.key, size: c.size });
    for await (const b of keptBlocks(snapshot.sql)) all.push({ key: b.key, size: b.size });
  } finally {
    await snapshot.close();
  }
  for (const b of all) {
    listed.add(b.key);
    listedBytes += b.size;
  }
  const listWritten = await writeDurably(o.listFile, all.map(formatBlobLine).join(""));
  const out: CopiedBlobs = { listed, listedBytes, copied: 0, copiedBytes: 0, present: 0, damaged: [], listWritten };
  const { source } = o;
  if (!source) return out;
  const target = new LocalBlobStore(join(o.dest, BLOBS_DIR));
  await target.removeLeftoverTemps(); // an interrupted backup's, under DEST's lock
  const batch = target.batch();
  let next = 0;
  let done = 0;
  const report = () => o.progress({ step: "blobs", done, total: all.length, copiedBytes: out.copiedBytes });
  let shown = 0;
  // The first failure (a full disk, say) stops every worker before the backup gives up: none
  // goes on writing into DEST after the run has failed and let go of its lock.
  let failure: { err: unknown } | undefined;
  const worker = async () => {
    while (next < all.length && !failure) {
      const blob = all[next++] as ListedBlob;
      if ((await target.stat(blob.key)) === blob.size) out.present++;
      else {
        let bytes: Uint8Array | undefined;
        try {
          bytes = await source.bytes(blob.key);
        } catch {
          bytes = undefined;
        }
        const problem = bytes === undefined ? "missing" : bytes.length !== blob.size ? `${bytes.length} bytes, the database says ${blob.size}` : contentProblem(blob.key, bytes);
        if (problem || !bytes) out.damaged.push(`${blob.key}: ${problem}`);
        else {
          await batch.put(blob.key, bytes);
          out.copied++;
          out.copiedBytes += bytes.length;
        }
      }
      done++;
      if (performance.now() - shown > 100) {
        shown = performance.now();
        report();
      }
    }
  };
  const stopOnFailure = (err: unknown) => {
    failure ??= { err };
  };
  await Promise.all(Array.from({ length: Math.max(1, o.concurrency) }, () => worker().catch(stopOnFailure)));
  if (failure) throw failure.err;
  await batch.sync();
  report();
  out.damaged.sort();
  return out;
}

/** Removes blobs DEST holds that the new snapshot does not name (an earlier generation's). */
async function prune(dest: string, listed: Set<string>): Promise<number> {
  const root = join(dest, BLOBS_DIR);
  if (!existsSync(root)) return 0;
  const target = new LocalBlobStore(root);
  let pruned = 0;
  for (const prefix of ["dfs/", "ipfs/"]) {
    for await (const key of target.list(prefix)) {
      if (listed.has(key)) continue;
      await target.delete(key);
      pruned++;
    }
  }
  return pruned;
}
