/**
 * Tests of the compiled binary must test the code as it is, not a build left over from older
 * sources: a plain `bun test` (without `bun run build` first) builds a stale binary once before
 * using it, and fails with the build's own output when that build fails.
 *
 * Parallel test processes must not build at once (two builds writing one file): the build runs
 * under flock(1), a kernel lock that dies with its holder, and whoever gets the lock checks again,
 * so the ones that waited find the binary fresh and build nothing.
 *
 * @example
 *   await ensureFresh({ binary, inputs: [src, packageJson], build: ["bun", "scripts/build.ts"], cwd, lock })
 */
import { mkdirSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";

export interface BuildSpec {
  /** The built file. */
  binary: string;
  /** Files and directories it is built from; missing ones are skipped. */
  inputs: string[];
  /** The command that builds it, run in `cwd`. */
  build: string[];
  cwd: string;
  /** A file to hold a lock on while building. */
  lock: string;
}

const ROOT = join(import.meta.dir, "..", "..");

/** What `bun run build` compiles into `dist/stowage`, and how. */
export const STOWAGE_BUILD: BuildSpec = {
  binary: join(ROOT, "dist", "stowage"),
  inputs: ["src", "package.json", "bun.lock", "bunfig.toml", "tsconfig.json", "scripts/build.ts"].map((p) => join(ROOT, p)),
  build: [process.execPath, join(ROOT, "scripts", "build.ts")],
  cwd: ROOT,
  lock: join(ROOT, "dist", ".build.lock"),
};

/** The first path under `path` changed after `time` (ms): a file's edit, or a directory's entry
 * added, renamed or deleted. */
function changedAfter(path: string, time: number): string | undefined {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return undefined;
  }
  if (stat.mtimeMs > time) return path;
  if (!stat.isDirectory()) return undefined;
  for (const name of readdirSync(path)) {
    const hit = changedAfter(join(path, name), time);
    if (hit) return hit;
  }
  return undefined;
}

/** Why the binary cannot be used as it is, or undefined when it is newer than all its inputs. */
export function staleReason(spec: Pick<BuildSpec, "binary" | "inputs">): string | undefined {
  let built: number;
  try {
    built = statSync(spec.binary).mtimeMs;
  } catch {
    return `${spec.binary} does not exist`;
  }
  for (const input of spec.inputs) {
    const changed = changedAfter(input, built);
    if (changed) return `${changed} changed after ${spec.binary} was built`;
  }
  return undefined;
}

/** Builds `spec.binary` when it is stale, once however many processes ask at the same time. */
export async function ensureFresh(spec: BuildSpec, say: (line: string) => void = (l) => console.error(l)): Promise<void> {
  const reason = staleReason(spec);
  if (!reason) return;
  say(`${reason}: building it (${spec.build.join(" ")})`);
  mkdirSync(dirname(spec.lock), { recursive: true });
  const proc = Bun.spawn(["flock", spec.lock, process.execPath, import.meta.path, JSON.stringify(spec)], { cwd: spec.cwd, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`${reason}, and building it failed (exit ${code}):\n${out}${err}`);
  const still = staleReason(spec);
  if (still) throw new Error(`${spec.build.join(" ")} succeeded, but ${still}`);
}

// Run by ensureFresh under the lock: check again (another process may have built meanwhile), build.
if (import.meta.main) {
  const spec = JSON.parse(process.argv[2] ?? "") as BuildSpec;
  if (staleReason(spec)) {
    const built = Bun.spawnSync(spec.build, { cwd: spec.cwd, stdout: "inherit", stderr: "inherit" });
    process.exit(built.exitCode ?? 1);
  }
}
