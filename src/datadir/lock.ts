/**
 * One server per data directory. The lock file holds the owner's pid; a lock left by a killed
 * process (its pid no longer alive) is taken over.
 *
 * @example
 *   const lock = acquireLock("data")   // throws DataDirLocked when another server runs
 *   lock.release()
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";

export class DataDirLocked extends Error {
  override name = "DataDirLocked";
}

export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM means the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

export function acquireLock(dataDir: string): { release(): void } {
  const file = join(dataDir, "stowage.lock");
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(file, "wx", 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return { release: () => releaseIfOurs(file) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const holder = Number(readFileSync(file, "utf8").trim());
    if (holder !== process.pid && isAlive(holder)) {
      throw new DataDirLocked(`another stowage (pid ${holder}) is using ${dataDir}; stop it first`);
    }
    try {
      unlinkSync(file); // stale: its owner died without cleaning up
    } catch {}
  }
  throw new DataDirLocked(`could not lock ${dataDir}`);
}

function releaseIfOurs(file: string) {
  try {
    if (readFileSync(file, "utf8").trim() === String(process.pid)) unlinkSync(file);
  } catch {}
}
