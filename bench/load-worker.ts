/**
 * The HTTP load generator, run by `loadTest()` in harness.ts as its own Bun process: sharing an
 * event loop with the harness (or the server) would make the generator's own work show up as
 * the server's latency.
 *
 * `connections` loops each send one request at a time and await the whole body before the next,
 * so each loop holds one keep-alive connection (Bun's fetch reuses idle sockets by default) and
 * the number of requests in flight is exactly `connections` (a closed-loop test).
 *
 * With several URLs (`"url": [a, b, c]`), each request goes to the next one in turn (a round-robin
 * balancer in front of several gateways); each loop then keeps one keep-alive connection per URL.
 *
 * Usage (from harness.ts): bun bench/load-worker.ts '{"url":…,"durationMs":…,"connections":…}'
 * Prints one JSON line: { requests, errors, seconds, rps, p50Ms, p99Ms, maxMs, generatorCpu, firstError? }
 */
import { assertLoopback, percentile, type LoadTestOptions } from "./harness.ts";

/** One request taking longer than this counts as an error, so no loop outlives the test by much. */
const REQUEST_TIMEOUT_MS = 5000;

const opts = JSON.parse(process.argv[2] ?? "{}") as LoadTestOptions;
const urls = [opts.url].flat();
for (const url of urls) assertLoopback(url);
/** The next request's target when there are several: each request takes the next URL in turn. */
let turn = 0;

let requests = 0;
let errors = 0;
let firstError: string | undefined;
// Latencies in ms; a plain array is fine at the rates a 2-core machine reaches (≈10⁵ per run).
const latencies: number[] = [];

const started = performance.now();
const cpuBefore = process.cpuUsage();
const deadline = started + opts.durationMs;

async function loop(): Promise<void> {
  while (performance.now() < deadline) {
    const t0 = performance.now();
    try {
      const url = urls[turn++ % urls.length] as string;
      const res = await fetch(url, { method: opts.method ?? "GET", headers: opts.headers, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
      // Reading the body to its end is what returns the socket to the pool for the next request.
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      latencies.push(performance.now() - t0);
      requests++;
    } catch (err) {
      errors++;
      firstError ??= (err as Error).message;
      // A refused connection fails in microseconds; without a pause the loop would spin.
      await Bun.sleep(10);
    }
  }
}

await Promise.all(Array.from({ length: opts.connections }, loop));
// Divide by the time the loops really ran: the last requests finish a little after the deadline.
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
const sorted = Float64Array.from(latencies).sort();
const round = (n: number) => Math.round(n * 1000) / 1000;
console.log(
  JSON.stringify({
    requests,
    errors,
    seconds: round(seconds),
    rps: round(requests / seconds),
    p50Ms: round(percentile(sorted, 50)),
    p99Ms: round(percentile(sorted, 99)),
    maxMs: round(percentile(sorted, 100)),
    generatorCpu: round((cpu.user + cpu.system) / 1e6 / seconds),
    ...(firstError ? { firstError } : {}),
  }),
);
// Pooled keep-alive sockets would otherwise keep the process alive until they time out.
process.exit(0);
