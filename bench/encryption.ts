/**
 * Client-side encryption's cost (D20): encrypted uploads and downloads against plain
 * ones, through the same real server and SDK, in alternation. Times are end to end as a user
 * lives them: an upload from the call to its answer (sealing and the hash pass included), a
 * download from the call to its last (decrypted) byte. The goal in the issue: encrypted ≥ 0.8×
 * plain. Beside MiB/s it reports CPU ms per MiB of the client and of the server, and their ratio,
 * which a busy machine moves far less.
 *
 * Run: bun bench/encryption.ts [--rounds 3] [--size-mib 64] [--backend dfs|ipfs] [--aead auto|native|libsodium|noble]
 *      [--seal once|twice] [--cli COMMAND]
 *
 * `--seal twice` gives the SDK no spool: its upload then seals in the hash pass and again in the
 * upload pass (what it did before sealing once; what it still does on Node).
 *
 * `--cli` measures the command line instead: `stowage put FILE --encrypt` against `stowage put
 * FILE --plain`, then `get` of each, every one a fresh process (log-in included, as a user runs
 * it), in alternation; its CPU is the command's own (rusage at exit). COMMAND is the
 * stowage to run (dist/stowage; a `.ts` path runs under this Bun, so an older checkout's
 * src/main.ts gives a before figure).
 *
 * Current figures, with the machine's load: bench/README.md ("encryption").
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { payloadAead, usePayloadAead } from "../src/sdk/aead.ts";
import { useNativeAead } from "../src/sdk/aead-native.ts";
import "../src/sdk/bun.ts";
import { connectEncryption } from "../src/sdk/encryption.ts";
import { connectStorage } from "../src/sdk/storage.ts";
import { benchArgs, commandDuration, fmt, processCpuSeconds, startServer } from "./harness.ts";

const values = benchArgs("Encrypted uploads and downloads against plain ones, through the same server and SDK, side by side (the goal: 0.8× of plain).", {
  rounds: { default: "3", help: "measured rounds" },
  "size-mib": { default: "64", help: "file size in MiB" },
  backend: { default: "dfs", help: "dfs | ipfs" },
  aead: { default: "auto", help: "payload AEAD: auto (the SDK's default on Bun: native where it loads) | native (system libsodium) | libsodium (WASM: Node's and browsers' default) | noble" },
  seal: { default: "once", help: "once | twice (the SDK without a spool seals in the hash pass and again)" },
  cli: { help: "measure `stowage put/get` run as COMMAND (dist/stowage, or a src/main.ts) instead of the SDK" },
});
const cliArg = values.cli;
// auto: what the SDK package chooses on Bun by itself (its entry src/sdk/bun.ts, imported above:
// the system's libsodium where it loads, else its WASM build), as the command line does.
if (values.aead === "noble" || values.aead === "libsodium") usePayloadAead(values.aead);
else if (values.aead === "native" && !useNativeAead()) throw new Error("the system's libsodium does not load here");
const rounds = Number(values.rounds);
const MiB = 2 ** 20;
const size = Number(values["size-mib"]) * MiB;
const kind = values.backend as "dfs" | "ipfs";
const ROOT = join(import.meta.dir, "..");
const stowageCmd = [process.execPath, join(ROOT, "src", "main.ts")];
const dir = mkdtempSync(join(tmpdir(), "bench-enc-"));
const dataDir = join(dir, "data");
const env = { ...process.env, STOWAGE_DATA_DIR: dataDir };

const server = await startServer([...stowageCmd, "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDir, "--log-level", "error", "--ipfs-listen", "/ip4/127.0.0.1/tcp/0", "--metrics-listen", "off", "--s3-api-port", "0"], { env, cwd: ROOT, timeoutMs: 60_000 });
try {
  const userKey = generatePrivateKey();
  const account = privateKeyToAccount(userKey);
  const store = await connectStorage({ baseUrl: server.url, account });
  await commandDuration([...stowageCmd, "admin", "fund", account.address, "1", "--data-dir", dataDir], { env, cwd: ROOT })();
  for (const quota of [["--space", "1024GiB"], ["--traffic", "1024GiB"]]) {
    await commandDuration([...stowageCmd, "admin", "grant", "--did", store.did, ...quota, "--data-dir", dataDir], { env, cwd: ROOT })();
  }
  await store.login();
  // --seal twice: no spool, so the upload seals in its hash pass and again in its upload pass (the SDK before fix; still Node's way).
  const enc = await connectEncryption({ baseUrl: server.url, store, account, ...(values.seal === "twice" ? { spool: null } : {}) });
  await enc.publish(); // once, outside the timings (the first encrypted upload would do it)

  const path = join(dir, "file.bin");
  // Bytes no earlier round or run stored: dfs deduplicates chunks, so a plain file that repeated
  // one (as `block ^ round ^ MiB index` did across rounds) was cheaper to store than its
  // never-repeating ciphertext, which flattered plain uploads.
  const freshFile = () => {
    const block = crypto.getRandomValues(new Uint8Array(MiB));
    const file = new Uint8Array(size);
    for (let at = 0; at < size; at += MiB) file.set(block.map((b, i) => b ^ ((at / MiB + i) & 255)), at);
    return file;
  };
  const drain = async (s: ReadableStream<Uint8Array>) => {
    let n = 0;
    for await (const c of s) n += c.length;
    return n;
  };
  if (cliArg !== undefined) {
    const cli = cliArg.endsWith(".ts") ? [process.execPath, cliArg] : [cliArg];
    const userEnv = { ...env, STOWAGE_USER_KEY: userKey, STOWAGE_GATEWAY: server.url };
    /** One command: its wall time, its own CPU (rusage at exit) and the server's meanwhile, per MiB. */
    const run = async (args: string[]) => {
      const sv = processCpuSeconds(server.proc.pid);
      const t = performance.now();
      const proc = Bun.spawn([...cli, ...args], { env: userEnv, cwd: ROOT, stdout: "pipe", stderr: "pipe" });
      const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      const ms = performance.now() - t;
      if (code !== 0) throw new Error(`stowage ${args.join(" ")} exited ${code}: ${err}`);
      const usage = proc.resourceUsage()?.cpuTime;
      return { out, rate: size / MiB / (ms / 1000), client: Number(usage?.total ?? 0) / 1000 / (size / MiB), server: ((processCpuSeconds(server.proc.pid) - sv) * 1000) / (size / MiB) };
    };
    type Op = "plainUp" | "encUp" | "plainDown" | "encDown";
    const r: Record<Op, { rate: number[]; client: number[]; server: number[] }> = { plainUp: { rate: [], client: [], server: [] }, encUp: { rate: [], client: [], server: [] }, plainDown: { rate: [], client: [], server: [] }, encDown: { rate: [], client: [], server: [] } };
    const keep = (op: Op, m: { rate: number; client: number; server: number }) => {
      r[op].rate.push(m.rate);
      r[op].client.push(m.client);
      r[op].server.push(m.server);
    };
    const got = join(dir, "got.bin");
    for (let round = 0; round < rounds; round++) {
      writeFileSync(path, freshFile());
      for (const encrypted of round % 2 ? [true, false] : [false, true]) {
        const put = await run(["put", path, "--to", kind, "--name", encrypted ? "ce.bin" : "cp.bin", "--json", ...(encrypted ? ["--encrypt"] : ["--plain"])]);
        keep(encrypted ? "encUp" : "plainUp", put);
        const cid = (JSON.parse(put.out) as { Cid: string }).Cid;
        keep(encrypted ? "encDown" : "plainDown", await run(["get", cid, "--from", kind, "--out", got]));
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
    const line = (what: string, plain: Op, enc: Op) => {
      const ratio = median(r[enc].rate) / median(r[plain].rate);
      const cpuRatio = (median(r[plain].client) + median(r[plain].server)) / (median(r[enc].client) + median(r[enc].server));
      console.log(`${what}  plain ${fmt(median(r[plain].rate))}  encrypted ${fmt(median(r[enc].rate))}  ratio ${ratio.toFixed(2)}×  (runs ${r[enc].rate.map(fmt).join(", ")} / ${r[plain].rate.map(fmt).join(", ")})`);
      console.log(`     CPU plain client ${median(r[plain].client).toFixed(1)} + server ${median(r[plain].server).toFixed(1)}, encrypted client ${median(r[enc].client).toFixed(1)} + server ${median(r[enc].server).toFixed(1)}: CPU ratio ${cpuRatio.toFixed(2)}×`);
      return ratio;
    };
    console.log(`command line (${cliArg}), ${kind}, ${values["size-mib"]} MiB × ${rounds} (median MiB/s, each a fresh process; CPU ms per MiB), load ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
    const up = line("put", "plainUp", "encUp");
    const down = line("get", "plainDown", "encDown");
    console.log(`goal ≥ 0.8×: ${up >= 0.8 && down >= 0.8 ? "met" : "not met"}`);
  } else {
    type Op = "plainUp" | "encUp" | "plainDown" | "encDown";
    const rates: Record<Op, number[]> = { plainUp: [], encUp: [], plainDown: [], encDown: [] };
    // CPU ms per MiB of this process (the SDK: sealing, hashing, sending) and of the server: steadier
    // than MiB/s on shared cores, and where an encrypted transfer's extra cost shows.
    const cpu: Record<Op, { client: number[]; server: number[] }> = { plainUp: { client: [], server: [] }, encUp: { client: [], server: [] }, plainDown: { client: [], server: [] }, encDown: { client: [], server: [] } };
    const clientCpu = () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1e6;
    };
    const timed = async <T>(op: Op, run: () => Promise<T>): Promise<T> => {
      const [t, c, sv] = [performance.now(), clientCpu(), processCpuSeconds(server.proc.pid)];
      const out = await run();
      rates[op].push(size / MiB / ((performance.now() - t) / 1000));
      cpu[op].client.push(((clientCpu() - c) * 1000) / (size / MiB));
      cpu[op].server.push(((processCpuSeconds(server.proc.pid) - sv) * 1000) / (size / MiB));
      return out;
    };
    for (let round = 0; round < rounds; round++) {
      const file = freshFile();
      writeFileSync(path, file);
      for (const encrypted of round % 2 ? [true, false] : [false, true]) {
        const entry = await timed(encrypted ? "encUp" : "plainUp", () => (encrypted ? enc.upload(kind, path, { name: "e.bin" }) : store.upload(kind, path, { name: "p.bin" })));
        const n = await timed(encrypted ? "encDown" : "plainDown", async () => (encrypted ? drain((await enc.download(kind, entry.Cid)).body) : drain((await store.download(kind, entry.Cid)).body ?? new Blob([]).stream())));
        if (n !== size) throw new Error(`downloaded ${n} bytes, not ${size}`);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
    const up = median(rates.encUp) / median(rates.plainUp);
    const down = median(rates.encDown) / median(rates.plainDown);
    const ms = (op: Op) => `client ${median(cpu[op].client).toFixed(1)} + server ${median(cpu[op].server).toFixed(1)}`;
    const cpuRatio = (plain: Op, encrypted: Op) => (median(cpu[plain].client) + median(cpu[plain].server)) / (median(cpu[encrypted].client) + median(cpu[encrypted].server));
    console.log(`${kind}, ${values["size-mib"]} MiB × ${rounds} (median MiB/s; CPU ms per MiB), payload AEAD ${(await payloadAead()).name}, sealed ${values.seal}, load ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
    console.log(`upload    plain ${fmt(median(rates.plainUp))}  encrypted ${fmt(median(rates.encUp))}  ratio ${up.toFixed(2)}×  (runs ${rates.encUp.map(fmt).join(", ")} / ${rates.plainUp.map(fmt).join(", ")})`);
    console.log(`          CPU plain ${ms("plainUp")}, encrypted ${ms("encUp")}: CPU ratio ${cpuRatio("plainUp", "encUp").toFixed(2)}×`);
    console.log(`download  plain ${fmt(median(rates.plainDown))}  encrypted ${fmt(median(rates.encDown))}  ratio ${down.toFixed(2)}×  (runs ${rates.encDown.map(fmt).join(", ")} / ${rates.plainDown.map(fmt).join(", ")})`);
    console.log(`          CPU plain ${ms("plainDown")}, encrypted ${ms("encDown")}: CPU ratio ${cpuRatio("plainDown", "encDown").toFixed(2)}×`);
    console.log(`goal ≥ 0.8×: ${up >= 0.8 && down >= 0.8 ? "met" : "not met"}`);
  }
} finally {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
