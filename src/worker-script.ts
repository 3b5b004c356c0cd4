/**
 * Where a worker thread's script is, from source or inside the compiled binary. Bun finds a
 * `new Worker(url)` script in the binary only when it is an entrypoint of its own
 * (scripts/build.ts compiles every one listed here), and there each keeps its path under src/.
 * This module sits at src/ itself: from source its URL is src/worker-script.ts, in the binary
 * every module's `import.meta.url` is the binary's own at the root of its embedded files, so one
 * relative URL names the script either way.
 *
 * @example
 *   const worker = new Worker(workerScript("db/checkpoint-worker.ts"))
 */

/** Every worker script of the server, by its path under src/. */
export const WORKER_SCRIPTS = ["db/checkpoint-worker.ts", "chain/evm/chain-worker.ts", "chain/evm/sim-worker.ts", "ops/snapshot-worker.ts"] as const;

export type WorkerScript = (typeof WORKER_SCRIPTS)[number];

/** The URL to hand `new Worker()` for one of WORKER_SCRIPTS. */
export function workerScript(path: WorkerScript): string {
  return new URL(`./${path}`, import.meta.url).href;
}
