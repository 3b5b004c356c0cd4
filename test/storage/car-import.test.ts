/**
 * CAR import through the doors a user has: `POST /ipfs/` by the SDK (a file part of type
 * application/vnd.ipld.car, or ?format=car) and S3 PutObject with `x-amz-meta-import: car`, on a
 * whole test gateway with quota from the chain. CARs come from the `ipfs-car` command: the files
 * listed carry the Cids it printed, read back byte-exact, and another Helia node fetches them over
 * TCP + bitswap. A flipped byte, a missing block or too little space leaves no file, no block and
 * no charge; the same CAR twice is stored and charged once.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { createHash } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { block, createDenylist, unblock, type Denylist } from "../../src/denylist/index.ts";
import { silentLogger } from "../../src/log.ts";
import { StorageApiError } from "../../src/sdk/storage.ts";
import { keysClient } from "../../src/sdk/keys.ts";
import { BLOCK_PREFIX } from "../../src/storage/ipfs/blocks.ts";
import type { IpfsBackend } from "../../src/storage/ipfs/index.ts";
import { granter } from "../quota/grants.ts";
import { carParts, flipByteOfBlock, ipfsCarPack, withoutBlock } from "../support/car.ts";
import { BASE, testGateway } from "../support/storage.ts";
import { s3ApiOver, type Minted } from "../s3api/harness.ts";
import { tempDir } from "../support/tmp.ts";

setDefaultTimeout(60_000);

const MiB = 1024 * 1024;
// The denylist, made once the database exists; every door asks it through these late-bound calls.
const late: { denylist?: Denylist } = {};
const gw = await testGateway({
  quota: true,
  denylist: {
    check: (cid, door, path) => late.denylist?.check(cid, door, path),
    refuseUpload: (cid, door) => late.denylist?.refuseUpload(cid, door),
    servable: async (cid, door, roots) => (late.denylist ? late.denylist.servable(cid, door, roots) : true),
    blocking: (cid, path) => late.denylist?.blocking(cid, path),
  },
});
late.denylist = await createDenylist({ sql: gw.database.sql, log: silentLogger, pollMs: 3_600_000 });
afterAll(() => late.denylist?.stop());
const grant = granter(gw.chain);
const meter = gw.quota?.meter;
const { signed } = await s3ApiOver(gw);

const dir = tempDir("car-files");
const bigBytes = crypto.getRandomValues(new Uint8Array(60_000)); // filled below to 3 MiB
const big = new Uint8Array(3 * MiB + 5);
for (let i = 0; i < big.byteLength; i += bigBytes.byteLength) big.set(crypto.getRandomValues(bigBytes).subarray(0, Math.min(bigBytes.byteLength, big.byteLength - i)), i);
const page = "<!doctype html><h1>a site from a CAR</h1>";

/** A user with `space` bytes of free space (and traffic), an SDK client logged in, and an S3 key. */
async function account(space = 64 * MiB) {
  const { account, client } = await gw.user();
  await grant(account.address, "space", space);
  await grant(account.address, "traffic", 256 * MiB);
  const key = await keysClient({ baseUrl: BASE, store: client, fetch: gw.fetch }).create({ access: "rw", bucket: "*" });
  const did = `did:ethr:0x${gw.config.chainId.toString(16)}:${account.address}`;
  const left = async (pool: "space" | "traffic") => (await meter?.record(account.address, did, pool))?.SizeByte ?? -1;
  return { account, client, key, left };
}

/** Block objects in the blob store. */
async function blocks(): Promise<string[]> {
  const keys: string[] = [];
  for await (const key of gw.blobs.store.list(BLOCK_PREFIX)) keys.push(key);
  return keys.sort();
}

/** An S3 request signed by hand (AWS's signer), with the headers S3Client has no way to send. */
const s3Send = (method: "PUT" | "GET", key: Minted, path: string, body?: Uint8Array, headers: Record<string, string> = {}) => signed(key, method, path, { body, headers });
const s3Put = (key: Minted, path: string, body: Uint8Array, headers: Record<string, string> = {}) => s3Send("PUT", key, path, body, headers);

/** A file of another IPFS node's (its own process), fetched over TCP + bitswap from this gateway's node. */
async function fetchedByPeer(cidPath: string): Promise<{ sha256?: string; bytes?: number; error?: string }> {
  const [addr] = (gw.backends.ipfs as IpfsBackend).multiaddrs();
  const peer = Bun.spawn([process.execPath, join(import.meta.dir, "..", "support", "ipfs-peer.ts"), addr as string, cidPath, "30000"], { stdout: "pipe", stderr: "pipe" });
  const [out] = await Promise.all([new Response(peer.stdout).text(), peer.exited]);
  return JSON.parse(out.trim().split("\n").at(-1) ?? "{}");
}

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const v1 = (cid: string) => CID.parse(cid).toV1().toString();

let file: { root: string; car: Uint8Array };
let site: { root: string; car: Uint8Array };
beforeAll(async () => {
  await Bun.write(join(dir, "big.bin"), big);
  mkdirSync(join(dir, "site", "img"), { recursive: true });
  await Bun.write(join(dir, "site", "index.html"), page);
  await Bun.write(join(dir, "site", "img", "dot.bin"), crypto.getRandomValues(new Uint8Array(5000)));
  file = await ipfsCarPack(join(dir, "big.bin"), { wrap: false });
  site = await ipfsCarPack(join(dir, "site"));
});

describe("over HTTP (POST /ipfs/, the SDK)", () => {
  test("a file's CAR: listed with the Cid ipfs-car printed, read back, fetched over bitswap", async () => {
    const a = await account();
    const space = await a.left("space");
    const list = await a.client.importCar(new Blob([file.car]), { name: "big.bin.car" });
    expect(list.Storage).toBe("ipfs");
    expect(list.Object.map((e) => [e.Name, e.Cid, e.Size])).toEqual([["big.bin", v1(file.root), big.byteLength]]);
    // Charged its size, as an upload of the same bytes is.
    expect(space - (await a.left("space"))).toBe(big.byteLength);
    expect((await a.client.list("ipfs")).Object.map((e) => e.Cid)).toEqual([v1(file.root)]);
    const back = new Uint8Array(await (await a.client.download("ipfs", file.root)).arrayBuffer());
    expect(sha(back)).toBe(sha(big));
    expect(await fetchedByPeer(file.root)).toMatchObject({ sha256: sha(big), bytes: big.byteLength });
  });

  test("a folder's CAR: its root, sized by its blocks, and a file in it over bitswap", async () => {
    const a = await account();
    const list = await a.client.importCar(new Blob([site.car]), { name: "site.car" });
    const { blocks: parts } = await carParts(site.car);
    expect(list.Object.map((e) => [e.Name, e.Cid, e.Size])).toEqual([["site", v1(site.root), parts.reduce((n, b) => n + b.bytes.byteLength, 0)]]);
    expect(await fetchedByPeer(`${site.root}/index.html`)).toMatchObject({ sha256: sha(new TextEncoder().encode(page)) });
    // A download reads files: a folder's Cid is none, refused before any charge.
    const traffic = await a.left("traffic");
    const err = await a.client.download("ipfs", site.root, { size: 1000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as StorageApiError).status).toBe(404);
    expect(await a.left("traffic")).toBe(traffic);
  });

  test("?format=car imports a part of any type; the payload may be the CAR's one root", async () => {
    const a = await account();
    const s = await gw.session(a.account);
    const built = await gw.uploadRequest(s, { requestID: 1, bytes: site.car, name: "mysite", kind: "ipfs", payload: v1(site.root) });
    const res = await gw.app.handle(new Request(`${built.url}?format=car`, { method: "POST", headers: built.headers, body: await built.arrayBuffer() }));
    expect(res.status).toBe(200);
    const list = (await res.json()) as { Object: { Name: string; Cid: string }[] };
    expect(list.Object.map((e) => [e.Name, e.Cid])).toEqual([["mysite", v1(site.root)]]);
    // A payload that names another root is refused, keeping nothing.
    const other = await gw.uploadRequest(s, { requestID: 2, bytes: site.car, name: "other", kind: "ipfs", payload: v1(file.root) });
    const refused = await gw.app.handle(new Request(`${other.url}?format=car`, { method: "POST", headers: other.headers, body: await other.arrayBuffer() }));
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { Description: string }).Description).toContain("payload does not match the CAR's one root");
    // A voucher names one Cid: a CAR's first root. One signed for the CAR's own bytes is refused.
    const forBytes = await gw.uploadRequest(s, { requestID: 3, bytes: site.car, name: "bytes", kind: "ipfs" });
    const wrongVoucher = await gw.app.handle(new Request(`${forBytes.url}?format=car`, { method: "POST", headers: forBytes.headers, body: await forBytes.arrayBuffer() }));
    expect(wrongVoucher.status).toBe(400);
    expect(((await wrongVoucher.json()) as { Description: string }).Description).toContain(`but the CAR's first root is ${v1(site.root)}: nothing was kept`);
    expect((await a.client.list("ipfs")).Object.map((e) => e.Name)).toEqual(["mysite"]);
  });

  test("the same CAR twice: one file, stored and charged once", async () => {
    const a = await account();
    const refs = async () => (await gw.database.sql.get<{ refs: number }>("SELECT refs FROM ipfs_pins WHERE cid = $1", [v1(file.root)]))?.refs;
    await a.client.importCar(new Blob([file.car]), { name: "twice.car" });
    const [space, stored, pinned] = [await a.left("space"), await blocks(), await refs()];
    const again = await a.client.importCar(new Blob([file.car]), { name: "twice.car" });
    expect(again.Object.map((e) => e.Cid)).toEqual([v1(file.root)]);
    expect((await a.client.list("ipfs")).Object.map((e) => e.Name)).toEqual(["twice"]);
    expect(await a.left("space")).toBe(space);
    expect(await blocks()).toEqual(stored);
    // The entry it replaced let go of its reference: the content is held once more, not twice.
    expect(await refs()).toBe(pinned);
  });

  describe("refused whole: no file, no block, no charge", () => {
    async function refusedOverHttp(car: Uint8Array, status: number, description: RegExp, space = 64 * MiB) {
      const a = await account(space);
      const [before, traffic, stored] = [await a.left("space"), await a.left("traffic"), await blocks()];
      const err = await a.client.importCar(new Blob([car]), { name: "bad.car" }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StorageApiError);
      expect((err as StorageApiError).status).toBe(status);
      expect((err as StorageApiError).body.Description).toMatch(description);
      expect((await a.client.list("ipfs")).Object).toEqual([]);
      expect(await blocks()).toEqual(stored);
      expect([await a.left("space"), await a.left("traffic")]).toEqual([before, traffic]);
    }

    test("one flipped byte", async () => {
      await refusedOverHttp(await flipByteOfBlock(file.car, 2), 400, /does not match its Cid \(its bytes hash to something else\): nothing was kept/);
    });

    test("a missing block", async () => {
      const leaf = (await carParts(site.car)).blocks.find((b) => b.cid.code === raw.code);
      await refusedOverHttp(await withoutBlock(site.car, leaf!.cid), 400, /is missing from the CAR/);
    });

    test("too little space", async () => {
      await refusedOverHttp(file.car, 402, /not enough space/, 2 * MiB);
    });
  });
});

describe("a root the operator blocks", () => {
  test("refuses the whole import with 410, over HTTP and S3, keeping nothing", async () => {
    await block(gw.database.sql, site.root, "test");
    await late.denylist?.refresh();
    try {
      const a = await account();
      const [space, stored] = [await a.left("space"), await blocks()];
      const err = await a.client.importCar(new Blob([site.car]), { name: "site.car" }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((err as StorageApiError).status).toBe(410);
      const res = await s3Put(a.key, "/ipfs/site", site.car, { "x-amz-meta-import": "car" });
      expect([res.status, /<Code>([^<]*)</.exec(await res.text())?.[1]]).toEqual([410, "Blocked"]);
      expect((await a.client.list("ipfs")).Object).toEqual([]);
      expect(await a.left("space")).toBe(space);
      expect(await blocks()).toEqual(stored);
    } finally {
      await unblock(gw.database.sql, site.root);
      await late.denylist?.refresh();
    }
  });
});

describe("over S3 (PutObject, x-amz-meta-import: car)", () => {
  test("the key holds the root: its Cid, its bytes", async () => {
    const a = await account();
    const res = await s3Put(a.key, "/ipfs/backup/big.bin", file.car, { "x-amz-meta-import": "car" });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-stowage-cid")).toBe(v1(file.root));
    expect((await a.client.list("ipfs")).Object.map((e) => [e.Name, e.Cid, e.Size])).toEqual([["backup/big.bin", v1(file.root), big.byteLength]]);
    const back = new Uint8Array(await (await a.client.download("ipfs", file.root)).arrayBuffer());
    expect(sha(back)).toBe(sha(big));
  });

  test("GetObject of a folder's key is refused before any byte or charge, however large the folder", async () => {
    const a = await account();
    mkdirSync(join(dir, "album"), { recursive: true });
    await Bun.write(join(dir, "album", "photo.bin"), crypto.getRandomValues(new Uint8Array(60_000)).subarray(0, 50_000));
    await Bun.write(join(dir, "album", "big.bin"), big);
    const album = await ipfsCarPack(join(dir, "album"));
    expect((await s3Put(a.key, "/ipfs/album", album.car, { "x-amz-meta-import": "car" })).status).toBe(200);
    const traffic = await a.left("traffic");
    // Past the size read whole: a body that would stream, so refused before its 200.
    const res = await s3Send("GET", a.key, "/ipfs/album");
    expect(res.status).toBe(405);
    expect(await res.text()).toContain("<Code>MethodNotAllowed</Code>");
    expect(await a.left("traffic")).toBe(traffic);
  });

  test("a flipped byte, a missing block, too little space: S3's errors, nothing kept", async () => {
    const stored = await blocks();
    const roomy = await account();
    const tight = await account(2 * MiB);
    const before = [await roomy.left("space"), await tight.left("space")];
    const codeOf = async (res: Response) => [res.status, /<Code>([^<]*)</.exec(await res.text())?.[1]];
    const flipped = await s3Put(roomy.key, "/ipfs/x.bin", await flipByteOfBlock(file.car, 1), { "x-amz-meta-import": "car" });
    expect(await codeOf(flipped)).toEqual([400, "InvalidRequest"]);
    const leaf = (await carParts(site.car)).blocks.find((b) => b.cid.code === raw.code);
    const missing = await s3Put(roomy.key, "/ipfs/x.bin", await withoutBlock(site.car, leaf!.cid), { "x-amz-meta-import": "car" });
    expect(await missing.text()).toContain("is missing from the CAR");
    const over = await s3Put(tight.key, "/ipfs/x.bin", file.car, { "x-amz-meta-import": "car" });
    expect(await codeOf(over)).toEqual([403, "QuotaExceeded"]);
    for (const a of [roomy, tight]) expect((await a.client.list("ipfs")).Object).toEqual([]);
    expect([await roomy.left("space"), await tight.left("space")]).toEqual(before);
    expect(await blocks()).toEqual(stored);
  });

  test("into dfs it is refused: a CAR's blocks keep their Cids on ipfs only", async () => {
    const a = await account();
    const res = await s3Put(a.key, "/dfs/x.bin", file.car, { "x-amz-meta-import": "car" });
    expect(res.status).toBe(405);
    expect(await res.text()).toContain("a CAR is imported into ipfs");
  });
});
