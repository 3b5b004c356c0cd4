/**
 * Waiting for state that another process reaches at its own pace (a server's indexer poll, its
 * sweep, a killed upload's objects): re-read until it holds, or fail naming what was awaited and
 * what was seen last. A bounded poll, never a fixed sleep.
 *
 * @example
 *   const hits = await until("search", () => dir.search("atlas"), (h) => h.length > 0, 10_000)
 *   await until("the sweep", async () => (await listKeys()).length === 0, Boolean, 30_000)
 */
export async function until<T>(what: string, read: () => T | Promise<T>, ok: (v: T) => boolean, timeoutMs: number, pollMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(v)} after ${timeoutMs} ms`);
    await Bun.sleep(pollMs);
  }
}
