/**
 * The IPFS trustless gateway (D17) over a real socket: @helia/verified-fetch with our gateway as
 * its only source fetches public content and is refused private content; CARs verify block by
 * block; raw blocks hash to their Cids; dag-scope and entity-bytes choose the blocks the
 * specification says; 406 for what we cannot serve; HEAD; and what is not public stays refused
 * whatever the client knows of its Cids.
 */
import { describe, expect, test } from "bun:test";
import { withHTTP } from "@helia/http";
import { createVerifiedFetchWithHelia } from "@helia/verified-fetch";
import { CarReader } from "@ipld/car";
import * as dagPb from "@ipld/dag-pb";
import { createHeliaLight } from "helia";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import * as Digest from "multiformats/hashes/digest";
import { randomBytes, trustlessGateway } from "./support.ts";

const MiB = 1024 * 1024;
const CAR_V1 = "application/vnd.ipld.car; version=1; order=dfs; dups=n";

const tg = await trustlessGateway();
const { url, answered } = await tg.serve();
const owner = await tg.user();
// 3 MiB + a bit: four raw leaves under one dag-pb root (D9: 1 MiB chunks).
const content = randomBytes(3 * MiB + 1000);
const file = await tg.publish(owner, content, { name: "public.bin" });
const root = CID.parse(file.Cid);

const sha256 = (b: Uint8Array) => new Uint8Array(new Bun.CryptoHasher("sha256").update(b).digest());
const get = (path: string, init?: RequestInit) => fetch(`${url}${path}`, init);

/** Every block of a CAR, each checked against its Cid, in the CAR's order. */
async function carBlocks(res: Response) {
  const reader = await CarReader.fromBytes(new Uint8Array(await res.arrayBuffer()));
  const blocks: { cid: CID; bytes: Uint8Array }[] = [];
  for await (const b of reader.blocks()) {
    expect(sha256(b.bytes)).toEqual(b.cid.multihash.digest);
    blocks.push({ cid: b.cid, bytes: b.bytes });
  }
  return { roots: await reader.getRoots(), blocks };
}

/** The root's links (the file's leaves, in file order), from its raw block. */
async function leavesOf(cid: CID): Promise<CID[]> {
  const res = await get(`/ipfs/${cid}?format=raw`);
  expect(res.status).toBe(200);
  return dagPb.decode(new Uint8Array(await res.arrayBuffer())).Links.map((l) => l.Hash);
}
const leaves = await leavesOf(root);

describe("verified-fetch with this gateway as its only gateway", () => {
  /** A Helia with no libp2p and no delegated routers: its one source of blocks is `url`. */
  async function verifiedFetch() {
    const helia = withHTTP(createHeliaLight(), { delegatedRouters: [], recursiveGateways: [url], allowInsecure: true, allowLocal: true });
    // Helia asks its non-fallback routers first and, with none at all, waits forever for them to
    // finish (helia 7.1.15 routing.js): one that knows no provider lets it go on to our gateway.
    helia.addRouter({ name: "no-routing", async *findProviders() {} });
    await helia.start();
    const vf = await createVerifiedFetchWithHelia(helia);
    return { vf, stop: () => vf.stop() };
  }

  test("fetches a public file byte for byte, verified", async () => {
    const { vf, stop } = await verifiedFetch();
    const before = answered.length;
    try {
      const res = await vf(`ipfs://${file.Cid}`, { signal: AbortSignal.timeout(30_000) });
      expect(res.status).toBe(200);
      expect(Buffer.from(await res.arrayBuffer())).toEqual(Buffer.from(content));
      // Every block came from us (there is no other source): each leaf was asked for and served.
      const served = new Set(answered.slice(before).filter((a) => a.status === 200).map((a) => a.path));
      for (const leaf of leaves) expect(served.has(`/ipfs/${leaf}`)).toBe(true);
    } finally {
      await stop();
    }
  });

  test("is refused a private file", async () => {
    const secret = await owner.store.upload("ipfs", randomBytes(2 * MiB + 7), { name: "private.bin" });
    const { vf, stop } = await verifiedFetch();
    try {
      // verified-fetch keeps looking for another provider after a refusal: it gives up at the signal.
      const outcome = await vf(`ipfs://${secret.Cid}`, { signal: AbortSignal.timeout(3_000) }).then(
        async (res) => ({ status: res.status, bytes: (await res.arrayBuffer()).byteLength }),
        (err: Error) => ({ error: err.name }),
      );
      expect("status" in outcome ? outcome.status >= 400 : outcome.error).toBeTruthy();
      // It asked us, and we refused.
      const asked = answered.filter((a) => a.path === `/ipfs/${secret.Cid}`);
      expect(asked.length).toBeGreaterThan(0);
      expect(asked.every((a) => a.status === 403)).toBe(true);
    } finally {
      await stop();
    }
  }, 15_000);
});

describe("CAR", () => {
  test("a CAR of a 3 MiB file verifies block by block and walks from its root to every byte", async () => {
    const res = await get(`/ipfs/${file.Cid}?format=car`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe(CAR_V1);
    expect(res.headers.get("cache-control")).toBe("public, max-age=29030400, immutable");
    expect(res.headers.get("content-disposition")).toStartWith(`attachment; filename="${file.Cid}.car"`);
    expect(res.headers.get("x-ipfs-path")).toBe(`/ipfs/${file.Cid}`);
    expect(res.headers.get("x-ipfs-roots")).toBe(file.Cid);
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("etag")).toStartWith(`"${file.Cid}.car`);
    const { roots, blocks } = await carBlocks(res);
    expect(roots.map(String)).toEqual([file.Cid]);
    // Depth first from the root, each block once.
    const byCid = new Map(blocks.map((b) => [b.cid.toString(), b.bytes]));
    expect(blocks[0]?.cid.toString()).toBe(file.Cid);
    const parts: Uint8Array[] = [];
    const walk = (cid: CID) => {
      const bytes = byCid.get(cid.toString());
      if (!bytes) throw new Error(`block ${cid} missing from the CAR`);
      if (cid.code === raw.code) return void parts.push(bytes);
      for (const l of dagPb.decode(bytes).Links) walk(l.Hash);
    };
    walk(root);
    expect(blocks.map((b) => b.cid.toString())).toEqual([file.Cid, ...leaves.map(String)]);
    expect(Buffer.concat(parts)).toEqual(Buffer.from(content));
  });

  test("Accept negotiates the CAR (with Content-Location), and format wins over Accept", async () => {
    const res = await get(`/ipfs/${file.Cid}`, { headers: { accept: "application/vnd.ipld.car; version=1; order=dfs; dups=y" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/vnd.ipld.car; version=1; order=dfs; dups=y");
    expect(res.headers.get("content-location")).toBe(`/ipfs/${file.Cid}?format=car`);
    expect((await carBlocks(res)).blocks).toHaveLength(1 + leaves.length);
    const raw = await get(`/ipfs/${file.Cid}?format=raw`, { headers: { accept: "application/vnd.ipld.car" } });
    expect(raw.headers.get("content-type")).toBe("application/vnd.ipld.raw");
    await raw.arrayBuffer();
  });

  const scoped = async (query: string) => {
    const res = await get(`/ipfs/${file.Cid}?format=car&${query}`);
    expect(res.status).toBe(200);
    return { etag: res.headers.get("etag"), cids: (await carBlocks(res)).blocks.map((b) => b.cid.toString()) };
  };
  const L = () => leaves.map(String);

  test("dag-scope=block is the root alone; entity is the whole file", async () => {
    expect((await scoped("dag-scope=block")).cids).toEqual([file.Cid]);
    expect((await scoped("dag-scope=entity")).cids).toEqual([file.Cid, ...L()]);
    expect((await scoped("dag-scope=all")).cids).toEqual([file.Cid, ...L()]);
  });

  test("entity-bytes sends the blocks of that range only, and tags each range apart", async () => {
    const [l0, l1, l2, l3] = L();
    const cases: [string, string[]][] = [
      ["0:0", [l0 as string]],
      [`${MiB}:${MiB + 1}`, [l1 as string]],
      [`${MiB - 1}:${MiB}`, [l0 as string, l1 as string]],
      ["-5:*", [l3 as string]],
      [`0:-${2 * MiB + 1001}`, [l0 as string]],
      [`${2 * MiB}:*`, [l2 as string, l3 as string]],
      ["-99999999:*", L()],
      // Wholly outside the file: the root alone, as dag-scope=block.
      [`${10 * MiB}:*`, []],
    ];
    const etags = new Set<string | null>();
    for (const [range, expected] of cases) {
      const got = await scoped(`entity-bytes=${range}`);
      expect({ range, cids: got.cids }).toEqual({ range, cids: [file.Cid, ...expected] });
      etags.add(got.etag);
    }
    expect(etags.size).toBe(cases.length);
  });

  test("a block the DAG links many times comes once with dups=n, every time with dups=y", async () => {
    // Zeros: three identical 1 MiB leaves and a short one.
    const zeros = await tg.publish(owner, new Uint8Array(3 * MiB + 1000), { name: "zeros.bin" });
    const car = async (accept: string, query = "") => {
      const res = await get(`/ipfs/${zeros.Cid}${query}`, { headers: { accept } });
      expect(res.status).toBe(200);
      return { type: res.headers.get("content-type"), cids: (await carBlocks(res)).blocks.map((b) => b.cid.toString()) };
    };
    const once = await car("application/vnd.ipld.car; dups=n");
    expect(once.type).toBe(CAR_V1);
    expect(once.cids).toHaveLength(3);
    const [rootCid, big, small] = once.cids;
    expect(rootCid).toBe(zeros.Cid);
    const every = await car("application/vnd.ipld.car; dups=y");
    expect(every.type).toBe("application/vnd.ipld.car; version=1; order=dfs; dups=y");
    expect(every.cids).toEqual([zeros.Cid, big, big, big, small] as string[]);
    // car-dups in the query wins over the Accept header's.
    expect((await car("application/vnd.ipld.car; dups=n", "?format=car&car-dups=y")).cids).toHaveLength(5);
    // A range over the second and third leaves: the same block, sent once or twice.
    expect((await car("application/vnd.ipld.car; dups=n", `?entity-bytes=${MiB}:${2 * MiB + 5}`)).cids).toEqual([zeros.Cid, big] as string[]);
    expect((await car("application/vnd.ipld.car; dups=y", `?entity-bytes=${MiB}:${2 * MiB + 5}`)).cids).toEqual([zeros.Cid, big, big] as string[]);
  });

  test("malformed dag-scope or entity-bytes is a 400", async () => {
    for (const q of ["dag-scope=everything", "entity-bytes=a:b", "entity-bytes=5", "entity-bytes=9:3"]) {
      const res = await get(`/ipfs/${file.Cid}?format=car&${q}`);
      expect({ q, status: res.status }).toEqual({ q, status: 400 });
      expect(((await res.json()) as { Code: string }).Code).toBe("InvalidArgument");
    }
  });
});

describe("raw blocks", () => {
  test("?format=raw of a leaf hashes to its Cid, with the specification's headers", async () => {
    const leaf = leaves[1] as CID;
    const res = await get(`/ipfs/${leaf}?format=raw`);
    expect(res.status).toBe(200);
    const bytes = new Uint8Array(await res.arrayBuffer());
    expect(sha256(bytes)).toEqual(leaf.multihash.digest);
    expect(Buffer.from(bytes)).toEqual(Buffer.from(content.subarray(MiB, 2 * MiB)));
    expect(res.headers.get("content-type")).toBe("application/vnd.ipld.raw");
    expect(res.headers.get("content-length")).toBe(String(MiB));
    expect(res.headers.get("content-disposition")).toStartWith(`attachment; filename="${leaf}.bin"`);
    expect(res.headers.get("etag")).toBe(`"${leaf}.raw"`);
    expect(res.headers.get("cache-control")).toBe("public, max-age=29030400, immutable");
    expect(res.headers.get("x-ipfs-path")).toBe(`/ipfs/${leaf}`);
    expect(res.headers.get("x-ipfs-roots")).toBe(leaf.toString());
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("content-location")).toBeNull();
    const named = await get(`/ipfs/${leaf}?format=raw&filename=foobar.bin`);
    expect(named.headers.get("content-disposition")).toStartWith('attachment; filename="foobar.bin"');
    await named.arrayBuffer();
  });

  // Public content anyone can link to: an uploaded page or image served from the gateway's origin
  // must never render or run there, whatever the format or the file name asked for.
  test("an uploaded .html or .svg, as a raw block or a CAR (GET and HEAD), is an attachment with nosniff and the sandbox", async () => {
    const pages = [
      ["page.html", "<html><script>alert(document.cookie)</script></html>"],
      ["pic.svg", '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'],
    ] as const;
    for (const [name, text] of pages) {
      const published = await tg.publish(owner, new TextEncoder().encode(`${text}<!-- ${Math.random()} -->`), { name });
      for (const [format, type, ext] of [["raw", "application/vnd.ipld.raw", "bin"], ["car", "application/vnd.ipld.car", "car"]] as const) {
        for (const [query, filename] of [["", `${published.Cid}.${ext}`], [`&filename=${name}`, name]] as const) {
          for (const method of ["GET", "HEAD"]) {
            const res = await get(`/ipfs/${published.Cid}?format=${format}${query}`, { method });
            expect(res.status).toBe(200);
            expect({ name, format, query, method, type: res.headers.get("content-type"), disposition: res.headers.get("content-disposition"), nosniff: res.headers.get("x-content-type-options"), csp: res.headers.get("content-security-policy") }).toEqual({
              name,
              format,
              query,
              method,
              type: expect.stringMatching(new RegExp(`^${type}`)),
              disposition: `attachment; filename="${filename}"; filename*=UTF-8''${filename}`,
              nosniff: "nosniff",
              csp: "sandbox; default-src 'none'",
            });
            await res.arrayBuffer();
          }
        }
      }
    }
  });

  test("If-None-Match with the ETag is a 304 without a body", async () => {
    const leaf = leaves[0] as CID;
    const res = await get(`/ipfs/${leaf}?format=raw`, { headers: { "if-none-match": `"${leaf}.raw"` } });
    expect(res.status).toBe(304);
    expect((await res.arrayBuffer()).byteLength).toBe(0);
  });

  test("the identity probe bafkqaaa answers an empty block and an empty CAR", async () => {
    const block = await get("/ipfs/bafkqaaa?format=raw");
    expect(block.status).toBe(200);
    expect((await block.arrayBuffer()).byteLength).toBe(0);
    const car = await get("/ipfs/bafkqaaa?format=car");
    expect(car.status).toBe(200);
    const { roots, blocks } = await carBlocks(car);
    expect(roots.map(String)).toEqual(["bafkqaaa"]);
    expect(blocks).toEqual([]);
  });
});

describe("HEAD", () => {
  test("answers the headers without a body", async () => {
    const leaf = leaves[0] as CID;
    const block = await get(`/ipfs/${leaf}?format=raw`, { method: "HEAD" });
    expect(block.status).toBe(200);
    expect(block.headers.get("content-type")).toBe("application/vnd.ipld.raw");
    expect(block.headers.get("content-length")).toBe(String(MiB));
    expect(block.headers.get("etag")).toBe(`"${leaf}.raw"`);
    expect((await block.arrayBuffer()).byteLength).toBe(0);
    const car = await get(`/ipfs/${file.Cid}`, { method: "HEAD", headers: { accept: "application/vnd.ipld.car" } });
    expect(car.status).toBe(200);
    expect(car.headers.get("content-type")).toBe(CAR_V1);
    expect((await car.arrayBuffer()).byteLength).toBe(0);
    const refused = await get(`/ipfs/${randomCid()}?format=raw`, { method: "HEAD" });
    expect(refused.status).toBe(403);
  });
});

describe("406: formats we do not serve", () => {
  test.each([
    ["?format=car&car-version=2", {}],
    ["", { accept: "application/vnd.ipld.car; version=2" }],
    ["", { accept: "application/vnd.ipld.car; order=weird" }],
    ["?format=car", { accept: "application/vnd.ipld.car; dups=maybe" }],
    ["?format=dag-json", {}],
    ["?format=tar", {}],
    ["", { accept: "application/vnd.ipld.dag-json" }],
  ])("%s %o", async (query, headers) => {
    const res = await get(`/ipfs/${file.Cid}${query}`, { headers });
    expect(res.status).toBe(406);
    expect(((await res.json()) as { Code: string }).Code).toBe("NotAcceptable");
  });

  test("a CAR version 2 among acceptable types with a lower q still gets the version 1 CAR", async () => {
    const res = await get(`/ipfs/${file.Cid}`, { headers: { accept: "application/vnd.ipld.car; version=2, application/vnd.ipld.car; version=1; q=0.5" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe(CAR_V1);
    await res.arrayBuffer();
  });
});

/** A Cid nobody stores. */
const randomCid = () => CID.createV1(raw.code, Digest.create(0x12, sha256(randomBytes(64))));

describe("only public, free content, whatever Cid the client knows", () => {
  /** The status of every way to ask for `cid`'s block or DAG. */
  const statuses = async (cid: CID | string) => {
    const out: number[] = [];
    for (const [q, accept] of [["?format=raw", undefined], ["?format=car", undefined], ["", "application/vnd.ipld.raw"]] as const) {
      const res = await get(`/ipfs/${cid}${q}`, { headers: accept ? { accept } : {} });
      out.push(res.status);
      await res.arrayBuffer();
    }
    return out;
  };

  test("a private file's root and leaves are refused, as a Cid nobody stores is", async () => {
    const secret = await owner.store.upload("ipfs", randomBytes(2 * MiB + 11), { name: "secret.bin" });
    // The owner knows the leaves' Cids (here from the blob store, as anyone who once had the file would).
    const { readBlock } = await import("../../src/storage/ipfs/blocks.ts");
    const secretLeaves = dagPb.decode(await readBlock(tg.store, CID.parse(secret.Cid))).Links.map((l) => l.Hash);
    expect(secretLeaves.length).toBe(3);
    for (const cid of [secret.Cid, ...secretLeaves]) expect(await statuses(cid)).toEqual([403, 403, 403]);
    expect(await statuses(randomCid())).toEqual([403, 403, 403]);
    // The same answer's body: nothing tells the stored apart from the unknown.
    const a = await (await get(`/ipfs/${secret.Cid}?format=raw`)).json();
    const b = await (await get(`/ipfs/${randomCid()}?format=raw`)).json();
    expect(a).toEqual(b);
  });

  test("a priced entry is not free; someone else's entry for a Cid opens nothing; unpublishing closes", async () => {
    const priced = await tg.publish(owner, randomBytes(5000), { name: "priced.bin", price: 5, isPublic: true });
    expect(await statuses(priced.Cid)).toEqual([403, 403, 403]);

    const mallory = await tg.user();
    const other = await owner.store.upload("ipfs", randomBytes(6000), { name: "not-mallorys.bin" });
    await mallory.dir.publish({ cid: other.Cid, name: "free stuff", size: other.Size, isPublic: true });
    await tg.sync();
    expect(await statuses(other.Cid)).toEqual([403, 403, 403]);

    const open = await tg.publish(owner, randomBytes(7000), { name: "open.bin" });
    expect(await statuses(open.Cid)).toEqual([200, 200, 200]);
    await owner.dir.unpublish(open.Cid);
    await tg.sync();
    expect(await statuses(open.Cid)).toEqual([403, 403, 403]);
  });

  test("content replaced under its name is unpinned: its blocks are refused at once", async () => {
    const first = await tg.publish(owner, randomBytes(8000), { name: "replaced.bin" });
    expect(await statuses(first.Cid)).toEqual([200, 200, 200]);
    // Same name: the old entry is replaced and its content released (unpinned, index rows gone).
    await owner.store.upload("ipfs", randomBytes(9000), { name: "replaced.bin" });
    expect(await statuses(first.Cid)).toEqual([403, 403, 403]);
  });

  test("a request without a trustless type or format is the path gateway's file, or with a voucher the download, as before", async () => {
    for (const headers of [{}, { accept: "application/octet-stream" }, { accept: "*/*" }, { accept: "application/json" }] as Record<string, string>[]) {
      // No voucher: the file itself (the path gateway, test/gateway/path.test.ts).
      const file200 = await get(`/ipfs/${file.Cid}`, { headers: { ...headers, range: "bytes=0-99" } });
      expect({ headers, status: file200.status }).toEqual({ headers, status: 206 });
      expect(Buffer.from(await file200.arrayBuffer())).toEqual(Buffer.from(content.subarray(0, 100)));
      // A voucher (here a bad one): the download, answered as without the gateway.
      const withGateway = await get(`/ipfs/${file.Cid}?size=1&sign=0x00`, { headers });
      const without = await tg.gw.app.handle(new Request(`http://stowage.test/ipfs/${file.Cid}?size=1&sign=0x00`, { headers }));
      expect({ headers, status: withGateway.status }).toEqual({ headers, status: without.status });
      expect(await withGateway.json()).toEqual(await without.json());
    }
    // With a voucher, the owner's download is the file, whatever gateway is in front.
    const res = await owner.store.download("ipfs", file.Cid, { range: [0, 99] });
    expect(Buffer.from(await res.arrayBuffer())).toEqual(Buffer.from(content.subarray(0, 100)));
  });
});
