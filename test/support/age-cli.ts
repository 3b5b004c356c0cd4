/**
 * Debian's `age` CLI, the reference implementation the SDK's age v1 code (src/sdk/age.ts) is
 * checked against both ways. Installed when missing (`scripts/age.sh install`, which holds a lock
 * so parallel callers wait), so a fresh machine needs nothing beforehand.
 */
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");

/** Whether the loader knows Debian's libsodium23 (the native AEAD's library, aead-native.ts). */
function haveLibsodium(): boolean {
  const ldconfig = Bun.which("ldconfig") ?? "/sbin/ldconfig";
  const out = Bun.spawnSync([ldconfig, "-p"], { stdout: "pipe", stderr: "ignore" });
  return out.success && /\slibsodium\.so\.23 /.test(out.stdout.toString());
}

/** The first ensureAgeCli's check (and install), which every later call in this process shares:
 * what it found stays true, so ldconfig runs once, not once per test that needs `age`. */
let ready: Promise<void> | undefined;

/** Resolves once `age` and `age-keygen` are on PATH and libsodium23 is installed (scripts/age.sh
 * installs them together: a machine with `age` alone must still get the library the native tests use). */
export function ensureAgeCli(): Promise<void> {
  ready ??= checkOrInstall().catch((err: unknown) => {
    ready = undefined; // a failed install is tried again by the next caller
    throw err;
  });
  return ready;
}

async function checkOrInstall(): Promise<void> {
  if (Bun.which("age") && Bun.which("age-keygen") && haveLibsodium()) return;
  const proc = Bun.spawn(["sh", join(ROOT, "scripts", "age.sh"), "install"], { stdout: "inherit", stderr: "inherit" });
  if ((await proc.exited) !== 0) throw new Error("installing age failed (scripts/age.sh install): see the output above");
}

/** Runs an `age` command with `stdin` on its standard input; its output, or an error with its stderr. */
export async function ageCli(args: string[], stdin: Uint8Array): Promise<Uint8Array> {
  const proc = Bun.spawn(["age", ...args], { stdin: new Blob([stdin]), stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).bytes(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`age ${args.join(" ")} exited ${code}: ${err.trim()}`);
  return out;
}
