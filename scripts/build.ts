/**
 * `bun run build`: compiles Stowage into one executable, `dist/stowage`, that runs without Bun
 * or node_modules. Migrations come in through a macro; the anvil binary through a file import;
 * the web console is bundled (minified) here first and embedded with `--asset`: the compile's own
 * `--minify-syntax` is all the server gets, and the console's script wants the whole minifier.
 * A worker's script is an entrypoint of its own: Bun finds `new Worker(url)`'s file only so.
 */
import { mkdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { SHIPPED_DIR } from "../src/console/shipped.ts";
import { WORKER_SCRIPTS } from "../src/worker-script.ts";

const root = join(import.meta.dir, "..");
const outfile = join(root, "dist", "stowage");
mkdirSync(join(root, "dist"), { recursive: true });

const started = performance.now();
console.log("building dist/stowage …");
// (A directory's last segment names it inside the binary: SHIPPED_DIR, where src/console looks.)
const consoleDir = join(root, "dist", SHIPPED_DIR);
rmSync(consoleDir, { recursive: true, force: true });
const web = await Bun.build({ entrypoints: [join(root, "src", "console", "web", "index.html")], target: "browser", minify: true, splitting: true, outdir: consoleDir });
if (!web.success) {
  for (const log of web.logs) console.error(log);
  console.error("console build failed");
  process.exit(1);
}
console.log(`console: ${web.outputs.map((o) => `${o.path.split("/").pop()} ${(o.size / 1024).toFixed(0)} KiB`).join(", ")}`);
const proc = Bun.spawnSync([process.execPath, "build", "--compile", "--minify-syntax", "--sourcemap", `--asset=${consoleDir}`, "--outfile", outfile, join(root, "src", "main.ts"), ...WORKER_SCRIPTS.map((w) => join(root, "src", w))], {
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
