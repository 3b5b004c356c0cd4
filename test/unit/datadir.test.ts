import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { acquireLock, DataDirLocked } from "../../src/datadir/lock.ts";
import { InsecureSecrets, loadSecrets } from "../../src/datadir/secrets.ts";
import { tempDir } from "../support/tmp.ts";

const none = { operatorKey: undefined, adminKey: undefined };
const mode = (p: string) => statSync(p).mode & 0o777;

describe("secrets", () => {
  test("are generated on first start: folder 0700, files 0600, distinct random keys", () => {
    const dir = tempDir("sec");
    const s = loadSecrets(dir, none);
    expect(mode(join(dir, "secrets"))).toBe(0o700);
    for (const f of ["jwt.key", "operator.key", "admin.key"]) expect(mode(join(dir, "secrets", f))).toBe(0o600);
    expect(s.jwtKey.length).toBe(32);
    expect(s.operatorKey).toMatch(/^0x[0-9a-f]{64}$/);
    expect(s.operatorKey).not.toBe(s.adminKey);
    const other = loadSecrets(tempDir("sec"), none);
    expect(other.operatorKey).not.toBe(s.operatorKey);
  });

  test("are kept across restarts", () => {
    const dir = tempDir("sec");
    const a = loadSecrets(dir, none);
    const b = loadSecrets(dir, none);
    expect(b).toEqual(a);
  });

  test("configured keys win and are not written to disk", () => {
    const dir = tempDir("sec");
    const key = `0x${"11".repeat(32)}` as const;
    const s = loadSecrets(dir, { operatorKey: key, adminKey: undefined });
    expect(s.operatorKey).toBe(key);
    expect(() => readFileSync(join(dir, "secrets", "operator.key"))).toThrow();
  });

  test("a secrets folder readable by others stops the start", () => {
    const dir = tempDir("sec");
    loadSecrets(dir, none);
    chmodSync(join(dir, "secrets"), 0o755);
    expect(() => loadSecrets(dir, none)).toThrow(InsecureSecrets);
    expect(() => loadSecrets(dir, none)).toThrow(/readable by others/);
  });

  test("a secret file readable by others stops the start", () => {
    const dir = tempDir("sec");
    loadSecrets(dir, none);
    chmodSync(join(dir, "secrets", "jwt.key"), 0o644);
    expect(() => loadSecrets(dir, none)).toThrow(InsecureSecrets);
  });
});

describe("data dir lock (a kernel lock, D14)", () => {
  const lockFile = (dir: string) => join(dir, "stowage.lock");
  /** Another process holding the lock on `dir`, as a second server would. */
  async function holder(dir: string) {
    const script = `import { acquireLock } from ${JSON.stringify(join(import.meta.dir, "..", "..", "src", "datadir", "lock.ts"))};
acquireLock(${JSON.stringify(dir)}); console.log("locked"); setInterval(() => {}, 1 << 30);`;
    const proc = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "inherit" });
    const reader = proc.stdout.getReader();
    const { value } = await reader.read();
    expect(new TextDecoder().decode(value)).toContain("locked");
    return proc;
  }

  test("another process holding it refuses the start, naming its pid; its kill -9 frees it at once", async () => {
    const dir = tempDir("lock");
    const other = await holder(dir);
    expect(readFileSync(lockFile(dir), "utf8")).toBe(String(other.pid));
    expect(() => acquireLock(dir)).toThrow(DataDirLocked);
    expect(() => acquireLock(dir)).toThrow(`another stowage (pid ${other.pid}) is using ${dir}`);
    // A refused attempt leaves the holder's pid in the file.
    expect(readFileSync(lockFile(dir), "utf8")).toBe(String(other.pid));
    other.kill("SIGKILL");
    await other.exited;
    const lock = acquireLock(dir);
    expect(readFileSync(lockFile(dir), "utf8")).toBe(String(process.pid));
    lock.release();
  });

  test("a lock file naming a live unrelated process does not block the start (a reused pid)", async () => {
    const dir = tempDir("lock");
    const unrelated = Bun.spawn(["sleep", "60"]);
    try {
      writeFileSync(lockFile(dir), String(unrelated.pid));
      const lock = acquireLock(dir);
      expect(readFileSync(lockFile(dir), "utf8")).toBe(String(process.pid));
      lock.release();
    } finally {
      unrelated.kill("SIGKILL");
    }
  });

  test("one holder at a time within a process too; release frees it and blanks the pid", () => {
    const dir = tempDir("lock");
    const lock = acquireLock(dir);
    expect(() => acquireLock(dir)).toThrow(DataDirLocked);
    lock.release();
    expect(readFileSync(lockFile(dir), "utf8")).toBe("");
    const again = acquireLock(dir);
    again.release();
  });

  test("a lock file left by a dead process is taken over", () => {
    const dir = tempDir("lock");
    mkdirSync(dir, { recursive: true });
    writeFileSync(lockFile(dir), "999999999");
    const lock = acquireLock(dir);
    expect(readFileSync(lockFile(dir), "utf8")).toBe(String(process.pid));
    lock.release();
  });
});
