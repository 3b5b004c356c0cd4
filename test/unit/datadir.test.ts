import { describe, expect, test } from "bun:test";
import { chmodSync, chownSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { acquireLock, DataDirLocked } from "../../src/datadir/lock.ts";
import { InsecureDataDir, makePrivate } from "../../src/datadir/private.ts";
import { InsecureSecrets, loadSecrets } from "../../src/datadir/secrets.ts";
import { createLogger } from "../../src/log.ts";
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

  test("a configured JWT key (STOWAGE_JWT_KEY: one for every gateway of a cluster) wins over the file", () => {
    const dir = tempDir("sec");
    const generated = loadSecrets(dir, none).jwtKey;
    const key = `0x${"2a".repeat(32)}` as const;
    const s = loadSecrets(dir, { ...none, jwtKey: key });
    expect(Buffer.from(s.jwtKey).toString("hex")).toBe("2a".repeat(32));
    expect(Buffer.from(s.jwtKey).equals(Buffer.from(generated))).toBe(false);
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

describe("data dir privacy (D14)", () => {
  /** Runs `fn` and gives the process its umask back (makePrivate sets it for the whole process). */
  function keepingUmask<T>(fn: () => T): T {
    const before = process.umask();
    try {
      return fn();
    } finally {
      process.umask(before);
    }
  }
  const logged = () => {
    const lines: Record<string, unknown>[] = [];
    return { lines, log: createLogger("debug", (l) => void lines.push(JSON.parse(l) as Record<string, unknown>)) };
  };

  test("a missing data dir is created 0700 and what is written after is 0600, with no log line", () => {
    const dir = join(tempDir("priv"), "a", "data");
    const { lines, log } = logged();
    keepingUmask(() => {
      makePrivate(dir, log);
      writeFileSync(join(dir, "f"), "x");
      mkdirSync(join(dir, "sub"));
    });
    expect(mode(dir)).toBe(0o700);
    expect(mode(join(dir, "f"))).toBe(0o600);
    expect(mode(join(dir, "sub"))).toBe(0o700);
    expect(lines).toEqual([]);
  });

  test("a 0755 data dir of ours is made 0700, with a log line naming its old mode", () => {
    const dir = tempDir("priv");
    chmodSync(dir, 0o755);
    const { lines, log } = logged();
    keepingUmask(() => makePrivate(dir, log));
    expect(mode(dir)).toBe(0o700);
    expect(lines).toMatchObject([{ level: "warn", msg: "data dir was open to other users: made it private", dataDir: dir, was: "755" }]);
  });

  test("one open to others that is not ours is refused and left as it is", () => {
    let dir = "/usr"; // root's, when we are not root
    if (process.getuid?.() === 0) {
      dir = tempDir("priv");
      chmodSync(dir, 0o750);
      chownSync(dir, 65534, 65534);
    }
    const was = mode(dir);
    expect(() => keepingUmask(() => makePrivate(dir, createLogger("debug", () => {})))).toThrow(InsecureDataDir);
    expect(() => keepingUmask(() => makePrivate(dir, createLogger("debug", () => {})))).toThrow(`data dir ${dir} is open to other users (mode ${was.toString(8)})`);
    expect(mode(dir)).toBe(was);
  });
});
