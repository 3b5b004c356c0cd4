/**
 * `sh scripts/bun.sh scripts/build-sdk.ts`: builds the SDK package (D19), packages/sdk/dist: ESM for
 * Node ≥ 20 (dist/node) and for browsers (dist/browser) from src/sdk/index.ts, and its .d.ts files
 * (dist/types) with tsc. Dependencies stay imports (the package's own package.json pins them), so a
 * user's bundler dedupes viem and @noble with their own.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..");
const pkgDir = join(root, "packages", "sdk");
const dist = join(pkgDir, "dist");
const pkg = (await Bun.file(join(pkgDir, "package.json")).json()) as { dependencies: Record<string, string> };
// A dependency's subpaths (@noble/hashes/sha2.js) are external too.
const external = Object.keys(pkg.dependencies).flatMap((d) => [d, `${d}/*`]);

const started = performance.now();
rmSync(dist, { recursive: true, force: true });
for (const target of ["node", "browser"] as const) {
  const out = await Bun.build({ entrypoints: [join(root, "src", "sdk", "index.ts")], outdir: join(dist, target), target, format: "esm", external, sourcemap: "linked" });
  if (!out.success) {
    for (const log of out.logs) console.error(log);
    throw new Error(`SDK build for ${target} failed`);
  }
}
const tsc = Bun.spawnSync([process.execPath, join(root, "node_modules", "typescript", "bin", "tsc"), "-p", join(pkgDir, "tsconfig.json")], { cwd: pkgDir, stdout: "inherit", stderr: "inherit", env: { ...process.env, BUN_BE_BUN: "1" } });
if (tsc.exitCode !== 0) throw new Error("SDK declarations (tsc) failed");
console.log(`built packages/sdk/dist in ${((performance.now() - started) / 1000).toFixed(1)} s`);
