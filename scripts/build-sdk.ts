/**
 * `sh scripts/bun.sh scripts/build-sdk.ts`: builds the SDK package (D19), packages/sdk/dist: ESM
 * for browsers (dist/browser) and other runtimes (dist/esm) from src/sdk/index.ts, for Node ≥ 20
 * (dist/node) and Bun (dist/bun) from src/sdk/node.ts and bun.ts (the same API, the payload's AEAD
 * native where it loads), and its .d.ts files
 * (dist/types) with tsc. Dependencies stay imports (the package's own package.json pins them), so a
 * user's bundler dedupes viem and @noble with their own. Only the SDK's own declarations ship
 * (dist/types/sdk): tsc also prints the server modules the SDK's code imports values from, which
 * the bundles inline, but no shipped .d.ts may name them — the build fails if one does.
 */
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..");
const pkgDir = join(root, "packages", "sdk");
const dist = join(pkgDir, "dist");
const pkg = (await Bun.file(join(pkgDir, "package.json")).json()) as { dependencies: Record<string, string> };
// A dependency's subpaths (@noble/hashes/sha2.js) are external too.
const external = Object.keys(pkg.dependencies).flatMap((d) => [d, `${d}/*`]);

const started = performance.now();
rmSync(dist, { recursive: true, force: true });
// Bun and Node get entries of their own (src/sdk/bun.ts, node.ts: the "bun" and "node" export
// conditions): the same API, with the payload's AEAD native (bun:ffi, node:crypto), which the
// browser build and the plain ESM one ("import": other runtimes) must never import.
const builds = [
  { dir: "node", entry: "node.ts", target: "node" },
  { dir: "bun", entry: "bun.ts", target: "bun" },
  { dir: "browser", entry: "index.ts", target: "browser" },
  { dir: "esm", entry: "index.ts", target: "node" },
] as const;
for (const { dir, entry, target } of builds) {
  const out = await Bun.build({ entrypoints: [join(root, "src", "sdk", entry)], outdir: join(dist, dir), naming: "index.js", target, format: "esm", external, sourcemap: "linked" });
  if (!out.success) {
    for (const log of out.logs) console.error(log);
    throw new Error(`SDK build ${dir} failed`);
  }
}
const tsc = Bun.spawnSync([process.execPath, join(root, "node_modules", "typescript", "bin", "tsc"), "-p", join(pkgDir, "tsconfig.json")], { cwd: pkgDir, stdout: "inherit", stderr: "inherit", env: { ...process.env, BUN_BE_BUN: "1" } });
if (tsc.exitCode !== 0) throw new Error("SDK declarations (tsc) failed");
const types = join(dist, "types");
for (const d of readdirSync(types)) if (d !== "sdk") rmSync(join(types, d), { recursive: true, force: true });
const allowed = (spec: string) => (spec.startsWith("./") && !spec.slice(2).includes("/")) || Object.keys(pkg.dependencies).some((d) => spec === d || spec.startsWith(`${d}/`));
for (const f of readdirSync(join(types, "sdk"))) {
  const text = readFileSync(join(types, "sdk", f), "utf8");
  const specs = [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*)["']([^"']+)["']/g)].map((m) => m[1] ?? "");
  const outside = specs.filter((s) => !allowed(s));
  if (outside.length) throw new Error(`dist/types/sdk/${f} names modules outside the package: ${outside.join(", ")}`);
}
console.log(`built packages/sdk/dist in ${((performance.now() - started) / 1000).toFixed(1)} s`);
