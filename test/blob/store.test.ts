/**
 * One contract, two blob stores (DESIGN.md D15): every test here runs against local files and
 * against a real Ceph RGW through Bun's S3Client, so the storage code above can use either
 * without knowing which. The S3 store of each test has its own key prefix in the shared cluster.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { batchOf } from "../../src/blob/store.ts";
import { BlobError, type BlobStore, claimants, claimDeployment, DEPLOYMENT_PREFIX, LocalBlobStore, localBlobRoot, openBlobStore, S3BlobStore } from "../../src/blob/index.ts";
import { cephRgw, type Rgw } from "../support/ceph.ts";
import { tempDir } from "../support/tmp.ts";

setDefaultTimeout(60_000);

const MiB = 2 ** 20;
/** Bun's smallest multipart part: a 5 MiB + 3 object is two parts, the second of 3 bytes. */
const PART = 5 * MiB;

/** `bytes` as a stream of odd-sized chunks; with `failAfter`, the stream errors once that many
 * bytes have been handed out, as a client that disconnects mid-upload does. */
function streamOf(bytes: Uint8Array, o: { chunk?: number; failAfter?: number } = {}): ReadableStream<Uint8Array> {
  const chunk = o.chunk ?? 64 * 1024 + 7;
  let at = 0;
  return new ReadableStream({
    pull(ctl) {
      if (o.failAfter !== undefined && at >= o.failAfter) return ctl.error(new Error("source broke"));
      if (at >= bytes.length) return ctl.close();
      const end = Math.min(bytes.length, at + chunk, o.failAfter ?? Infinity);
      ctl.enqueue(bytes.slice(at, end));
      at = end;
    },
  });
}

async function read(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

async function caught(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error("expected a rejection");
}

async function blobCode(p: Promise<unknown>): Promise<string> {
  const e = await caught(p);
  expect(e).toBeInstanceOf(BlobError);
  return (e as BlobError).code;
}

async function keys(store: BlobStore, prefix: string, pageSize?: number): Promise<string[]> {
  const out: string[] = [];
  for await (const k of store.list(prefix, { pageSize })) out.push(k);
  return out.sort();
}

/** Runs `fn` over `items`, `n` at a time. */
async function pool<T>(n: number, items: T[], fn: (item: T) => Promise<unknown>): Promise<void> {
  const queue = [...items];
  await Promise.all(Array.from({ length: n }, async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
  }));
}

interface Impl {
  name: string;
  /** A new, empty store (its own folder, or its own key prefix). */
  fresh(): Promise<BlobStore>;
  /** Names of half-written leftovers a failed put might leave (temp files); none on S3. */
  leftovers(store: BlobStore): Promise<string[]>;
}

let rgw: Rgw;
const s3Store = (prefix = rgw.prefix(), o: { secretAccessKey?: string; endpoint?: string; bucket?: string } = {}) =>
  new S3BlobStore({ endpoint: o.endpoint ?? rgw.endpoint, bucket: o.bucket ?? rgw.bucket, region: rgw.region, prefix, accessKeyId: rgw.accessKeyId, secretAccessKey: o.secretAccessKey ?? rgw.secretAccessKey, partSize: PART, queueSize: 2 });

async function walkNames(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) if (e.isFile()) out.push(e.name);
  return out;
}

const impls: Impl[] = [
  {
    name: "local files",
    fresh: async () => new LocalBlobStore(tempDir("blob")),
    leftovers: async (store) => (await walkNames((store as LocalBlobStore).root)).filter((n) => n.includes(".tmp-")),
  },
  {
    name: "Ceph RGW through S3Client",
    fresh: async () => s3Store(),
    leftovers: async () => [],
  },
];

for (const impl of impls) {
  describe(impl.name, () => {
    let store: BlobStore;
    beforeAll(async () => {
      // Starting Ceph (and installing it on a fresh machine) is the slow part of this file.
      if (impl.name !== "local files") rgw = await cephRgw();
      store = await impl.fresh();
    }, 300_000);

    test("put and get are byte-exact: 0 bytes, 1 byte, 5 MiB + 3 streamed", async () => {
      const big = randomBytes(PART + 3);
      const cases: [string, Uint8Array, boolean][] = [
        ["empty", new Uint8Array(0), false],
        ["empty-streamed", new Uint8Array(0), true],
        ["one", Uint8Array.of(0xa5), false],
        ["one-streamed", Uint8Array.of(0x5a), true],
        ["big-streamed", big, true],
        ["big-bytes", big, false],
      ];
      for (const [key, bytes, streamed] of cases) {
        expect(await store.put(`exact/${key}`, streamed ? streamOf(bytes) : bytes)).toEqual({ size: bytes.length });
        expect(await store.stat(`exact/${key}`)).toBe(bytes.length);
        const back = await read(await store.get(`exact/${key}`));
        expect(back.length).toBe(bytes.length);
        expect(Buffer.compare(back, bytes)).toBe(0);
      }
    });

    test("a batch (batchOf: the store's, or plain puts): new keys and a replaced one read back whole after sync, no temp file left", async () => {
      const batch = batchOf(store);
      const old = randomBytes(1000);
      await store.put("batch/replaced", old);
      const news = Array.from({ length: 40 }, (_, i) => [`batch/n${i}/obj`, randomBytes(i * 997)] as const);
      const replacement = randomBytes(3000);
      await Promise.all([...news.map(([key, bytes]) => batch.put(key, bytes)), batch.put("batch/replaced", replacement)]);
      // Visible at once, whole: a put resolves once the object is under its key.
      expect(Buffer.compare(await read(await store.get("batch/n39/obj")), news[39]?.[1] as Uint8Array)).toBe(0);
      await batch.sync();
      for (const [key, bytes] of news) expect(Buffer.compare(await store.bytes(key), bytes)).toBe(0);
      expect(Buffer.compare(await store.bytes("batch/replaced"), replacement)).toBe(0);
      const listed: string[] = [];
      for await (const key of store.list("batch/")) listed.push(key);
      expect(listed.sort()).toEqual(["batch/replaced", ...news.map(([key]) => key)].sort());
      expect(await impl.leftovers(store)).toEqual([]);
      await batch.sync(); // nothing left to sync: a no-op
    });

    test("ranged gets: start, middle, end, across the end, at and past the end", async () => {
      const bytes = randomBytes(PART + 3);
      await store.put("range/obj", streamOf(bytes));
      const n = bytes.length;
      const ranges: [{ offset: number; length?: number }, number, number][] = [
        [{ offset: 0, length: 10 }, 0, 10],
        [{ offset: 1_234_567, length: 100_000 }, 1_234_567, 1_334_567],
        [{ offset: PART - 2, length: 4 }, PART - 2, PART + 2], // across the part boundary
        [{ offset: n - 10 }, n - 10, n],
        [{ offset: n - 5, length: 100 }, n - 5, n],
        [{ offset: 0, length: 0 }, 0, 0],
        [{ offset: n }, n, n],
        [{ offset: n + 10, length: 5 }, n, n],
      ];
      for (const [range, from, to] of ranges) {
        const back = await read(await store.get("range/obj", range));
        expect({ range, length: back.length }).toEqual({ range, length: to - from });
        expect(Buffer.compare(back, bytes.subarray(from, to))).toBe(0);
      }
      expect(await read(await store.get("range/obj", { offset: 3 }))).toEqual(new Uint8Array(bytes.subarray(3)));
      expect(await blobCode(store.get("range/missing", { offset: 5, length: 2 }))).toBe("BlobNotFound");
      expect(await blobCode(store.get("range/missing", { offset: 0, length: 0 }))).toBe("BlobNotFound");
      expect(await read(await store.get("range/obj", { offset: n - 1 }))).toEqual(Uint8Array.of(bytes[n - 1] as number));
    });

    test("bytes reads a whole object in one piece; a missing key is BlobNotFound", async () => {
      const obj = randomBytes(MiB + 5);
      await store.put("bytes/obj", obj);
      expect(Buffer.from(await store.bytes("bytes/obj")).equals(obj)).toBe(true);
      await store.put("bytes/empty", new Uint8Array(0));
      expect((await store.bytes("bytes/empty")).byteLength).toBe(0);
      expect(await blobCode(store.bytes("bytes/missing"))).toBe("BlobNotFound");
    });

    test("stat says the size or undefined; get of a missing key is BlobNotFound", async () => {
      expect(await store.stat("stat/missing")).toBeUndefined();
      expect(await blobCode(store.get("stat/missing"))).toBe("BlobNotFound");
      await store.put("stat/x", new Uint8Array(1234));
      expect(await store.stat("stat/x")).toBe(1234);
    });

    test("delete removes the object and is idempotent", async () => {
      await store.put("del/x", Uint8Array.of(1, 2, 3));
      await store.delete("del/x");
      expect(await store.stat("del/x")).toBeUndefined();
      expect(await blobCode(store.get("del/x"))).toBe("BlobNotFound");
      await store.delete("del/x");
      await store.delete("del/never-was");
      expect(await keys(store, "del/")).toEqual([]);
    });

    test("list by prefix sees every key across many pages, and only those", async () => {
      const names = Array.from({ length: 1100 }, (_, i) => `list/${String(i).padStart(4, "0")}`);
      const others = ["lisx/1", "other/list/1", "list-not/1"];
      await pool(16, [...names, ...others, "list/sub/deeper"], (k) => store.put(k, new TextEncoder().encode(k)));
      expect(await keys(store, "list/", 100)).toEqual([...names, "list/sub/deeper"].sort());
      expect(await keys(store, "list/00", 7)).toEqual(names.slice(0, 100));
      expect(await keys(store, "list/sub/")).toEqual(["list/sub/deeper"]);
      expect(await keys(store, "list")).toContain("list-not/1");
      expect(await keys(store, "nothing/")).toEqual([]);
    });

    test("a put whose source fails midway leaves nothing visible, and an older object intact", async () => {
      const bytes = randomBytes(PART + MiB);
      for (const failAfter of [0, 100, PART + 100]) {
        const key = `fail/at-${failAfter}`;
        const err = await caught(store.put(key, streamOf(bytes, { failAfter })));
        // The source's own error, not the store's: the caller decides what a broken upload means.
        expect((err as Error).message).toBe("source broke");
        expect(await store.stat(key)).toBeUndefined();
        expect(await blobCode(store.get(key))).toBe("BlobNotFound");
      }
      const old = randomBytes(1000);
      await store.put("fail/kept", old);
      expect((await caught(store.put("fail/kept", streamOf(bytes, { failAfter: PART + 100 })))) as Error).toHaveProperty("message", "source broke");
      expect(Buffer.compare(await read(await store.get("fail/kept")), old)).toBe(0);
      expect(await keys(store, "fail/")).toEqual(["fail/kept"]);
      expect(await impl.leftovers(store)).toEqual([]);
    });

    test("a put replaces the object: never a mix, whatever the sizes", async () => {
      const a = randomBytes(PART + 3);
      const b = randomBytes(17);
      await store.put("over/x", streamOf(a));
      await store.put("over/x", b);
      expect(await store.stat("over/x")).toBe(17);
      expect(Buffer.compare(await read(await store.get("over/x")), b)).toBe(0);
      await store.put("over/x", streamOf(a));
      expect(Buffer.compare(await read(await store.get("over/x")), a)).toBe(0);
    });

    test("concurrent puts of one key: the object is one of them, whole", async () => {
      const versions = [randomBytes(10), randomBytes(PART + 3), randomBytes(300_000), randomBytes(PART + 99), randomBytes(1), randomBytes(2 * MiB)];
      await Promise.all(versions.map((v, i) => store.put("race/x", i % 2 ? streamOf(v) : v)));
      const back = await read(await store.get("race/x"));
      expect(versions.some((v) => Buffer.compare(v, back) === 0)).toBe(true);
      expect(await store.stat("race/x")).toBe(back.length);
      expect(await impl.leftovers(store)).toEqual([]);
    });

    test("a reader that started before an overwrite still gets the old bytes whole", async () => {
      const a = randomBytes(3 * MiB);
      await store.put("snap/x", a);
      const reading = await store.get("snap/x");
      await store.put("snap/x", randomBytes(3 * MiB));
      // Local files keep the opened inode; S3 answers a GET from the version it started with.
      expect(Buffer.compare(await read(reading), a)).toBe(0);
    });

    test("keys that would not mean the same object everywhere are refused", async () => {
      for (const bad of ["", "/abs", "a//b", "../x", "a/../b", "a/./b", "x.tmp-1", "trailing/", "sp ace", "ü"]) {
        expect(await blobCode(store.put(bad, Uint8Array.of(1)))).toBe("BlobInvalidKey");
        expect(await blobCode(store.stat(bad))).toBe("BlobInvalidKey");
      }
      expect(await keys(store, "")).not.toContain("x.tmp-1");
    });

    test("the deployment marker: claimed once, refused to another deployment", async () => {
      const mine = await impl.fresh();
      await claimDeployment(mine, "deployment-a");
      await claimDeployment(mine, "deployment-a"); // a restart of the same deployment
      const err = await caught(claimDeployment(mine, "deployment-b"));
      expect(err).toBeInstanceOf(BlobError);
      expect((err as BlobError).code).toBe("BlobDeploymentMismatch");
      expect((err as BlobError).message).toContain("deployment-a");
      // The refused one left no claim behind: the owner still starts.
      expect(await claimants(mine)).toEqual(["deployment-a"]);
      await claimDeployment(mine, "deployment-a");
      expect(new TextDecoder().decode(await read(await mine.get(`${DEPLOYMENT_PREFIX}deployment-a`)))).toStartWith("deployment-a\n");
      expect(await blobCode(claimDeployment(mine, "a/b"))).toBe("BlobInvalidKey");
    });

    test("deployments claiming one empty store at once: never two owners", async () => {
      for (let round = 0; round < 8; round++) {
        const shared = await impl.fresh();
        const ids = [`x-${round}`, `y-${round}`, `z-${round}`];
        const results = await Promise.allSettled(ids.map((id) => claimDeployment(shared, id)));
        const won = ids.filter((_, i) => results[i]?.status === "fulfilled");
        expect(won.length).toBeLessThanOrEqual(1);
        for (const r of results) if (r.status === "rejected") expect((r.reason as BlobError).code).toBe("BlobDeploymentMismatch");
        // Losers withdraw their claims: the store names its owner, or no one (all lost: start again).
        expect(await claimants(shared)).toEqual(won);
        const owner = won[0] ?? "x-again";
        await claimDeployment(shared, owner);
        expect(await claimants(shared)).toEqual([owner]);
      }
    });

    test("a claim left by another deployment (one that crashed mid-claim) blocks, naming it", async () => {
      const shared = await impl.fresh();
      await shared.put(`${DEPLOYMENT_PREFIX}old-one`, new TextEncoder().encode("old-one\n"));
      const err = (await caught(claimDeployment(shared, "new-one"))) as BlobError;
      expect(err.code).toBe("BlobDeploymentMismatch");
      expect(err.message).toContain("old-one");
      expect(await claimants(shared)).toEqual(["old-one"]);
    });

    test("streams of 256 MiB go in and out without memory growing with them", async () => {
      const size = 256 * MiB;
      const block = randomBytes(MiB);
      // The source makes a fresh 1 MiB per piece, so garbage grows with the stream whatever the
      // store does; when a collection runs on its own depends on the whole process's heap. A full
      // collection every 32 MiB, each way, leaves what the store itself keeps alive.
      const collectEvery = 32 * MiB;
      const source = () => {
        let sent = 0;
        return new ReadableStream<Uint8Array>({
          pull(ctl) {
            if (sent >= size) return ctl.close();
            if (sent % collectEvery === 0) Bun.gc(true);
            ctl.enqueue(block.slice());
            sent += MiB;
          },
        });
      };
      Bun.gc(true);
      const before = process.memoryUsage().rss;
      let peak = before;
      const tick = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
      try {
        let t = performance.now();
        await store.put("mem/big", source());
        const putMiBs = size / MiB / ((performance.now() - t) / 1000);
        t = performance.now();
        let got = 0;
        let sinceCollect = 0;
        for await (const chunk of await store.get("mem/big")) {
          got += chunk.length;
          sinceCollect += chunk.length;
          if (sinceCollect >= collectEvery) {
            sinceCollect = 0;
            Bun.gc(true);
          }
        }
        const getMiBs = size / MiB / ((performance.now() - t) / 1000);
        expect(got).toBe(size);
        console.log(`${impl.name}: put ${putMiBs.toFixed(0)} MiB/s, get ${getMiBs.toFixed(0)} MiB/s, RSS +${((peak - before) / MiB).toFixed(0)} MiB`);
      } finally {
        clearInterval(tick);
        await store.delete("mem/big");
      }
      // Holding the object would take 256 MiB at least. Streaming keeps parts in flight and at most
      // one collection interval of the source's dead pieces, each way.
      expect(peak - before).toBeLessThan(160 * MiB);
    });
  });
}

describe("S3 errors are typed", () => {
  beforeAll(async () => {
    rgw = await cephRgw();
    // For the record (the cluster is shared by every file, so this is its start, whoever began it).
    console.log(`Ceph RGW: started in ${rgw.startMs} ms; mon + osd + radosgw RSS now ${(rgw.rss() / MiB).toFixed(0)} MiB`);
  }, 300_000);

  test("a wrong secret is BlobAccessDenied on every operation", async () => {
    const prefix = rgw.prefix();
    const good = s3Store(prefix);
    await good.put("x", Uint8Array.of(1));
    const bad = s3Store(prefix, { secretAccessKey: "not-the-secret" });
    for (const op of [() => bad.put("x", Uint8Array.of(2)), () => bad.put("y", streamOf(randomBytes(PART + 3))), () => bad.get("x"), () => bad.get("x", { offset: 1 }), () => bad.bytes("x"), () => bad.stat("x"), () => bad.delete("x"), () => keys(bad, ""), () => bad.probe()]) {
      expect(await blobCode(op())).toBe("BlobAccessDenied");
    }
    expect(await good.stat("x")).toBe(1);
  });

  test("an unreachable endpoint is BlobStoreUnavailable on every operation", async () => {
    const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = probe.port;
    probe.stop(true); // nothing listens there now
    const down = s3Store("p/", { endpoint: `http://127.0.0.1:${port}` });
    for (const op of [() => down.put("x", Uint8Array.of(2)), () => down.put("y", streamOf(randomBytes(1000))), () => down.get("x"), () => down.bytes("x"), () => down.stat("x"), () => down.delete("x"), () => keys(down, ""), () => down.probe()]) {
      expect(await blobCode(op())).toBe("BlobStoreUnavailable");
    }
  });

  test("an endpoint that accepts connections and never answers is BlobStoreUnavailable after the timeout", async () => {
    const silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    try {
      const hung = new S3BlobStore({ endpoint: `http://127.0.0.1:${silent.port}`, bucket: "b", region: "us-east-1", prefix: "", accessKeyId: "a", secretAccessKey: "s", timeoutMs: 200 });
      // Streamed puts are paced by their source and have no deadline of their own (see s3.ts).
      for (const op of [() => hung.put("x", Uint8Array.of(1)), () => hung.get("x"), () => hung.get("x", { offset: 2 }), () => hung.stat("x"), () => hung.delete("x"), () => keys(hung, ""), () => hung.probe()]) {
        const e = (await caught(op())) as BlobError;
        expect([e.code, e.message]).toEqual(["BlobStoreUnavailable", expect.stringContaining("no answer within")]);
      }
    } finally {
      silent.stop(true);
    }
  });

  test("a missing bucket is BlobBucketMissing, found when the store opens", async () => {
    const config = { dataDir: tempDir("blobcfg"), s3Endpoint: rgw.endpoint, s3Bucket: "no-such-bucket", s3Region: rgw.region, s3Prefix: "", s3AccessKeyId: rgw.accessKeyId, s3SecretAccessKey: rgw.secretAccessKey };
    expect(await blobCode(openBlobStore(config))).toBe("BlobBucketMissing");
    expect(await blobCode(openBlobStore({ ...config, s3Bucket: rgw.bucket, s3SecretAccessKey: "wrong" }))).toBe("BlobAccessDenied");
  });

  test("openBlobStore: S3 when an endpoint is set, else local files in the data dir", async () => {
    const dataDir = tempDir("blobcfg");
    const none = { dataDir, s3Endpoint: undefined, s3Bucket: undefined, s3Region: "us-east-1", s3Prefix: "", s3AccessKeyId: undefined, s3SecretAccessKey: undefined };
    const local = await openBlobStore(none);
    expect(local.kind).toBe("local");
    await local.put("dfs/abc", Uint8Array.of(7));
    expect(await walkNames(localBlobRoot(dataDir))).toEqual(["abc"]);
    const prefix = rgw.prefix();
    const s3 = await openBlobStore({ ...none, s3Endpoint: rgw.endpoint, s3Bucket: rgw.bucket, s3Prefix: prefix, s3AccessKeyId: rgw.accessKeyId, s3SecretAccessKey: rgw.secretAccessKey });
    expect(s3.kind).toBe("s3");
    await s3.put("dfs/abc", Uint8Array.of(8));
    // The prefix is part of the object's real key in the bucket.
    expect(await rgw.client().file(`${prefix}dfs/abc`).bytes()).toEqual(Uint8Array.of(8));
    expect(await walkNames(localBlobRoot(dataDir))).toEqual(["abc"]);
  });

});

test("opening the local store removes the half-written files a crash left, and nothing else", async () => {
  const dataDir = tempDir("blobtmp");
  const none = { dataDir, s3Endpoint: undefined, s3Bucket: undefined, s3Region: "us-east-1", s3Prefix: "", s3AccessKeyId: undefined, s3SecretAccessKey: undefined };
  const first = await openBlobStore(none);
  await first.put("dfs/kept", Uint8Array.of(1));
  const path = new LocalBlobStore(localBlobRoot(dataDir)).pathOf("dfs/kept");
  await Bun.write(`${path}.tmp-0123456789ab`, "half of a chunk"); // a put killed before its rename
  expect((await walkNames(localBlobRoot(dataDir))).sort()).toEqual(["kept", "kept.tmp-0123456789ab"]);
  const again = await openBlobStore(none);
  expect(await walkNames(localBlobRoot(dataDir))).toEqual(["kept"]);
  expect(await again.bytes("dfs/kept")).toEqual(Uint8Array.of(1));
});

// The local store keeps its files in a join()-able folder: a sanity check of the layout's promise.
test("local layout: a key's file is under two fan-out folders of its name's hash", () => {
  const store = new LocalBlobStore("/root-x");
  expect(store.pathOf("dfs/abc")).toMatch(new RegExp(`^${join("/root-x", "dfs")}/[0-9a-f]{2}/[0-9a-f]{2}/abc$`));
});
