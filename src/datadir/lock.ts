/**
 * One server per data directory, decided by the kernel: an exclusive flock(2) on
 * `DATA/stowage.lock`, which the kernel drops the moment its holder dies (kill -9 included). A pid
 * in a file cannot decide this: a killed server's pid stays "alive" until its parent reaps it, and
 * later names whatever process reuses it. The pid is still written into the file, for humans and
 * for the refusal message only.
 *
 * Node and Bun have no flock API, so libc's is called through `bun:ffi` (this works inside the
 * compiled binary too). The file is never unlinked: a second server could otherwise lock the old,
 * unlinked inode while a third locks a new file of the same name.
 *
 * @example
 *   const lock = acquireLock("data")   // throws DataDirLocked when another server holds it
 *   lock.release()
 */
import { dlopen, FFIType, read } from "bun:ffi";
import { closeSync, constants, ftruncateSync, openSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";

export class DataDirLocked extends Error {
  override name = "DataDirLocked";
}

/** Whether a pid names a process. Never used for the lock; the devnet uses it for its own anvil. */
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

const LOCK_EX = 2;
const LOCK_NB = 4;
/** errno values, which differ between Linux (glibc, musl) and the BSDs (macOS). */
const ERRNO = {
  linux: { wouldBlock: 11, interrupted: 4 },
  bsd: { wouldBlock: 35, interrupted: 4 },
};

interface Libc {
  flock(fd: number, op: number): number;
  errno(): number;
  wouldBlock: number;
  interrupted: number;
}

/** The C libraries to try, by platform; `errnoFn` returns the address of the thread's errno. */
function candidates(): { names: string[]; errnoFn: string; codes: (typeof ERRNO)["linux"] }[] {
  const arch = process.arch === "arm64" ? "aarch64" : "x86_64";
  if (process.platform === "linux") return [{ names: ["libc.so.6", `libc.musl-${arch}.so.1`], errnoFn: "__errno_location", codes: ERRNO.linux }];
  if (process.platform === "darwin") return [{ names: ["libSystem.B.dylib", "/usr/lib/libSystem.B.dylib", "libc.dylib"], errnoFn: "__error", codes: ERRNO.bsd }];
  if (process.platform === "freebsd") return [{ names: ["libc.so.7"], errnoFn: "__error", codes: ERRNO.bsd }];
  return [];
}

let libc: Libc | undefined;

function loadLibc(): Libc {
  if (libc) return libc;
  const tried: string[] = [];
  for (const { names, errnoFn, codes } of candidates()) {
    for (const name of names) {
      tried.push(name);
      try {
        const { symbols } = dlopen(name, {
          flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
          [errnoFn]: { args: [], returns: FFIType.ptr },
        });
        const where = symbols[errnoFn] as () => number | null;
        libc = {
          flock: (fd, op) => symbols.flock(fd, op) as number,
          errno: () => {
            const ptr = where();
            return ptr === null ? -1 : read.i32(ptr as Parameters<typeof read.i32>[0], 0);
          },
          ...codes,
        };
        return libc;
      } catch {
        // not this library: try the next
      }
    }
  }
  throw new Error(
    `cannot lock the data directory: no C library with flock(2) could be loaded on ${process.platform}/${process.arch}` +
      (tried.length ? ` (tried ${tried.join(", ")})` : "") +
      "; stowage serve runs on Linux (glibc or musl) and macOS",
  );
}

export function acquireLock(dataDir: string): { release(): void } {
  const c = loadLibc();
  const file = join(dataDir, "stowage.lock");
  // No O_TRUNC: the holder's pid must survive a refused attempt. Bun opens with O_CLOEXEC, so
  // children (anvil) never inherit the descriptor, and with it the lock.
  const fd = openSync(file, constants.O_RDWR | constants.O_CREAT, 0o600);
  let errno = 0;
  for (let attempt = 0; attempt < 5; attempt++) {
    if (c.flock(fd, LOCK_EX | LOCK_NB) === 0) {
      errno = 0;
      break;
    }
    errno = c.errno();
    if (errno !== c.interrupted) break;
  }
  if (errno !== 0) {
    closeSync(fd);
    if (errno === c.wouldBlock) {
      const holder = readFileSync(file, "utf8").trim();
      const who = /^\d+$/.test(holder) ? ` (pid ${holder})` : "";
      throw new DataDirLocked(`another stowage${who} is using ${dataDir}; stop it first`);
    }
    throw new Error(`cannot lock ${file}: flock failed with errno ${errno}`);
  }
  ftruncateSync(fd, 0);
  writeSync(fd, String(process.pid), 0);
  let held = true;
  return {
    release() {
      if (!held) return;
      held = false;
      try {
        ftruncateSync(fd, 0); // a stopped server leaves no pid that looks like a holder
      } catch {}
      closeSync(fd); // the kernel drops the lock with the last descriptor
    },
  };
}
