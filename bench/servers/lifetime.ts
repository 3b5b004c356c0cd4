/**
 * How a bench's child server ends: on SIGTERM or SIGINT (the harness's `stop`), and at EOF of its
 * stdin, which the harness holds open and never writes to, so that a harness killed outright takes
 * its children with it. `stop` runs once, then the process exits.
 *
 * @example
 *   console.log(`listening on ${url}`)
 *   await runUntilStopped(async () => {
 *     await server.stop()
 *     rmSync(dir, { recursive: true, force: true })
 *   })
 */
export async function runUntilStopped(stop: () => Promise<unknown>): Promise<void> {
  let stopping = false;
  const shutdown = async () => {
    if (stopping) return;
    stopping = true;
    try {
      await stop();
    } finally {
      process.exit(0);
    }
  };
  process.on("SIGTERM", () => void shutdown());
  process.on("SIGINT", () => void shutdown());
  for await (const _ of Bun.stdin.stream()) {
    // Never written to: only EOF ends this loop.
  }
  await shutdown();
}
