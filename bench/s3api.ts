/**
 * The S3 API (D18) against a plain S3 server: Debian's aws-cli `cp` of a file of fresh random bytes
 * up and down through Stowage's S3 port (the compiled binary, its content on a one-node Ceph RGW),
 * against Bun's own `S3Client` putting and getting the same bytes straight to the same RGW. The
 * ratio says what the S3 API costs on top of the object store itself, a client's point of view
 * included: aws-cli is what people use, and its own work (a Python process, 8 MiB multipart parts
 * hashed with SHA-256 and MD5 before sending, 10 threads) is part of what the Stowage side times.
 * Both sides run on this machine in alternation, in the same minute (bench/README.md: the ratio of
 * one run is what we report).
 *
 * With `--aws-baseline` the baseline is aws-cli itself straight to the RGW instead: that ratio
 * leaves the client's own cost out and shows the gateway's alone.
 *
 * CPU per MiB (utime + stime from /proc, steady on a busy machine where MiB/s is not): Stowage's
 * server, this run's Ceph daemons and aws-cli's processes, for each side's upload and download.
 *
 * Run: bun bench/s3api.ts [--rounds 3] [--size-mib 256] [--aws-baseline]   (bun run build first: dist/stowage)
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { keysClient } from "../src/sdk/keys.ts";
import { connectStorage } from "../src/sdk/storage.ts";
import { cephRgw, stowageS3Env } from "../test/support/ceph.ts";
import { freePort } from "../test/support/procs.ts";
import { awsCli, ensureS3Clients } from "../test/support/s3-clients.ts";
import { benchArgs, cephCpuMs, compareMany, cpuMs, loadAverage } from "./harness.ts";

const args = benchArgs("The S3 API: aws-cli cp up and down through Stowage's S3 port (compiled binary, content on Ceph RGW) against Bun's S3Client straight to the RGW.", {
  rounds: { default: "3", help: "measured rounds" },
  "size-mib": { default: "256", help: "file size in MiB" },
  "aws-baseline": { boolean: true, help: "the baseline is aws-cli straight to the RGW (the gateway's cost alone)" },
});
// After the arguments: importing it builds dist/stowage when the sources changed, which --help must not wait for.
const { runBinary, startBinary } = await import("../test/support/binary.ts");
const rounds = Number(args.rounds);
const sizeMiB = Number(args["size-mib"]);
const MiB = 1024 * 1024;

await ensureS3Clients();
const work = mkdtempSync(join(tmpdir(), "bench-s3api-"));
const rgw = await cephRgw();
process.stderr.write(`ceph rgw at ${rgw.endpoint}\n`);
const port = freePort();
const dataDir = join(work, "data");
const server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], { ...stowageS3Env(rgw, rgw.prefix()), STOWAGE_S3_API_PORT: String(port), STOWAGE_LOG_LEVEL: "warn" }, 60_000);
const endpoint = `http://127.0.0.1:${port}`;
try {
  const store = await connectStorage({ baseUrl: server.url, account: privateKeyToAccount(generatePrivateKey()) });
  await store.login();
  for (const [kind, bytes] of [["--space", "64GiB"], ["--traffic", "1TiB"]]) {
    const grant = await runBinary(["admin", "grant", "--did", store.did, kind as string, bytes as string, "--data-dir", dataDir]);
    if (grant.code !== 0) throw new Error(`admin grant failed: ${grant.stderr}`);
  }
  while ((await store.space()).SizeByte === 0 || (await store.traffic()).SizeByte === 0) await Bun.sleep(200);
  const key = await keysClient({ baseUrl: server.url, store }).create();
  const aws = awsCli(endpoint, key);
  const direct = rgw.client();
  const awsRgw = awsCli(rgw.endpoint, rgw);
  const prefix = rgw.prefix();

  const file = join(work, "file.bin");
  const back = join(work, "back.bin");
  let n = 0;
  /** A fresh file per round: no side reads bytes another just wrote through a cache of its own. */
  const fresh = () => {
    const bytes = randomBytes(sizeMiB * MiB);
    writeFileSync(file, bytes);
    return createHash("md5").update(bytes).digest("hex");
  };
  const md5Of = async (path: string) => createHash("md5").update(new Uint8Array(await Bun.file(path).arrayBuffer())).digest("hex");
  const mibps = (ms: number) => sizeMiB / (ms / 1000);

  /** CPU ms per MiB by process and direction, summed over the measured rounds (the warm-up too: same per MiB). */
  const cpu: Record<string, Record<string, number[]>> = {};
  let side = "";
  let direction = "";
  const timed = async (what: () => Promise<unknown>) => {
    const before = { server: cpuMs(server.proc.pid), ceph: cephCpuMs(), client: cpuMs("self", true) };
    const t = performance.now();
    await what();
    const ms = performance.now() - t;
    const after = { server: cpuMs(server.proc.pid), ceph: cephCpuMs(), client: cpuMs("self", true) };
    const row = (cpu[`${side} ${direction}`] ??= {});
    for (const k of ["server", "ceph", "client"] as const) (row[k] ??= []).push((after[k] - before[k]) / sizeMiB);
    return ms;
  };

  await compareMany({
    name: `${sizeMiB} MiB up and down`,
    rounds,
    labels: { subject: "aws→stowage", baseline: args["aws-baseline"] ? "aws→rgw" : "bun→rgw" },
    metrics: { up: { unit: "MiB/s", higherIsBetter: true, label: "upload" }, down: { unit: "MiB/s", higherIsBetter: true, label: "download" } },
    async subject() {
      const md5 = fresh();
      const key = `bench/${n++}.bin`;
      [side, direction] = ["aws→stowage", "up"];
      const up = await timed(async () => {
        const r = await aws(["s3", "cp", "--only-show-errors", file, `s3://dfs/${key}`]);
        if (r.code !== 0) throw new Error(`aws s3 cp up failed: ${r.stderr}`);
      });
      direction = "down";
      const down = await timed(async () => {
        const r = await aws(["s3", "cp", "--only-show-errors", `s3://dfs/${key}`, back]);
        if (r.code !== 0) throw new Error(`aws s3 cp down failed: ${r.stderr}`);
      });
      if ((await md5Of(back)) !== md5) throw new Error("aws s3 cp brought back other bytes");
      await aws(["s3", "rm", "--only-show-errors", `s3://dfs/${key}`]);
      return { up: mibps(up), down: mibps(down) };
    },
    async baseline() {
      const md5 = fresh();
      const key = `${prefix}${n++}.bin`;
      [side, direction] = [args["aws-baseline"] ? "aws→rgw" : "bun→rgw", "up"];
      if (args["aws-baseline"]) {
        const target = `s3://${rgw.bucket}/${key}`;
        const up = await timed(async () => {
          const r = await awsRgw(["s3", "cp", "--only-show-errors", file, target]);
          if (r.code !== 0) throw new Error(`aws s3 cp up to the RGW failed: ${r.stderr}`);
        });
        direction = "down";
        const down = await timed(async () => {
          const r = await awsRgw(["s3", "cp", "--only-show-errors", target, back]);
          if (r.code !== 0) throw new Error(`aws s3 cp down from the RGW failed: ${r.stderr}`);
        });
        if ((await md5Of(back)) !== md5) throw new Error("aws s3 cp from the RGW brought back other bytes");
        await direct.delete(key);
        return { up: mibps(up), down: mibps(down) };
      }
      const up = await timed(() => direct.write(key, Bun.file(file)));
      direction = "down";
      const down = await timed(() => Bun.write(back, direct.file(key)));
      if ((await md5Of(back)) !== md5) throw new Error("S3Client brought back other bytes");
      await direct.delete(key);
      return { up: mibps(up), down: mibps(down) };
    },
  });
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  console.log("CPU ms per MiB (median of rounds, warm-up included): server = Stowage, ceph = radosgw + ceph-osd + ceph-mon of this run, client = aws-cli (or this process for bun→rgw)");
  for (const [what, row] of Object.entries(cpu)) console.log(`  ${what.padEnd(18)} ${Object.entries(row).map(([k, xs]) => `${k} ${median(xs).toFixed(1)}`).join("  ")}`);
  console.log(`load average: ${loadAverage()}`);
} finally {
  await server.stop();
  await rgw.stop();
  rmSync(work, { recursive: true, force: true });
}
