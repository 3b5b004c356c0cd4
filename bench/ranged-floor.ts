/**
 * The floor under a 1 MiB ranged GET (the "≤ 2×" goal): what the listener and the one fsync
 * a download's charge needs cost by themselves, before any of Stowage's own work. Three servers
 * in this process answer the same 1 MiB, side by side, each asked by the same client loop:
 *
 * - baseline: Bun.serve answering `Bun.file(path).slice(...)` (sendfile), as bench/storage.ts's;
 * - node:http: Bun's node:http (Stowage's listener, http/listen.ts, for Content-Length on streamed
 *   bodies) answering 1 MiB from memory with its length, in one `end`;
 * - node:http + fsync: the same after one fsync of a small file has completed (the charge's
 *   durable commit, on SQLite an fsync of the log in the thread pool).
 *
 * Prints the mean latency of each, what it adds to the baseline's and their ratio. The client and
 * the servers share one process (and its event loop), so the baseline's own time is about half of
 * bench/storage.ts's (where client and server are processes of their own): the milliseconds added
 * are what carries over, the ratio here overstates the floor there.
 *
 * Run: bun bench/ranged-floor.ts [--rounds 3] [--gets 300]   (--help: every option)
 */
import { closeSync, fsync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { benchArgs, intOption, loadAverage } from "./harness.ts";

const values = benchArgs("The floor under a 1 MiB ranged GET: node:http and one fsync against Bun.serve + Bun.file.", {
  rounds: { default: "3", help: "measured rounds" },
  gets: { default: "300", help: "GETs per server per round" },
});
const rounds = intOption(values, "rounds");
const gets = intOption(values, "gets");

const MiB = 1024 * 1024;
const FILE_MIB = 64;
const dir = mkdtempSync(join(tmpdir(), "stowage-bench-floor-"));
process.on("exit", () => rmSync(dir, { recursive: true, force: true }));

const path = join(dir, "data.bin");
const piece = new Uint8Array(MiB);
for (let at = 0; at < MiB; at += 65536) crypto.getRandomValues(piece.subarray(at, at + 65536));
const fd = openSync(path, "w");
for (let i = 0; i < FILE_MIB; i++) writeSync(fd, piece);
closeSync(fd);
const file = Bun.file(path);
const answer = Buffer.alloc(MiB, 7);
const journal = openSync(join(dir, "journal"), "w");

const baseline = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(request) {
    const start = Number(new URL(request.url).searchParams.get("at"));
    return new Response(file.slice(start, start + MiB), { status: 206 });
  },
});

async function nodeServer(withFsync: boolean): Promise<number> {
  const server = createServer((_req, res) => {
    const send = () => {
      res.writeHead(206, { "content-length": String(MiB) });
      res.end(answer);
    };
    if (!withFsync) return send();
    writeSync(journal, "x");
    fsync(journal, send);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}
const ports = { "node:http": await nodeServer(false), "node:http + fsync": await nodeServer(true) };

/** Mean ms per GET of `gets` sequential GETs, each read to its end. */
async function meanMs(url: (i: number) => string): Promise<number> {
  let total = 0;
  for (let i = 0; i < gets; i++) {
    const started = performance.now();
    const bytes = await (await fetch(url(i))).arrayBuffer();
    total += performance.now() - started;
    if (bytes.byteLength !== MiB) throw new Error(`got ${bytes.byteLength} bytes, not ${MiB}`);
  }
  return total / gets;
}

console.log(`ranged-floor: ${rounds} rounds + 1 warm-up of ${gets} GETs of 1 MiB per server; Bun ${Bun.version}, load average ${loadAverage()}`);
for (let round = 0; round <= rounds; round++) {
  const base = await meanMs((i) => `http://127.0.0.1:${baseline.port}/?at=${((i * 7919) % (FILE_MIB - 1)) * MiB + 4096}`);
  const rows: string[] = [];
  for (const [name, port] of Object.entries(ports)) {
    const ms = await meanMs(() => `http://127.0.0.1:${port}/`);
    rows.push(`${name} ${ms.toFixed(3)} ms (+${(ms - base).toFixed(3)} ms, ${(ms / base).toFixed(2)}×)`);
  }
  if (round > 0) console.log(`round ${round}: baseline ${base.toFixed(3)} ms; ${rows.join("; ")}`);
}
baseline.stop(true);
process.exit(0);
