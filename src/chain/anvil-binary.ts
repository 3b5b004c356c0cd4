/**
 * The anvil executable, carried inside the compiled binary (`bun build --compile` embeds a
 * `type: "file"` import). A compiled binary cannot exec from its own virtual filesystem, so the
 * file is copied to `DATA_DIR/bin/anvil` (0700) and checked by hash on every start, against the
 * hash taken at build time (anvil-hash.macro.ts): the embedded bytes are read only to copy them,
 * and by a child process (`stowage __extract-anvil PATH`), because reading them goes through the
 * binary's own mapping and the 44 MiB it touched stayed in the server's RSS (144 MiB
 * idle after a new data dir's first start, 105 after the others).
 */
import anvilFile from "@foundry-rs/anvil-linux-amd64/bin/anvil" with { type: "file" };
import { chmodSync, existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { embeddedAnvilSha256 } from "./anvil-hash.macro.ts" with { type: "macro" };

/** Embedded files live under Bun's virtual root; in development the import is a real path. */
const isEmbedded = (path: string) => path.startsWith("/$bunfs/") || path.includes("~BUN");

async function sha256(path: string): Promise<string> {
  const hasher = new Bun.CryptoHasher("sha256");
  for await (const chunk of Bun.file(path).stream()) hasher.update(chunk);
  return hasher.digest("hex");
}

/** The hidden command (src/main.ts) a compiled binary runs in its child to copy the anvil out. */
export const EXTRACT_ANVIL_COMMAND = "__extract-anvil";

/** Writes the embedded anvil to `path` (the child's whole work). */
export async function writeEmbeddedAnvil(path: string): Promise<void> {
  await Bun.write(path, Bun.file(anvilFile));
}

/** Returns a path to an anvil that can be executed. */
export async function anvilExecutable(dataDir: string): Promise<string> {
  if (!isEmbedded(anvilFile)) return anvilFile;
  const dir = join(dataDir, "bin");
  const target = join(dir, "anvil");
  if (existsSync(target) && (await sha256(target)) === embeddedAnvilSha256()) return target;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const temp = `${target}.${process.pid}.tmp`;
  const child = Bun.spawn([process.execPath, EXTRACT_ANVIL_COMMAND, temp], { stdin: "ignore", stdout: "ignore", stderr: "pipe" });
  const [code, stderr] = await Promise.all([child.exited, new Response(child.stderr).text()]);
  if (code !== 0 || (await sha256(temp)) !== embeddedAnvilSha256()) {
    rmSync(temp, { force: true });
    throw new Error(code !== 0 ? `copying the embedded anvil to ${temp} failed (exit ${code}): ${stderr.trim()}` : `the anvil copied to ${temp} does not have the embedded one's hash`);
  }
  chmodSync(temp, 0o700);
  renameSync(temp, target);
  return target;
}
