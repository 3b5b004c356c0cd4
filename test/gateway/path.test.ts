/**
 * The path gateway (D25) over a real socket: `/ipfs/<cid>[/<path>]` of public, free content
 * answers the file itself with no voucher — Range, ETag, If-None-Match, HEAD — from the operator's
 * budget; directories (plain and HAMT-sharded) by path, and as a listing whose names cannot break
 * out of their text; nothing that could run is rendered on the gateway's origin; what is not
 * public gets a 404 or 403 that says how to read it (never the download's 517), and a voucher
 * still makes it the download; the site origin (STOWAGE_GATEWAY_ORIGIN) serves sites and gets
 * browsers sent to it.
 */
import { describe, expect, test } from "bun:test";
import * as dagPb from "@ipld/dag-pb";
import { UnixFS } from "ipfs-unixfs";
import { CID } from "multiformats/cid";
import { sha256 } from "multiformats/hashes/sha2";
import { LISTING_MAX } from "../../src/gateway/path.ts";
import { parseSiteOrigin } from "../../src/gateway/site.ts";
import { randomBytes, trustlessGateway } from "./support.ts";

const MiB = 1024 * 1024;
const SANDBOX = "sandbox; default-src 'none'";

const tg = await trustlessGateway();
const served = await tg.serve();
const { url } = served;
const owner = await tg.user();
// 2 MiB + a bit: a dag-pb root over raw leaves (D9's 1 MiB chunks), so ranges cross leaves.
const content = randomBytes(2 * MiB + 333);
const file = await tg.publish(owner, content, { name: "notes.txt" });
const text = (s: string) => new TextEncoder().encode(s);
const get = (path: string, init?: RequestInit) => fetch(`${url}${path}`, { redirect: "manual", ...init });

describe("a public file", () => {
  test("is the file itself: its bytes, its type from the published name, immutable, never sniffed", async () => {
    const res = await get(`/ipfs/${file.Cid}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/plain");
    expect(res.headers.get("content-length")).toBe(String(content.byteLength));
    expect(res.headers.get("etag")).toBe(`"${file.Cid}"`);
    expect(res.headers.get("cache-control")).toBe("public, max-age=29030400, immutable");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("content-security-policy")).toBe(SANDBOX);
    expect(res.headers.get("accept-ranges")).toBe("bytes");
    expect(res.headers.get("x-ipfs-path")).toBe(`/ipfs/${file.Cid}`);
    // Passive: shown in the browser, not saved.
    expect(res.headers.get("content-disposition")).toBeNull();
    expect(Buffer.from(await res.arrayBuffer())).toEqual(Buffer.from(content));
  });

  test("Range: the bytes asked for, across leaves; 416 past the end", async () => {
    const from = MiB - 10;
    const res = await get(`/ipfs/${file.Cid}`, { headers: { range: `bytes=${from}-${from + 99}` } });
    expect(res.status).toBe(206);
    expect(res.headers.get("content-range")).toBe(`bytes ${from}-${from + 99}/${content.byteLength}`);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(Buffer.from(content.subarray(from, from + 100)));
    const tail = await get(`/ipfs/${file.Cid}`, { headers: { range: "bytes=-5" } });
    expect(Buffer.from(await tail.arrayBuffer())).toEqual(Buffer.from(content.subarray(content.byteLength - 5)));
    const past = await get(`/ipfs/${file.Cid}`, { headers: { range: `bytes=${content.byteLength}-` } });
    expect(past.status).toBe(416);
    expect(past.headers.get("content-range")).toBe(`bytes */${content.byteLength}`);
  });

  test("If-None-Match with its ETag: 304 and nothing sent; HEAD: the length and no body", async () => {
    const before = await served.gateway.egress.used(owner.address);
    const cached = await get(`/ipfs/${file.Cid}`, { headers: { "if-none-match": `"${file.Cid}"` } });
    expect(cached.status).toBe(304);
    expect((await cached.arrayBuffer()).byteLength).toBe(0);
    const head = await get(`/ipfs/${file.Cid}`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe(String(content.byteLength));
    expect((await head.arrayBuffer()).byteLength).toBe(0);
    // Neither sent any of the file: the owner's allowance is as it was.
    expect(await served.gateway.egress.used(owner.address)).toBe(before);
  });

  test("?filename= names it (and its type); ?download=true makes it an attachment", async () => {
    const res = await get(`/ipfs/${file.Cid}?filename=report.csv&download=true`);
    expect(res.headers.get("content-type")).toStartWith("text/csv");
    expect(res.headers.get("content-disposition")).toStartWith('attachment; filename="report.csv"');
    await res.arrayBuffer();
  });

  test("is paid from the owner's daily allowance by the operator, never the owner's traffic", async () => {
    const other = await tg.user();
    const small = await tg.publish(other, randomBytes(100_000), { name: "photo.png" });
    const meter = await tg.serve({ allowance: 150_000 });
    const first = await fetch(`${meter.url}/ipfs/${small.Cid}`);
    expect(first.status).toBe(200);
    expect((await first.arrayBuffer()).byteLength).toBe(100_000);
    expect(await meter.gateway.egress.used(other.address)).toBe(100_000);
    // The second would pass the allowance: refused before any byte, with when to come back.
    const second = await fetch(`${meter.url}/ipfs/${small.Cid}`);
    expect(second.status).toBe(429);
    expect(Number(second.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await meter.gateway.egress.used(other.address)).toBe(100_000);
  });

  test("the per-client limit counts path-gateway bytes too", async () => {
    const limited = await tg.serve({ perClient: 3 * MiB });
    const once = await fetch(`${limited.url}/ipfs/${file.Cid}`, { headers: { "x-forwarded-for": "203.0.113.7" } });
    expect(once.status).toBe(200);
    await once.arrayBuffer();
    const twice = await fetch(`${limited.url}/ipfs/${file.Cid}`, { headers: { "x-forwarded-for": "203.0.113.7" } });
    expect(twice.status).toBe(429);
    // Another address has its own hour.
    const elsewhere = await fetch(`${limited.url}/ipfs/${file.Cid}`, { headers: { "x-forwarded-for": "203.0.113.8" } });
    expect(elsewhere.status).toBe(200);
    await elsewhere.arrayBuffer();
  });
});

describe("nothing runs on the gateway's origin", () => {
  test("HTML, SVG and XML are attachments under the sandbox; a script is sent as text", async () => {
    const cases = [
      { name: "page.html", type: "text/html", attachment: true },
      { name: "drawing.svg", type: "image/svg+xml", attachment: true },
      { name: "feed.xml", type: "xml", attachment: true },
      { name: "app.js", type: "text/plain", attachment: true },
      { name: "cat.png", type: "image/png", attachment: false },
    ];
    for (const c of cases) {
      const f = await tg.publish(owner, text(`<script>parent.ran = "${c.name}"</script>${crypto.randomUUID()}`), { name: c.name });
      const res = await get(`/ipfs/${f.Cid}`);
      expect({ name: c.name, status: res.status }).toEqual({ name: c.name, status: 200 });
      expect(res.headers.get("content-type")).toContain(c.type);
      expect(res.headers.get("content-type")).not.toContain("javascript");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(res.headers.get("content-security-policy")).toBe(SANDBOX);
      expect({ name: c.name, attachment: (res.headers.get("content-disposition") ?? "").startsWith("attachment") }).toEqual({ name: c.name, attachment: c.attachment });
      await res.arrayBuffer();
    }
  });
});

describe("what is not public says how to read it, and is never a 517", () => {
  test("a private file and an unknown Cid: one 404, in the storage error shape, naming stowage get", async () => {
    const secret = await owner.store.upload("ipfs", randomBytes(5000), { name: "secret.bin" });
    const unknown = CID.createV1(0x55, await sha256.digest(randomBytes(64))).toString();
    const answers = [];
    for (const cid of [secret.Cid, unknown]) {
      const res = await get(`/ipfs/${cid}`);
      expect(res.status).toBe(404);
      const body = (await res.json()) as { Code: string; Description: string; HTTPStatusCode: number };
      expect(body.Code).toBe("NotFound");
      expect(body.HTTPStatusCode).toBe(404);
      expect(body.Description).toContain(`stowage get ${cid}`);
      expect(body.Description).toContain("stowage link");
      answers.push(body.Description.replaceAll(cid, "CID"));
    }
    // Private and unknown cannot be told apart.
    expect(answers[0]).toBe(answers[1] as string);
  });

  test("a priced entry: 403, saying it is for sale and how to read it once bought", async () => {
    const sold = await tg.publish(owner, randomBytes(4000), { name: "sold.bin", isPublic: false, price: 1000 });
    const res = await get(`/ipfs/${sold.Cid}`);
    expect(res.status).toBe(403);
    const body = (await res.json()) as { Code: string; Description: string };
    expect(body.Code).toBe("AccessDenied");
    expect(body.Description).toContain("for sale");
    expect(body.Description).toContain(`stowage get ${sold.Cid}`);
  });

  test("an entry for chosen readers: 403, saying so", async () => {
    const granted = await tg.publish(owner, randomBytes(4000), { name: "friends.bin", isPublic: false, price: 0 });
    const res = await get(`/ipfs/${granted.Cid}`);
    expect(res.status).toBe(403);
    expect(((await res.json()) as { Description: string }).Description).toContain("readers its owner chose");
  });

  test("a voucher makes /ipfs/<cid> the download, as before: the owner's file, and a bad voucher's 517", async () => {
    const res = await owner.store.download("ipfs", file.Cid, { range: [0, 99] });
    expect(Buffer.from(await res.arrayBuffer())).toEqual(Buffer.from(content.subarray(0, 100)));
    const bad = await get(`/ipfs/${file.Cid}?size=1&sign=0x00`);
    const without = await tg.gw.app.handle(new Request(`http://stowage.test/ipfs/${file.Cid}?size=1&sign=0x00`));
    expect(bad.status).toBe(without.status);
    expect(await bad.json()).toEqual(await without.json());
  });

  test("a Cid that is no Cid: 400; public reads off: 403 saying to use a voucher", async () => {
    expect((await get("/ipfs/not-a-cid/x")).status).toBe(400);
    const off = await tg.serve({ allowance: 0 });
    const res = await fetch(`${off.url}/ipfs/${file.Cid}`);
    expect(res.status).toBe(403);
    expect(((await res.json()) as { Description: string }).Description).toContain("stowage get");
  });
});

describe("directories", () => {
  const evil = `<img src=x onerror=alert(1)>"'.txt`;
  const tree = [
    { path: "index.html", content: text("<!doctype html><title>site</title><script>document.title = 'ran'</script>") },
    { path: "docs/a.txt", content: text("alpha") },
    { path: "docs/b c.txt", content: text("beta with a space") },
    { path: `docs/${evil}`, content: text("evil name") },
  ];
  let root: CID;
  test("a file by its path, its name giving its type; a missing one 404", async () => {
    const other = await tg.user();
    root = await tg.publishTree(other, tree, { name: "site" });
    const res = await get(`/ipfs/${root}/docs/b%20c.txt`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/plain");
    expect(await res.text()).toBe("beta with a space");
    expect(res.headers.get("x-ipfs-roots")?.split(",")).toHaveLength(3);
    const head = await get(`/ipfs/${root}/docs/a.txt`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe("5");
    expect((await get(`/ipfs/${root}/docs/nothing.txt`)).status).toBe(404);
    expect((await get(`/ipfs/${root}/docs/a.txt/deeper`)).status).toBe(404);
    // Blocks and CARs are asked by CID alone.
    expect((await get(`/ipfs/${root}/docs/a.txt?format=raw`)).status).toBe(406);
  });

  test("without its trailing slash, a directory is sent to it (so relative links work)", async () => {
    const res = await get(`/ipfs/${root}/docs?x=1`);
    expect(res.status).toBe(301);
    expect(res.headers.get("location")).toBe(`/ipfs/${root}/docs/?x=1`);
    const top = await get(`/ipfs/${root}`);
    expect(top.status).toBe(301);
    expect(top.headers.get("location")).toBe(`/ipfs/${root}/`);
  });

  test("a listing on this origin, never its index.html; every name escaped, every link relative", async () => {
    const res = await get(`/ipfs/${root}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("content-security-policy")).toBe(SANDBOX);
    const html = await res.text();
    expect(html).toContain(`href="./index.html"`);
    const etag = res.headers.get("etag") as string;
    expect(etag).toBe(`W/"${root}.listing"`);
    expect((await get(`/ipfs/${root}/`, { headers: { "if-none-match": etag } })).status).toBe(304);
    expect(html).not.toContain("<script");
    const docs = await (await get(`/ipfs/${root}/docs/`)).text();
    expect(docs).toContain(`href="./b%20c.txt"`);
    expect(docs).toContain(`href="./${encodeURIComponent(evil).replaceAll("'", "&#39;")}"`);
    expect(docs).toContain("&lt;img src=x onerror=alert(1)&gt;&quot;&#39;.txt");
    expect(docs).not.toContain("<img");
    expect(docs).toContain(`href="../"`);
    // The evil name itself is served by its encoded path.
    expect(await (await get(`/ipfs/${root}/docs/${encodeURIComponent(evil)}`)).text()).toBe("evil name");
  });

  test("a HAMT-sharded directory: lookups by name and a listing of every entry", async () => {
    const other = await tg.user();
    const many = Array.from({ length: 300 }, (_, i) => ({ path: `f${i}.txt`, content: text(`file ${i}`) }));
    const sharded = await tg.publishTree(other, many, { name: "many", shardAbove: 1000 });
    const rootBlock = new Uint8Array(await (await get(`/ipfs/${sharded}?format=raw`)).arrayBuffer());
    expect(UnixFS.unmarshal(dagPb.decode(rootBlock).Data as Uint8Array).type).toBe("hamt-sharded-directory");
    for (const i of [0, 137, 299]) expect(await (await get(`/ipfs/${sharded}/f${i}.txt`)).text()).toBe(`file ${i}`);
    expect((await get(`/ipfs/${sharded}/f300.txt`)).status).toBe(404);
    const listing = await (await get(`/ipfs/${sharded}/`)).text();
    for (let i = 0; i < 300; i++) expect(listing).toContain(`href="./f${i}.txt"`);
    // Over S3 on a shared machine each of its ≈ 350 blocks is a round trip to store and to read.
  }, 30_000);

  test("a crafted sharded directory (shards of 256 links to one shard, down to one without entries) costs one listing a bounded number of reads", async () => {
    const other = await tg.user();
    const data = new UnixFS({ type: "hamt-sharded-directory", fanout: 256n, hashType: 0x22n }).marshal();
    const blocks: { cid: CID; bytes: Uint8Array }[] = [];
    const shard = async (links: dagPb.PBLink[]) => {
      const bytes = dagPb.encode(dagPb.prepare({ Data: data, Links: links }));
      const cid = CID.createV1(dagPb.code, await sha256.digest(bytes));
      blocks.push({ cid, bytes });
      return cid;
    };
    // Four levels of 256 links each: 256⁴ walks to the empty shard, five blocks stored.
    let below = await shard([]);
    for (let level = 0; level < 4; level++) {
      const to = below;
      below = await shard(Array.from({ length: 256 }, (_, i) => ({ Name: i.toString(16).toUpperCase().padStart(2, "0"), Hash: to, Tsize: 1 })));
    }
    const root = await tg.publishBlocks(other, below, blocks, 0, { name: "crafted" });
    const bytes = tg.store.bytes.bind(tg.store);
    let reads = 0;
    tg.store.bytes = (key) => (reads++, bytes(key));
    try {
      const res = await get(`/ipfs/${root}/`);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain("Only the first 0 entries are shown");
    } finally {
      tg.store.bytes = bytes;
    }
    // The root, then at most LISTING_MAX shards.
    expect(reads).toBeGreaterThan(LISTING_MAX / 2);
    expect(reads).toBeLessThanOrEqual(LISTING_MAX + 1);
  }, 30_000);
});

describe("the site origin (STOWAGE_GATEWAY_ORIGIN)", () => {
  const site = parseSiteOrigin("http://{cid}.ipfs.sites.test");
  test("a browser opening a path-gateway URL here is sent there; other clients get the file here", async () => {
    const other = await tg.user();
    const root = await tg.publishTree(other, [{ path: "index.html", content: text("<h1>hi</h1>") }], { name: "hi" });
    const sites = await tg.serve({ site });
    const nav = await fetch(`${sites.url}/ipfs/${root}/index.html?v=2`, { redirect: "manual", headers: { "sec-fetch-mode": "navigate", "sec-fetch-dest": "document" } });
    expect(nav.status).toBe(301);
    expect(nav.headers.get("location")).toBe(`http://${root.toV1()}.ipfs.sites.test/index.html?v=2`);
    const plain = await fetch(`${sites.url}/ipfs/${root}/index.html`, { headers: { accept: "*/*" } });
    expect(plain.status).toBe(200);
    expect(plain.headers.get("content-disposition")).toStartWith("attachment");
    await plain.arrayBuffer();
  });

  test("there, a directory's index.html is the site's page, served as it is; nothing else of the gateway answers", async () => {
    const other = await tg.user();
    const root = await tg.publishTree(other, [{ path: "index.html", content: text("<h1>site</h1><script>1</script>") }, { path: "css/a.css", content: text("h1{}") }], { name: "web" });
    const sites = await tg.serve({ site });
    const at = (path: string, init?: RequestInit) => sites.app.handle(new Request(`http://${root}.ipfs.sites.test${path}`, init));
    const page = await at("/");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toStartWith("text/html");
    expect(page.headers.get("content-security-policy")).toBeNull();
    expect(page.headers.get("content-disposition")).toBeNull();
    expect(page.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await page.text()).toBe("<h1>site</h1><script>1</script>");
    expect(await (await at("/css/a.css")).text()).toBe("h1{}");
    expect((await at("/css")).headers.get("location")).toBe("/css/");
    // Not the console, not the account API, not an upload.
    const notConsole = await at("/healthz");
    expect(notConsole.status).toBe(404);
    expect((await at("/", { method: "POST" })).status).toBe(405);
    // A CID it does not serve is refused there as here.
    expect((await sites.app.handle(new Request(`http://${CID.parse(file.Cid).toV1()}x.ipfs.sites.test/`))).status).toBe(400);
  });

  test("a plain origin serves /ipfs/<cid>/… only", async () => {
    const plainSite = parseSiteOrigin("https://gw.sites.test");
    const sites = await tg.serve({ site: plainSite });
    const res = await sites.app.handle(new Request(`https://gw.sites.test/ipfs/${file.Cid}`));
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect((await sites.app.handle(new Request("https://gw.sites.test/v2/auth/me"))).status).toBe(404);
  });
});

test("a HEAD on /ipfs/<cid> with its owner's Bearer token tells a private file's headers; without one the path gateway knows nothing of it", async () => {
  const bytes = randomBytes(3_000);
  const entry = await owner.store.upload("ipfs", bytes, { name: "private.bin" });
  const withToken = await get(`/ipfs/${entry.Cid}`, { method: "HEAD", headers: { authorization: `Bearer ${owner.store.accessToken}` } });
  expect(withToken.status).toBe(200);
  expect(withToken.headers.get("content-length")).toBe(String(bytes.length));
  expect(withToken.headers.get("content-disposition")).toContain("private.bin");
  const bare = await get(`/ipfs/${entry.Cid}`, { method: "HEAD" });
  expect(bare.status).toBe(404);
  expect(bare.headers.get("content-disposition")).toBeNull();
});
