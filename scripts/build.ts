/**
 * `bun run build`: compiles Stowage into one executable, `dist/stowage`, that runs without Bun
 * or node_modules. Migrations come in through a macro; the anvil binary through a file import.
 */
import { mkdirSync, statSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..");
const outfile = join(root, "dist", "stowage");
mkdirSync(join(root, "dist"), { recursive: true });

const started = performance.now();
console.log("building dist/stowage …");
const proc = Bun.spawnSync([process.execPath, "build", "--compile", "--minify-syntax", "--sourcemap", "--outfile", outfile, join(root, "src", "main.ts")], {
  cwd: root,
  stdout: "inherit",
  stderr: "inherit",
});
if (proc.exitCode !== 0) {
  console.error("build failed");
  process.exit(proc.exitCode ?? 1);
}
const mib = (statSync(outfile).size / 2 ** 20).toFixed(1);
console.log(`built dist/stowage (${mib} MiB) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
