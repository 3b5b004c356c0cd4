/**
 * The anvil executable, carried inside the compiled binary (`bun build --compile` embeds a
 * `type: "file"` import). A compiled binary cannot exec from its own virtual filesystem, so the
 * file is copied to `DATA_DIR/bin/anvil` (0700) and checked by hash on every start, against the
 * hash taken at build time (anvil-hash.macro.ts): the embedded bytes are read only to copy them.
 */
import anvilFile from "@foundry-rs/anvil-linux-amd64/bin/anvil" with { type: "file" };
import { chmodSync, existsSync, mkdirSync, renameSync } from "node:fs";
import { join } from "node:path";
import { embeddedAnvilSha256 } from "./anvil-hash.macro.ts" with { type: "macro" };

/** Embedded files live under Bun's virtual root; in development the import is a real path. */
const isEmbedded = (path: string) => path.startsWith("/$bunfs/") || path.includes("~BUN");

async function sha256(path: string): Promise<string> {
  const hasher = new Bun.CryptoHasher("sha256");
  for await (const chunk of Bun.file(path).stream()) hasher.update(chunk);
  return hasher.digest("hex");
}

/** Returns a path to an anvil that can be executed. */
export async function anvilExecutable(dataDir: string): Promise<string> {
  if (!isEmbedded(anvilFile)) return anvilFile;
  const dir = join(dataDir, "bin");
  const target = join(dir, "anvil");
  if (existsSync(target) && (await sha256(target)) === embeddedAnvilSha256()) return target;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const temp = `${target}.${process.pid}.tmp`;
  await Bun.write(temp, Bun.file(anvilFile));
  chmodSync(temp, 0o700);
  renameSync(temp, target);
  return target;
}
