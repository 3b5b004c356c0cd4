/**
 * What one object per 1 MiB chunk costs on Ceph RGW, with nothing of Stowage but its S3 blob
 * store (src/blob/s3.ts): the same bytes put and got as 1 MiB objects through `S3BlobStore`
 * (`put`, `bytes`, N in flight) and as one object through Bun's `S3Client` (`write` of the whole
 * buffer, Bun's default multipart, and one streamed `bytes()`). CPU ms per MiB of this process (the
 * client: signing, HTTP, copies) and of this run's Ceph daemons (radosgw, OSD, mon), plus MiB/s.
 * It separates the floor set by the key layout (D15: `dfs/<chunk Cid>`, one object per chunk)
 * from what the gateway adds on top (bench/storage.ts --s3 measures the whole).
 *
 * Run: bun bench/s3-blobs.ts [--size-mib 64] [--rounds 2] [--inflight 1,3,6] [--object-mib 1,4]
 */
import { randomBytes } from "node:crypto";
import { S3BlobStore } from "../src/blob/s3.ts";
import { cephRgw } from "../test/support/ceph.ts";
import { benchArgs, cephCpuMs, cpuMs, loadAverage } from "./harness.ts";

const args = benchArgs("D15's 1 MiB objects on Ceph RGW through the S3 blob store alone, against one object through Bun's S3Client: CPU per MiB of the client and of Ceph.", {
  "size-mib": { default: "64", help: "bytes per measurement, in MiB" },
  rounds: { default: "2", help: "measured rounds" },
  inflight: { default: "1,3,6", help: "requests in flight to try, comma-separated" },
  "object-mib": { default: "1", help: "object sizes to try in MiB, comma-separated (1 is D15's layout)" },
});
const sizeMiB = Number(args["size-mib"]);
const rounds = Number(args.rounds);
const inflight = args.inflight.split(",").map(Number);
/** Object sizes to try: 1 is D15's layout; larger ones show what packing chunks into bigger objects would save. */
const objectMiBs = args["object-mib"].split(",").map(Number);
const MiB = 1024 * 1024;


const rgw = await cephRgw();
const prefix = rgw.prefix();
const store = new S3BlobStore({ endpoint: rgw.endpoint, bucket: rgw.bucket, region: rgw.region, prefix, accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey });
const client = rgw.client();

/** Runs `what` and answers MiB/s and CPU ms per MiB of this process and of Ceph. */
async function measured(what: () => Promise<unknown>) {
  const before = { self: cpuMs("self"), ceph: cephCpuMs(), t: performance.now() };
  await what();
  const s = (performance.now() - before.t) / 1000;
  return { mibps: sizeMiB / s, client: (cpuMs("self") - before.self) / sizeMiB, ceph: (cephCpuMs() - before.ceph) / sizeMiB };
}

/** `n` workers taking indexes 0..count-1 in turn. */
async function pool(count: number, n: number, each: (i: number) => Promise<unknown>) {
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < count) await each(next++);
  }));
}

const rows: Record<string, { mibps: number; client: number; ceph: number }[]> = {};
const add = (name: string, r: { mibps: number; client: number; ceph: number }) => (rows[name] ??= []).push(r);
let round = 0;
try {
  for (let r = 0; r <= rounds; r++) {
    const bytes = randomBytes(sizeMiB * MiB);
    const keep = r > 0; // round 0 warms up
    for (const o of objectMiBs) {
      const count = Math.ceil(sizeMiB / o);
      const chunks = Array.from({ length: count }, (_, i) => bytes.subarray(i * o * MiB, (i + 1) * o * MiB));
      for (const n of inflight) {
        const base = `r${round++}/`;
        const up = await measured(() => pool(count, n, (i) => store.put(`${base}${i}`, chunks[i]!)));
        const down = await measured(() => pool(count, n, (i) => store.bytes(`${base}${i}`)));
        if (keep) add(`${o} MiB objects, ${n} in flight, put`, up), add(`${o} MiB objects, ${n} in flight, get`, down);
        await pool(count, 4, (i) => store.delete(`${base}${i}`));
      }
    }
    const key = `${prefix}whole-${round++}`;
    const up = await measured(() => client.write(key, bytes));
    const down = await measured(() => client.file(key).bytes());
    if (keep) add("one object (S3Client), put", up), add("one object (S3Client), get", down);
    await client.delete(key);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  console.log(`${sizeMiB} MiB, ${rounds} rounds (medians); CPU ms per MiB of this process (client) and of this run's Ceph daemons`);
  console.log(`${"".padEnd(38)} ${"MiB/s".padStart(8)} ${"client".padStart(8)} ${"ceph".padStart(8)} ${"sum".padStart(8)}`);
  for (const [name, rs] of Object.entries(rows)) {
    const [m, c, k] = [median(rs.map((x) => x.mibps)), median(rs.map((x) => x.client)), median(rs.map((x) => x.ceph))];
    console.log(`${name.padEnd(38)} ${m.toFixed(1).padStart(8)} ${c.toFixed(2).padStart(8)} ${k.toFixed(2).padStart(8)} ${(c + k).toFixed(2).padStart(8)}`);
  }
  console.log(`load average: ${loadAverage()}`);
} finally {
  await rgw.stop();
}
