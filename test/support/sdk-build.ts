/**
 * The SDK package's build (scripts/build-sdk.ts → packages/sdk/dist), once per test process: the
 * SDK's tests (its Node, browser and packed-install tests) all read the same dist, and a build
 * takes most of a minute on a loaded 2-core machine. `bun test` runs every file in one process,
 * so the files share the one promise.
 */
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..");
let built: Promise<void> | undefined;

export function buildSdk(): Promise<void> {
  built ??= (async () => {
    const proc = Bun.spawn([process.execPath, join(root, "scripts", "build-sdk.ts")], { cwd: root, stdout: "pipe", stderr: "pipe", env: { ...process.env, BUN_BE_BUN: "1" } });
    const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0 || stderr.includes("error")) throw new Error(`scripts/build-sdk.ts failed (exit ${code}): ${stderr}`);
  })();
  return built;
}
