// Download (spec 4.1 row 5, rule 3; D6, D9): GET /{dfs|ipfs}/<cid>?size=&sign= with a traffic
// voucher as the only credential. Headers, Range, HEAD, the read rule, vouchers, and metering of
// the bytes really sent.
import { describe, expect, test } from "bun:test";
import type { Address, LocalAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { connectGateway } from "../../src/sdk/chain.ts";
import { StorageApiError } from "../../src/sdk/storage.ts";
import { get, readJson } from "../support/app.ts";
import { BASE, testGateway } from "../support/storage.ts";

/** reader/kind/cid → the owner whose (stand-in) directory entry grants the read. */
const grants = new Map<string, Address>();
const gw = await testGateway({ readGrant: async (reader, kind, cid) => grants.get(`${reader}/${kind}/${cid}`) });
const MiB = 1024 * 1024;

const owner = await gw.user();
const NAME = "Résumé – 2024 (final).pdf";
const bytes = crypto.getRandomValues(new Uint8Array(2 * MiB + 123));
const SIZE = bytes.length;
const onDfs = await owner.client.upload("dfs", bytes, { name: NAME });
const onIpfs = await owner.client.upload("ipfs", bytes, { name: NAME });
const CID = onDfs.Cid;

const used = async (account: LocalAccount) => (await gw.storage?.vouchers.usedBy(account.address)) ?? 0;

/** A voucher for `bytes` more than `account` has used, distinct from any other, for the file `cid`. */
async function voucher(account: LocalAccount, bytes: number, cid = CID) {
  const size = (await used(account)) + bytes + 1 + Math.floor(Math.random() * 1_000_000);
  return { size: String(size), sign: await gw.sign.voucher(account, size, cid) };
}

function download(kind: string, cid: string, v: { size?: string; sign?: string }, o: { method?: string; range?: string } = {}) {
  const q = new URLSearchParams(Object.entries(v).filter((e): e is [string, string] => e[1] !== undefined));
  return gw.app.handle(new Request(`${BASE}/${kind}/${cid}?${q}`, { method: o.method ?? "GET", headers: o.range ? { range: o.range } : {} }));
}

async function ranged(kind: "dfs" | "ipfs", range: string, length: number) {
  return download(kind, CID, await voucher(owner.account, length), { range });
}

async function failure(p: Promise<unknown>): Promise<StorageApiError> {
  const e = await p.then(() => undefined, (err: unknown) => err);
  expect(e).toBeInstanceOf(StorageApiError);
  return e as StorageApiError;
}

describe("a whole file", () => {
  test.each(["dfs", "ipfs"] as const)("%s: 200 with length, type, RFC 6266 disposition, ETag = Cid, no-store and no-referrer", async (kind) => {
    const before = await used(owner.account);
    const res = await owner.client.download(kind, CID, { size: SIZE });
    expect(res.status).toBe(200);
    expect(Object.fromEntries(res.headers)).toMatchObject({
      "content-length": String(SIZE),
      "content-type": "application/pdf",
      "content-disposition": `attachment; filename="R_sum_ _ 2024 (final).pdf"; filename*=UTF-8''R%C3%A9sum%C3%A9%20%E2%80%93%202024%20%28final%29.pdf`,
      etag: `"${CID}"`,
      "accept-ranges": "bytes",
      "cache-control": "no-store",
      "referrer-policy": "no-referrer",
    });
    const star = /filename\*=UTF-8''(.+)$/.exec(res.headers.get("content-disposition") ?? "")?.[1] ?? "";
    expect(decodeURIComponent(star)).toBe(NAME);
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(bytes);
    expect((await used(owner.account)) - before).toBe(SIZE);
  });

  test("the Content-Type follows the name; an unknown extension is application/octet-stream", async () => {
    const { client } = await gw.user();
    const cases = { "notes.txt": "text/plain", "photo.JPG": "image/jpeg", "data.json": "application/json", "blob.zzz": "application/octet-stream", README: "application/octet-stream" };
    for (const [name, type] of Object.entries(cases)) {
      const e = await client.upload("dfs", new TextEncoder().encode(`${name} ${Math.random()}`), { name });
      const res = await client.download("dfs", e.Cid, { size: e.Size });
      expect(res.headers.get("content-type")).toStartWith(type);
      expect(res.headers.get("content-disposition")).toBe(`attachment; filename="${name}"; filename*=UTF-8''${name}`);
      await res.arrayBuffer();
    }
  });

  // An uploaded page or image must never run in the gateway's origin, where the console and the
  // account API live: a download is an attachment, never sniffed, sandboxed if rendered at all,
  // and a script is not sent with a script type (`<script src>` ignores the attachment).
  test.each(["dfs", "ipfs"] as const)("%s: an uploaded .html, .svg or .js comes back as an attachment, with nosniff and the sandbox (GET and HEAD)", async (kind) => {
    const { client, account } = await gw.user();
    const files = {
      "page.html": ["<html><script>alert(document.cookie)</script></html>", "text/html"],
      "pic.svg": ['<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>', "image/svg+xml"],
      "app.js": ["fetch('/v2/auth/me')", "text/plain; charset=utf-8"],
    } as const;
    for (const [name, [text, type]] of Object.entries(files)) {
      const e = await client.upload(kind, new TextEncoder().encode(`${text}<!-- ${Math.random()} -->`), { name });
      for (const method of ["GET", "HEAD"]) {
        const res = await download(kind, e.Cid, await voucher(account, e.Size, e.Cid), { method });
        expect(res.status).toBe(200);
        expect({ name, method, headers: Object.fromEntries(res.headers) }).toMatchObject({
          name,
          method,
          headers: {
            "content-type": expect.stringMatching(new RegExp(`^${type.replace("+", "\\+")}`)),
            "content-disposition": `attachment; filename="${name}"; filename*=UTF-8''${name}`,
            "x-content-type-options": "nosniff",
            "content-security-policy": "sandbox; default-src 'none'",
          },
        });
        await res.arrayBuffer();
      }
    }
  });

  test("the traffic counter (GET /traffichash `used`) grows by exactly the bytes sent", async () => {
    const before = Number((await owner.client.trafficHash(0)).used);
    await (await owner.client.download("dfs", CID, { size: SIZE })).arrayBuffer();
    await (await owner.client.download("ipfs", CID, { range: [10, 19] })).arrayBuffer();
    expect(Number((await owner.client.trafficHash(0)).used)).toBe(before + SIZE + 10);
  });
});

describe("Range", () => {
  const cases: [string, number, number][] = [
    ["bytes=0-0", 0, 0],
    [`bytes=${SIZE - 1}-${SIZE - 1}`, SIZE - 1, SIZE - 1],
    [`bytes=${SIZE - 1}-`, SIZE - 1, SIZE - 1],
    [`bytes=${MiB - 6}-${MiB + 9}`, MiB - 6, MiB + 9],
    [`bytes=${MiB}-${2 * MiB}`, MiB, 2 * MiB],
    ["bytes=-100", SIZE - 100, SIZE - 1],
    [`bytes=-${SIZE + 50}`, 0, SIZE - 1],
    [`bytes=100-${SIZE * 10}`, 100, SIZE - 1],
  ];
  for (const kind of ["dfs", "ipfs"] as const) {
    test.each(cases)(`${kind}: %s → 206 with Content-Range`, async (range, start, end) => {
      const before = await used(owner.account);
      const res = await ranged(kind, range, end - start + 1);
      expect(res.status).toBe(206);
      expect(res.headers.get("content-range")).toBe(`bytes ${start}-${end}/${SIZE}`);
      expect(res.headers.get("content-length")).toBe(String(end - start + 1));
      expect(res.headers.get("etag")).toBe(`"${CID}"`);
      expect(new Uint8Array(await res.arrayBuffer())).toEqual(bytes.subarray(start, end + 1));
      expect((await used(owner.account)) - before).toBe(end - start + 1);
    });
  }

  test.each([`bytes=${SIZE}-`, `bytes=${SIZE + 5}-${SIZE + 10}`, "bytes=-0"])("%s → 416 with Content-Range: bytes */size, voucher unused", async (range) => {
    const v = await voucher(owner.account, SIZE);
    const res = await download("dfs", CID, v, { range });
    expect(res.status).toBe(416);
    expect(res.headers.get("content-range")).toBe(`bytes */${SIZE}`);
    await res.arrayBuffer();
    // The voucher was not used: it still buys the whole file.
    const whole = await download("dfs", CID, v);
    expect(whole.status).toBe(200);
    expect((await whole.arrayBuffer()).byteLength).toBe(SIZE);
  });

  test.each(["bytes=5-2", "items=0-1", "bytes=0-1,5-6", "bytes=a-b"])("an ignorable Range (%s) gives the whole file", async (range) => {
    const res = await download("dfs", CID, await voucher(owner.account, SIZE), { range });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-range")).toBeNull();
    expect((await res.arrayBuffer()).byteLength).toBe(SIZE);
  });
});

describe("HEAD", () => {
  test("gives the headers, uses no voucher and charges nothing; the same voucher then buys a GET", async () => {
    const v = await voucher(owner.account, SIZE);
    const before = await used(owner.account);
    for (const range of [undefined, "bytes=0-9"]) {
      const res = await download("dfs", CID, v, { method: "HEAD", range });
      expect(res.status).toBe(range ? 206 : 200);
      expect(res.headers.get("content-length")).toBe(range ? "10" : String(SIZE));
      expect(res.headers.get("etag")).toBe(`"${CID}"`);
      expect(res.headers.get("content-type")).toBe("application/pdf");
      expect((await res.arrayBuffer()).byteLength).toBe(0);
    }
    expect((await used(owner.account))).toBe(before);
    const res = await download("dfs", CID, v);
    expect(res.status).toBe(200);
    expect((await res.arrayBuffer()).byteLength).toBe(SIZE);
    expect((await used(owner.account))).toBe(before + SIZE);
  });

  test("the SDK learns a file's size from HEAD", async () => {
    expect(await owner.client.sizeOf("ipfs", CID)).toBe(SIZE);
  });

  test("still needs a valid voucher and the right to read", async () => {
    expect((await download("dfs", CID, {}, { method: "HEAD" })).status).toBe(517);
    const stranger = await gw.chain.anvil.newAccount();
    expect((await download("dfs", CID, await voucher(stranger, 1), { method: "HEAD" })).status).toBe(403);
  });
});

describe("who may read", () => {
  test("missing or bad voucher → 517", async () => {
    const good = await voucher(owner.account, SIZE);
    const cases: { size?: string; sign?: string }[] = [
      {},
      { size: good.size },
      { sign: good.sign },
      { size: good.size, sign: "0x1234" },
      { size: good.size, sign: `0x${"00".repeat(65)}` },
      { size: "many", sign: good.sign },
      { size: "-1", sign: good.sign },
      { size: "99999999999999999999", sign: good.sign },
    ];
    for (const v of cases) {
      const res = await download("dfs", CID, v);
      expect({ v, status: res.status }).toEqual({ v, status: 517 });
      expect(await readJson(res)).toMatchObject({ Code: "Address", HTTPStatusCode: 517 });
    }
    expect((await download("dfs", CID, good)).status).toBe(200);
  });

  test("a reader who neither owns the file nor has a directory grant → 403; with a grant → 200", async () => {
    const reader = await gw.user();
    const e = await failure(reader.client.download("dfs", CID, { size: SIZE }));
    expect(e.status).toBe(403);
    expect(e.body).toMatchObject({ Code: "AccessDenied", HTTPStatusCode: 403 });
    grants.set(`${reader.account.address}/dfs/${CID}`, owner.account.address);
    const res = await reader.client.download("dfs", CID, { range: [0, 99] });
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(bytes.subarray(0, 100));
    // A grant on dfs is not one on ipfs.
    expect((await failure(reader.client.download("ipfs", CID, { size: SIZE }))).status).toBe(403);
  });

  test("owning the Cid on one back-end does not open the other", async () => {
    const { client } = await gw.user();
    const e = await client.upload("ipfs", new TextEncoder().encode(`only on ipfs ${Math.random()}`), { name: "i.txt" });
    expect((await failure(client.download("dfs", e.Cid, { size: e.Size }))).status).toBe(403);
  });

  test("a reused voucher → 402", async () => {
    const v = await voucher(owner.account, 1000);
    expect((await download("dfs", CID, v, { range: "bytes=0-9" })).status).toBe(206);
    const again = await download("dfs", CID, v, { range: "bytes=0-9" });
    expect(again.status).toBe(402);
    expect(await readJson(again)).toMatchObject({ Code: "PaymentRequired", Description: expect.stringMatching(/already used/) });
  });

  test("a voucher too small for the transfer → 402, and nothing is counted", async () => {
    const size = (await used(owner.account)) + SIZE - 1;
    const before = await used(owner.account);
    const res = await download("dfs", CID, { size: String(size), sign: await gw.sign.voucher(owner.account, size, CID) });
    expect(res.status).toBe(402);
    expect((await used(owner.account))).toBe(before);
    // The same voucher covers a smaller range.
    expect((await download("dfs", CID, { size: String(size), sign: await gw.sign.voucher(owner.account, size, CID) }, { range: "bytes=0-99" })).status).toBe(206);
  });

  test("not a Cid → 400; a Cid nobody stores here → 403", async () => {
    expect((await download("dfs", "not-a-cid", await voucher(owner.account, 10))).status).toBe(400);
    const nowhere = "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    expect((await download("dfs", nowhere, await voucher(owner.account, 10, nowhere))).status).toBe(403);
  });

  test("the other back-end's file of the same owner is read with its own kind", async () => {
    expect(onIpfs.Cid).toBe(CID);
    const res = await owner.client.download("ipfs", CID, { range: [MiB, MiB + 3] });
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(bytes.subarray(MiB, MiB + 4));
  });
});

describe("a download the client cancels", () => {
  test.each(["dfs", "ipfs"] as const)("%s: only the bytes really sent are counted", async (kind) => {
    const before = await used(owner.account);
    const res = await download(kind, CID, await voucher(owner.account, SIZE));
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let received = 0;
    while (received < SIZE / 2) {
      const { value, done } = await reader.read();
      if (done) break;
      received += value.byteLength;
    }
    expect(received).toBeLessThan(SIZE);
    // A slow client: it pauses, as a reader on a slow link would, then goes away. Read-ahead
    // the client never got must not be counted.
    await Bun.sleep(30);
    await reader.cancel();
    expect((await used(owner.account)) - before).toBe(received);
  });
});

test("a download by an SDK client acting with a delegate key (its vouchers name the DID it reads for)", async () => {
  const delegate = privateKeyToAccount(generatePrivateKey());
  await (await connectGateway(BASE, { account: owner.account, fetch: gw.fetch })).addDelegate(delegate.address, 3600n);
  const { client } = await gw.user({ account: delegate, did: owner.client.did });
  expect((await client.list("dfs")).Object).toEqual([onDfs]);
  const res = await client.download("dfs", CID, { range: [0, 9] });
  expect(new Uint8Array(await res.arrayBuffer())).toEqual(bytes.subarray(0, 10));
  expect(await (await client.download("dfs", CID)).arrayBuffer()).toEqual(bytes.buffer);
  // Naming a DID the payer is no key of, or a malformed one, does not open anything.
  const other = await gw.chain.anvil.newAccount();
  const q = async (did: string) => `size=${(await used(other)) + 10}&sign=${await gw.sign.voucher(other, (await used(other)) + 10, CID)}&did=${encodeURIComponent(did)}`;
  expect((await gw.app.handle(get(`/dfs/${CID}?${await q(owner.client.did)}`, { headers: { range: "bytes=0-9" } }))).status).toBe(403);
  expect((await gw.app.handle(get(`/dfs/${CID}?${await q("did:ethr:0x1:0x12")}`, { headers: { range: "bytes=0-9" } }))).status).toBe(400);
  // The SDK's errors on HEAD are StorageApiErrors too (a HEAD answer has no body to parse).
  const stranger = await gw.user();
  expect((await failure(stranger.client.sizeOf("dfs", CID))).status).toBe(403);
});

test("HEAD of a segment that is not a Cid goes to its own route, not to a download", async () => {
  const res = await gw.app.handle(get("/dfs/listobjects", { method: "HEAD", headers: { authorization: `Bearer ${owner.client.accessToken}` } }));
  expect(res.status).toBe(200);
  const noToken = await gw.app.handle(get("/dfs/delete?id=1", { method: "HEAD" }));
  expect(noToken.status).toBe(401); // delete's Bearer guard, not a download's 517
});

test("a HEAD on /ipfs/<cid> with its owner's Bearer token tells the private file's headers; without a token or voucher it tells nothing", async () => {
  const url = `${BASE}/ipfs/${onIpfs.Cid}`;
  const withToken = await gw.app.handle(new Request(url, { method: "HEAD", headers: { authorization: `Bearer ${owner.client.accessToken}` } }));
  expect(withToken.status).toBe(200);
  expect(withToken.headers.get("content-length")).toBe(String(SIZE));
  expect(withToken.headers.get("content-disposition")).toContain("final");
  const bare = await gw.app.handle(new Request(url, { method: "HEAD" }));
  expect(bare.status).toBe(517);
  expect(bare.headers.get("content-disposition")).toBeNull();
});
