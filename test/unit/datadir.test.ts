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

describe("data dir lock", () => {
  test("a second server on the same data dir is refused while the first runs", () => {
    const dir = tempDir("lock");
    const lock = acquireLock(dir);
    // Our own pid counts as a live holder only for another process; simulate one with pid 1.
    writeFileSync(join(dir, "stowage.lock"), "1");
    expect(() => acquireLock(dir)).toThrow(DataDirLocked);
    writeFileSync(join(dir, "stowage.lock"), String(process.pid));
    lock.release();
  });

  test("a lock left by a dead process is taken over", () => {
    const dir = tempDir("lock");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "stowage.lock"), "999999999");
    const lock = acquireLock(dir);
    expect(readFileSync(join(dir, "stowage.lock"), "utf8")).toBe(String(process.pid));
    lock.release();
  });
});
