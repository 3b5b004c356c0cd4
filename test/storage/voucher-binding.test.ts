// A voucher reads one file, until its expiry (D22): `Voucher(seller, size, cid, expires)`. One
// seen in a proxy log or a shared link must not read any other file of its payer's (a bought,
// priced entry included), nor anything after it expires; a HEAD tells a file's name and size only
// for an unspent voucher for that file or the Bearer token of an account that may read it; an old
// client's two-field voucher is refused with the type to sign now. Each refusal charges nothing.
import { afterEach, describe, expect, test } from "bun:test";
import type { Address, LocalAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { canonicalDid } from "../../src/identity/did.ts";
import { cidOf } from "../../src/storage/dfs/index.ts";
import { StorageApiError } from "../../src/sdk/storage.ts";
import { readJson } from "../support/app.ts";
import { BASE, testGateway } from "../support/storage.ts";

/** reader/kind/cid → the owner whose (stand-in) directory entry grants the read: a bought entry. */
const grants = new Map<string, Address>();
/** How far the gateway's clock runs ahead of the real one (a voucher's expiry is judged by it). */
let skew = 0;
const gw = await testGateway({ ipfs: false, readGrant: async (reader, kind, cid) => grants.get(`${reader}/${kind}/${cid}`), extra: { now: () => Date.now() + skew } });
afterEach(() => {
  skew = 0;
});

const NEW_TYPE = "Voucher(address seller,uint256 size,string cid,uint64 expires)";
const owner = await gw.user();
const fileA = crypto.getRandomValues(new Uint8Array(5_000));
const fileB = crypto.getRandomValues(new Uint8Array(7_000));
const A = await owner.client.upload("dfs", fileA, { name: "a.bin" });
const B = await owner.client.upload("dfs", fileB, { name: "b.pdf" });
const nowS = () => Math.floor(Date.now() / 1000);

const used = async (account: LocalAccount) => (await gw.storage?.vouchers.usedBy(account.address)) ?? 0;

/** A fresh voucher of `account` for `bytes` more than it used, for the file `cid`. */
async function voucher(account: LocalAccount, cid: string, o: { bytes?: number; expires?: number } = {}) {
  const size = (await used(account)) + (o.bytes ?? 10_000) + 1 + Math.floor(Math.random() * 1_000_000);
  const expires = o.expires ?? 0;
  return { size: String(size), sign: await gw.sign.voucher(account, size, cid, expires), ...(expires ? { expires: String(expires) } : {}) };
}

function send(cid: string, query: Record<string, string>, o: { method?: "GET" | "HEAD"; range?: string; bearer?: string } = {}) {
  const headers: Record<string, string> = { ...(o.range ? { range: o.range } : {}), ...(o.bearer ? { authorization: `Bearer ${o.bearer}` } : {}) };
  return gw.app.handle(new Request(`${BASE}/dfs/${cid}?${new URLSearchParams(query)}`, { method: o.method ?? "GET", headers }));
}

/** What clients signed before vouchers named their file, spelled here as they spelled it. */
const legacyTypes = { Voucher: [{ name: "seller", type: "address" }, { name: "size", type: "uint64" }] } as const;
const oldVoucher = async (account: LocalAccount, size: number) =>
  account.signTypedData({ domain: gw.domain, types: legacyTypes, primaryType: "Voucher", message: { seller: gw.seller, size: BigInt(size) } });

// First in the file, so that no earlier test's resolver lookup is still under way while these count.
describe("a stranger's voucher costs the chain nothing", () => {
  // Any signature recovers to some key. One that may read nothing here is refused before the DID
  // registry is asked, so a stranger cannot make the gateway read the chain (nor fill the
  // resolver's cache) once per request.
  test("a random key's voucher, the payer's voucher for another file, an old-type voucher: 403, no registry read, nothing charged", async () => {
    const stranger = privateKeyToAccount(generatePrivateKey());
    const before = await used(owner.account);
    const hostile = {
      "a random key's": await voucher(stranger, A.Cid),
      "the payer's, for file B": await voucher(owner.account, B.Cid),
      "a random key's, of the old type": { size: "100000", sign: await oldVoucher(stranger, 100_000) },
    };
    const start = gw.registryReads.length;
    for (const [which, v] of Object.entries(hostile)) {
      for (const o of [{}, { range: "bytes=0-9" }, { method: "HEAD" as const }]) {
        const res = await send(A.Cid, v, o);
        expect({ which, o, status: res.status }).toEqual({ which, o, status: 403 });
      }
    }
    expect(gw.registryReads.slice(start)).toEqual([]);
    expect(await used(owner.account)).toBe(before);
  });

  test("naming the owner's DID, a stranger's voucher costs one lookup of its key (only the registry knows the DID's delegates), not one more to explain the refusal", async () => {
    const stranger = privateKeyToAccount(generatePrivateKey());
    const did = canonicalDid(owner.account.address, gw.chain.context.chain.id);
    const v = { ...(await voucher(stranger, A.Cid)), did };
    const start = gw.registryReads.length;
    const res = await send(A.Cid, v);
    expect(res.status).toBe(403);
    expect((await readJson(res)).Description).toContain("not a key of this DID");
    const reads = gw.registryReads.slice(start);
    expect(reads.map((r) => r.functionName).sort()).toEqual(["identityOwner", "validDelegate", "validDelegate"]);
    expect(reads.every((r) => r.functionName === "identityOwner" || r.args.includes(stranger.address))).toBe(true);
  });
});

describe("a voucher reads only the file whose Cid it signs", () => {
  test("a voucher for file A is refused for file B of the same payer (whole, ranged and HEAD), charges nothing, and still reads A", async () => {
    const v = await voucher(owner.account, A.Cid);
    const before = await used(owner.account);
    for (const o of [{}, { range: "bytes=0-9" }, { method: "HEAD" as const }]) {
      const res = await send(B.Cid, v, o);
      expect({ o, status: res.status }).toEqual({ o, status: 403 });
      if (!o.method) expect(await readJson(res)).toMatchObject({ Code: "AccessDenied", Description: expect.stringContaining("only the file whose Cid it signs") });
    }
    expect(await used(owner.account)).toBe(before);
    const res = await send(A.Cid, v);
    expect(res.status).toBe(200);
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(fileA);
    expect(await used(owner.account)).toBe(before + fileA.length);
  });

  test("a buyer's voucher for its own file does not read an entry it bought (nor the reverse)", async () => {
    const buyer = await gw.user();
    const own = await buyer.client.upload("dfs", crypto.getRandomValues(new Uint8Array(1_000)), { name: "own.bin" });
    grants.set(`${buyer.account.address}/dfs/${B.Cid}`, owner.account.address);
    expect((await send(B.Cid, await voucher(buyer.account, own.Cid))).status).toBe(403);
    expect((await send(own.Cid, await voucher(buyer.account, B.Cid))).status).toBe(403);
    const bought = await send(B.Cid, await voucher(buyer.account, B.Cid));
    expect(bought.status).toBe(200);
    expect(new Uint8Array(await bought.arrayBuffer())).toEqual(fileB);
  });

  test("the path's Cid in another spelling (CIDv0 or base36) is the same file: its canonical form is what is signed", async () => {
    const { client, account } = await gw.user();
    // A dag-pb root (two chunks) has a CIDv0 spelling too.
    const bytes = crypto.getRandomValues(new Uint8Array(2 * 1_048_576 + 1));
    const e = await client.upload("dfs", bytes, { name: "big.bin" });
    const { CID } = await import("multiformats/cid");
    const v0 = CID.parse(e.Cid).toV0().toString();
    const res = await send(v0, await voucher(account, e.Cid, { bytes: 100 }), { range: "bytes=0-99" });
    expect(res.status).toBe(206);
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(bytes.subarray(0, 100));
  });

  test("an upload's voucher names the file it uploads: signed for other bytes, it is refused and nothing is kept", async () => {
    const s = await gw.session(owner.account);
    const bytes = crypto.getRandomValues(new Uint8Array(3_000));
    const size = (await used(owner.account)) + 1_000_000;
    const forA = { size: String(size), sign: await gw.sign.voucher(owner.account, size, A.Cid) };
    const before = await used(owner.account);
    // Payload = the bytes' Cid, voucher for A: its signature names another key than the account's.
    const byCid = await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes, payload: await cidOf([bytes]), fields: forA }));
    expect(byCid.status).toBe(517);
    expect((await readJson(byCid)).Description).toContain("a voucher signs the Cid of the file it uploads");
    // Payload = the SHA-256, and a cid field naming A with a voucher for A: the bytes are not A.
    const byField = await gw.app.handle(await gw.uploadRequest(s, { requestID: 2, bytes, fields: { ...forA, cid: A.Cid } }));
    expect(byField.status).toBe(400);
    expect((await readJson(byField)).Description).toBe(`the voucher names the Cid ${A.Cid}, but the file's is ${await cidOf([bytes])}: nothing was kept`);
    // A SHA-256 payload with no cid field names no file for the voucher.
    const noCid = await gw.app.handle(await gw.uploadRequest(s, { requestID: 3, bytes, fields: { cid: undefined } }));
    expect(noCid.status).toBe(400);
    expect(await gw.backends.dfs?.stat(await cidOf([bytes]))).toBeUndefined();
    expect(await used(owner.account)).toBe(before);
    expect((await owner.client.list("dfs")).Object.map((e) => e.Cid).sort()).toEqual([A.Cid, B.Cid].sort());
    // The same request with its own voucher stores it (the refusals claimed no requestID).
    expect((await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes }))).status).toBe(200);
  });
});

describe("expiry", () => {
  test("a voucher past its expiry is refused (GET and HEAD) and charges nothing; before it, it reads its file once", async () => {
    const before = await used(owner.account);
    const expired = await voucher(owner.account, A.Cid, { expires: nowS() - 1 });
    for (const method of ["GET", "HEAD"] as const) {
      const res = await send(A.Cid, expired, { method });
      expect({ method, status: res.status }).toEqual({ method, status: 403 });
      if (method === "GET") expect((await readJson(res)).Description).toMatch(/^Permission denied: this voucher expired at \d{4}-/);
    }
    expect(await used(owner.account)).toBe(before);
    const live = await voucher(owner.account, A.Cid, { expires: nowS() + 3600 });
    expect((await send(A.Cid, live, { method: "HEAD" })).status).toBe(200);
    const res = await send(A.Cid, live);
    expect(res.status).toBe(200);
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(fileA);
  });

  test("the same voucher is refused once the gateway's clock passes its expiry", async () => {
    const v = await voucher(owner.account, A.Cid, { expires: nowS() + 60 });
    expect((await send(A.Cid, v, { method: "HEAD" })).status).toBe(200);
    skew = 61_000;
    expect((await send(A.Cid, v)).status).toBe(403);
    skew = 0;
    expect((await send(A.Cid, v)).status).toBe(200);
  });

  test("the expiry is signed: dropped or changed in the query, the voucher names another key and reads nothing", async () => {
    const v = await voucher(owner.account, A.Cid, { expires: nowS() + 3600 });
    const { expires, ...dropped } = v;
    expect((await send(A.Cid, dropped)).status).toBe(403);
    expect((await send(A.Cid, { ...v, expires: String(Number(expires) + 3600) })).status).toBe(403);
    expect((await send(A.Cid, { ...v, expires: "soon" })).status).toBe(517);
    expect((await send(A.Cid, v)).status).toBe(200);
  });

  test("an upload with an expired voucher is refused before its body; nothing is kept", async () => {
    const s = await gw.session(owner.account);
    const bytes = crypto.getRandomValues(new Uint8Array(2_000));
    const cid = await cidOf([bytes]);
    const size = (await used(owner.account)) + 1_000_000;
    const fields = { size: String(size), sign: await gw.sign.voucher(owner.account, size, cid, nowS() - 5), expires: String(nowS() - 5) };
    const res = await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes, payload: cid, fields }));
    expect(res.status).toBe(403);
    expect((await readJson(res)).Description).toMatch(/expired/);
    expect(await gw.backends.dfs?.stat(cid)).toBeUndefined();
  });
});

describe("HEAD", () => {
  test("without a voucher or a Bearer token it is refused", async () => {
    const res = await send(A.Cid, {}, { method: "HEAD" });
    expect(res.status).toBe(517);
    expect(res.headers.get("content-disposition")).toBeNull();
    expect(res.headers.get("etag")).toBeNull();
  });

  test("an unspent voucher for the Cid: the headers, nothing charged, the voucher not spent (it then buys the GET)", async () => {
    const v = await voucher(owner.account, B.Cid);
    const before = await used(owner.account);
    const head = await send(B.Cid, v, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe(String(fileB.length));
    expect(head.headers.get("content-type")).toBe("application/pdf");
    expect(await used(owner.account)).toBe(before);
    const res = await send(B.Cid, v);
    expect(res.status).toBe(200);
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(fileB);
  });

  test("a spent voucher tells nothing: refused as used; a voucher its payer's count has passed, refused as short", async () => {
    const v = await voucher(owner.account, A.Cid);
    expect((await send(A.Cid, v, { range: "bytes=0-0" })).status).toBe(206);
    const spent = await send(A.Cid, v, { method: "HEAD" });
    expect(spent.status).toBe(402);
    expect(spent.headers.get("content-disposition")).toBeNull();
    const short = String(await used(owner.account));
    expect((await send(A.Cid, { size: short, sign: await gw.sign.voucher(owner.account, Number(short), A.Cid) }, { method: "HEAD" })).status).toBe(402);
  });

  test("with the Bearer token of an account that may read the file: the headers; of one that may not: 403; a bad token: 401", async () => {
    const before = await used(owner.account);
    const head = await send(B.Cid, {}, { method: "HEAD", bearer: owner.client.accessToken });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe(String(fileB.length));
    expect(head.headers.get("content-disposition")).toContain("b.pdf");
    expect(await used(owner.account)).toBe(before);
    const stranger = await gw.user();
    expect((await send(B.Cid, {}, { method: "HEAD", bearer: stranger.client.accessToken })).status).toBe(403);
    grants.set(`${stranger.account.address}/dfs/${A.Cid}`, owner.account.address);
    expect((await send(A.Cid, {}, { method: "HEAD", bearer: stranger.client.accessToken })).status).toBe(200);
    expect((await send(B.Cid, {}, { method: "HEAD", bearer: "not-a-token" })).status).toBe(401);
  });

  test("the SDK asks a HEAD with its Bearer token: no voucher signed, nothing spent", async () => {
    let vouchers = 0;
    const counting = (async (input: string | URL | Request, init?: RequestInit) => {
      if (new URL(input instanceof Request ? input.url : String(input)).searchParams.has("sign")) vouchers++;
      return gw.fetch(input, init);
    }) as typeof fetch;
    const { connectStorage } = await import("../../src/sdk/storage.ts");
    const client = await connectStorage({ baseUrl: BASE, account: owner.account, fetch: counting });
    await client.login();
    expect(await client.sizeOf("dfs", B.Cid)).toBe(fileB.length);
    expect(vouchers).toBe(0);
  });
});

describe("the old two-field voucher", () => {
  test("a download with it is refused with the type to sign now, and charges nothing", async () => {
    const size = (await used(owner.account)) + 100_000;
    const before = await used(owner.account);
    const res = await send(A.Cid, { size: String(size), sign: await oldVoucher(owner.account, size) });
    expect(res.status).toBe(517);
    const { Description } = await readJson(res);
    expect(Description).toContain(NEW_TYPE);
    expect(Description).toContain("Voucher(address seller,uint64 size)");
    expect((await send(A.Cid, { size: String(size), sign: await oldVoucher(owner.account, size) }, { method: "HEAD" })).status).toBe(517);
    expect(await used(owner.account)).toBe(before);
  });

  test("an upload with it is refused with the same words, its payload a Cid or a SHA-256; nothing is kept", async () => {
    const s = await gw.session(owner.account);
    const bytes = crypto.getRandomValues(new Uint8Array(1_500));
    const size = (await used(owner.account)) + 100_000;
    const old = { size: String(size), sign: await oldVoucher(owner.account, size), cid: undefined };
    for (const [requestID, payload] of [[1, await cidOf([bytes])], [2, undefined]] as const) {
      const res = await gw.app.handle(await gw.uploadRequest(s, { requestID, bytes, payload, fields: old }));
      expect({ payload, status: res.status }).toEqual({ payload, status: 517 });
      expect((await readJson(res)).Description).toContain(NEW_TYPE);
    }
    expect(await gw.backends.dfs?.stat(await cidOf([bytes]))).toBeUndefined();
  });

  test("an old client's SDK error carries those words", async () => {
    const size = (await used(owner.account)) + 100_000;
    const e = await gw.fetch(`${BASE}/dfs/${B.Cid}?size=${size}&sign=${await oldVoucher(owner.account, size)}`);
    const err = new StorageApiError(e.status, await readJson(e));
    expect(err.message).toContain(NEW_TYPE);
  });

  test("one signed by a key that may read nothing here is refused as any stranger's (403)", async () => {
    const stranger = await gw.chain.anvil.newAccount();
    expect((await send(A.Cid, { size: "100000", sign: await oldVoucher(stranger, 100_000) })).status).toBe(403);
  });
});

describe("links (a voucher in a URL)", () => {
  test("the SDK's link opens with a plain fetch, no credentials, once, on the payer's traffic; a second fetch is refused", async () => {
    const link = await owner.client.link("dfs", B.Cid);
    expect(link).toMatchObject({ kind: "dfs", cid: B.Cid, bytes: fileB.length, expires: 0, payer: owner.account.address });
    expect(link.url).toStartWith(`${BASE}/dfs/${B.Cid}?size=`);
    const before = await used(owner.account);
    const res = await gw.fetch(link.url);
    expect(res.status).toBe(200);
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(fileB);
    expect(await used(owner.account)).toBe(before + fileB.length);
    const again = await gw.fetch(link.url);
    expect(again.status).toBe(402);
    expect((await readJson(again)).Description).toMatch(/already used/);
  });

  test("a link survives its payer's other transfers after it was made", async () => {
    const link = await owner.client.link("dfs", A.Cid);
    await (await owner.client.download("dfs", B.Cid, { size: fileB.length })).arrayBuffer();
    await owner.client.upload("dfs", crypto.getRandomValues(new Uint8Array(20_000)), { name: "more.bin" });
    const res = await gw.fetch(link.url);
    expect(res.status).toBe(200);
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(fileA);
  });

  test("an expiring link: the URL carries expires; it opens before, and is refused after", async () => {
    const expires = nowS() + 3600;
    const link = await owner.client.link("dfs", A.Cid, { expires });
    expect(new URL(link.url).searchParams.get("expires")).toBe(String(expires));
    skew = 3_601_000;
    const late = await gw.fetch(link.url);
    expect(late.status).toBe(403);
    expect((await readJson(late)).Description).toMatch(/expired/);
    skew = 0;
    expect((await gw.fetch(link.url)).status).toBe(200);
  });

  test("a link to a file its payer may not read is refused when it is made", async () => {
    const stranger = await gw.user();
    const err = await stranger.client.link("dfs", A.Cid).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageApiError);
    expect((err as StorageApiError).status).toBe(403);
  });
});
