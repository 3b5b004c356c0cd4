/**
 * The SDK's own wire types cannot drift from the server's models: `tsc` checks
 * test/sdk/wire-types.ts (each SDK type identical to the server's) and, in the same program, a
 * copy of it against a drifted copy of src/sdk/wire.ts — a field retyped and an optional field made
 * required — which must be refused on exactly the lines naming the types that changed. So the
 * check is live, not a file that passes whatever the types say.
 */
import { expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { tempDir } from "../support/tmp.ts";

const root = join(import.meta.dir, "..", "..");

test(
  "each SDK wire type equals the server's model; a drifted one is a type error on its line",
  () => {
    const dir = tempDir("wire-types");
    const wire = readFileSync(join(root, "src", "sdk", "wire.ts"), "utf8");
    const drifted = wire.replace("  Size: number;\n  Cid: string;", "  Size: string;\n  Cid: string;").replace("  uid: string;\n  email?: string;", "  uid: string;\n  email: string;");
    expect(drifted).not.toBe(wire);
    writeFileSync(join(dir, "wire.ts"), drifted);
    const checks = readFileSync(join(import.meta.dir, "wire-types.ts"), "utf8")
      .replaceAll('from "../../src/sdk/wire.ts"', 'from "./wire.ts"')
      .replaceAll('from "../../src/', `from "${root}/src/`);
    writeFileSync(join(dir, "drifted-check.ts"), checks);
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ extends: join(root, "tsconfig.json"), include: [], files: [join(import.meta.dir, "wire-types.ts"), "drifted-check.ts"] }));

    const tsc = Bun.spawnSync([process.execPath, join(root, "node_modules", "typescript", "bin", "tsc"), "-p", join(dir, "tsconfig.json")], { cwd: root, stdout: "pipe", stderr: "pipe", env: { ...process.env, BUN_BE_BUN: "1" } });
    const out = tsc.stdout.toString().trim();
    const errors = out.split("\n").filter((l) => /error TS/.test(l));
    // Every error is in the drifted copy, none in the real check...
    expect(errors.length).toBeGreaterThan(0);
    for (const e of errors) expect(e).toStartWith(`${relative(root, join(dir, "drifted-check.ts"))}(`);
    // ...and on exactly the lines of the drifted types (FileList holds FileEntries).
    const lines = checks.split("\n");
    const named = errors.map((e) => Number(/\((\d+),\d+\)/.exec(e)?.[1]) - 1).map((i) => lines[i]?.trim().split(":")[0]);
    expect(new Set(named)).toEqual(new Set(["FileEntry", "FileList", "CurrentUser"]));
  },
  120_000,
);
