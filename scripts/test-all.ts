/**
 * `npm test`'s passes, from the table of test/configurations.ts: every test file runs in each pass
 * its folder (or its own entry) names, each pass one `bun test` process with that pass's
 * settings. A folder of tests the table does not name stops the run before any test: it would
 * otherwise run on SQLite and local files only without anyone deciding so. Exits non-zero if any
 * pass failed; each pass prints bun's own summary (CI sums them).
 *
 * @example
 *   bun scripts/test-all.ts            # every pass
 *   bun scripts/test-all.ts --list     # what each pass would run, without running it
 */
import { readdirSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { PASSES, TEST_CONFIGURATIONS, type Pass } from "../test/configurations.ts";

const ROOT = join(import.meta.dir, "..");

function testFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return e.name === "node_modules" ? [] : testFiles(path);
    return e.name.endsWith(".test.ts") ? [path] : [];
  });
}

/** The entry that decides for `file`: its own, else its nearest folder's. */
function entryOf(file: string): string | undefined {
  for (let path = file; path.includes("/"); path = path.slice(0, path.lastIndexOf("/"))) {
    if (TEST_CONFIGURATIONS[path]) return path;
  }
  return undefined;
}

/** Each pass's arguments: a folder whole where all its files run in the pass, else the files. */
export function plan(files: readonly string[]): { missing: string[]; passes: Record<Pass, string[] | "all"> } {
  const missing = [...new Set(files.filter((f) => !entryOf(f)).map((f) => f.slice(0, f.lastIndexOf("/"))))];
  const passes = Object.fromEntries(Object.keys(PASSES).map((p) => [p, [] as string[]])) as Record<Pass, string[] | "all">;
  for (const pass of Object.keys(PASSES) as Pass[]) {
    const runs = (f: string) => (TEST_CONFIGURATIONS[entryOf(f) ?? ""] ?? []).includes(pass);
    const chosen = files.filter(runs);
    // Every file: one bare `bun test`, bun's own discovery.
    if (chosen.length === files.length) {
      passes[pass] = "all";
      continue;
    }
    const args = new Set<string>();
    for (const f of chosen) {
      // The highest folder all of whose files run in this pass, as `folder/` (a path prefix, so
      // test/s3/ never takes in test/s3api/); a file alone otherwise.
      let arg = f;
      for (let dir = f.slice(0, f.lastIndexOf("/")); dir.includes("/"); dir = dir.slice(0, dir.lastIndexOf("/"))) {
        if (files.filter((g) => g.startsWith(`${dir}/`)).every(runs)) arg = `${dir}/`;
        else break;
      }
      args.add(arg);
    }
    passes[pass] = [...args].sort();
  }
  return { missing, passes };
}

if (import.meta.main) {
  const files = testFiles("test").map((f) => relative(ROOT, join(ROOT, f)).split(sep).join("/"));
  const { missing, passes } = plan(files);
  if (missing.length) {
    console.error(`test/configurations.ts names no configuration for ${missing.join(", ")}: add each folder (and the passes it runs in) to TEST_CONFIGURATIONS`);
    process.exit(2);
  }
  if (process.argv.includes("--list")) {
    for (const [pass, args] of Object.entries(passes)) console.log(`${pass}: ${args === "all" ? "every test file" : args.join(" ")}`);
    process.exit(0);
  }
  let failed = 0;
  for (const [pass, args] of Object.entries(passes) as [Pass, string[] | "all"][]) {
    if (args.length === 0) continue;
    console.log(`::: test pass ${pass}`);
    const proc = Bun.spawn(["bun", "test", "--timeout", "60000", ...(args === "all" ? [] : args)], { cwd: ROOT, env: { ...process.env, ...PASSES[pass] }, stdio: ["inherit", "inherit", "inherit"] });
    if ((await proc.exited) !== 0) failed++;
  }
  process.exit(failed ? 1 : 0);
}
