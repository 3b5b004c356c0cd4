/**
 * The check that keeps e2e tests off a stale `dist/stowage` (test/support/fresh-build.ts), on a
 * throwaway "project": a built file, its sources with set modification times, and a shell build
 * step that counts its runs. The lock is the real flock(1) between real processes.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureFresh, staleReason, STOWAGE_BUILD, type BuildSpec } from "../support/fresh-build.ts";
import { tempDir } from "../support/tmp.ts";

const now = Date.now() / 1000;
const setTime = (path: string, secondsAgo: number) => utimesSync(path, now - secondsAgo, now - secondsAgo);

/** A project whose binary was built 100 s ago from sources last changed 200 s ago. */
function project(build = "echo run >> runs.log; sleep 0.3; touch out/app") {
  const root = tempDir("fresh-build");
  mkdirSync(join(root, "src", "deep"), { recursive: true });
  mkdirSync(join(root, "out"));
  for (const f of ["src/a.ts", "src/deep/b.ts", "package.json", "out/app"]) writeFileSync(join(root, f), f);
  for (const p of ["src/a.ts", "src/deep/b.ts", "src/deep", "src", "package.json"]) setTime(join(root, p), 200);
  setTime(join(root, "out/app"), 100);
  const spec: BuildSpec = {
    binary: join(root, "out/app"),
    inputs: [join(root, "src"), join(root, "package.json"), join(root, "bun.lock")], // no bun.lock: skipped
    build: ["sh", "-c", build],
    cwd: root,
    lock: join(root, "out/.lock"),
  };
  const runs = () => (existsSync(join(root, "runs.log")) ? readFileSync(join(root, "runs.log"), "utf8").split("\n").filter(Boolean).length : 0);
  return { root, spec, runs };
}

const quiet = () => {};

describe("staleReason", () => {
  test("a binary newer than all its inputs is fresh", () => {
    expect(staleReason(project().spec)).toBeUndefined();
  });

  test("a missing binary, an edited file deep in a source folder, a deleted source, an edited package.json: stale, naming why", () => {
    const a = project();
    rmSync(a.spec.binary);
    expect(staleReason(a.spec)).toContain("does not exist");

    const b = project();
    setTime(join(b.root, "src/deep/b.ts"), 50);
    expect(staleReason(b.spec)).toBe(`${join(b.root, "src/deep/b.ts")} changed after ${b.spec.binary} was built`);

    const c = project();
    rmSync(join(c.root, "src/deep/b.ts")); // only the folder's time tells
    expect(staleReason(c.spec)).toStartWith(join(c.root, "src/deep"));

    const d = project();
    setTime(join(d.root, "package.json"), 1);
    expect(staleReason(d.spec)).toStartWith(join(d.root, "package.json"));
  });

  test("the real binary's inputs are its sources, package.json and bun.lock", () => {
    for (const f of ["src", "package.json", "bun.lock", "scripts/build.ts"]) expect(STOWAGE_BUILD.inputs).toContain(join(STOWAGE_BUILD.cwd, f));
  });
});

describe("ensureFresh", () => {
  test("a fresh binary is used as it is: no build", async () => {
    const p = project("exit 1");
    await ensureFresh(p.spec, quiet);
    expect(p.runs()).toBe(0);
  });

  test("a stale binary is built, and is fresh afterwards", async () => {
    const p = project();
    setTime(join(p.root, "src/a.ts"), 10);
    const said: string[] = [];
    await ensureFresh(p.spec, (l) => said.push(l));
    expect(p.runs()).toBe(1);
    expect(said.join("\n")).toContain(`${join(p.root, "src/a.ts")} changed after`);
    expect(staleReason(p.spec)).toBeUndefined();
    await ensureFresh(p.spec, quiet);
    expect(p.runs()).toBe(1);
  });

  test("callers in parallel (each through its own process under the lock) build once", async () => {
    const p = project();
    rmSync(p.spec.binary);
    await Promise.all(Array.from({ length: 3 }, () => ensureFresh(p.spec, quiet)));
    expect(p.runs()).toBe(1);
    expect(staleReason(p.spec)).toBeUndefined();
  });

  test("a failing build fails with why it was needed and the build's output; one that leaves it stale fails too", async () => {
    const broken = project("echo 'src/a.ts:1 syntax error' >&2; exit 3");
    setTime(join(broken.root, "src/a.ts"), 10);
    const err = await ensureFresh(broken.spec, quiet).catch((e: unknown) => e as Error);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toContain("changed after");
    expect((err as Error).message).toContain("building it failed (exit 3)");
    expect((err as Error).message).toContain("src/a.ts:1 syntax error");

    const idle = project("true");
    setTime(join(idle.root, "src/a.ts"), 10);
    await expect(ensureFresh(idle.spec, quiet)).rejects.toThrow("succeeded, but");
  });
});
