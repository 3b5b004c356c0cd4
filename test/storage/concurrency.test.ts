// Parallel restricted calls (D5): distinct requestIDs in parallel all pass; the same requestID
// raced passes exactly once (claimed by a unique insert), on one gateway or on two that share the
// database (D16); so is one voucher (D6).
import { expect, test } from "bun:test";
import { cidOf } from "../../src/storage/dfs/index.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import type { LocalAccount } from "viem";
import { readJson, toRequest } from "../support/app.ts";
import { BASE, testGateway } from "../support/storage.ts";

const gw = await testGateway({ ipfs: false });
/** A second gateway over the same database. */
const gw2 = gw.another();

test("10 parallel uploads by one user with distinct requestIDs all succeed", async () => {
  const { client } = await gw.user();
  const files = Array.from({ length: 10 }, (_, i) => crypto.getRandomValues(new Uint8Array(50_000 + i * 1000)));
  const entries = await Promise.all(files.map((bytes, i) => client.upload("dfs", bytes, { name: `parallel-${i}.bin` })));
  expect(new Set(entries.map((e) => e.ID)).size).toBe(10);
  const listed = (await client.list("dfs")).Object;
  expect(listed.map((e) => e.Name).sort()).toEqual(files.map((_, i) => `parallel-${i}.bin`).sort());
  expect((await client.loginInfo()).requestID).toBe("10");
  // Every voucher was settled: the counter holds every byte exactly once.
  expect(Number((await client.trafficHash(0)).used)).toBe(files.reduce((n, f) => n + f.length, 0));
  const back = await Promise.all(entries.map(async (e) => new Uint8Array(await (await client.download("dfs", e.Cid, { size: e.Size })).arrayBuffer())));
  expect(back).toEqual(files);
});

test("10 parallel downloads by one user all succeed and are all counted", async () => {
  const { client } = await gw.user();
  const bytes = crypto.getRandomValues(new Uint8Array(300_000));
  const e = await client.upload("dfs", bytes, { name: "read-me.bin" });
  const before = Number((await client.trafficHash(0)).used);
  const reads = await Promise.all(Array.from({ length: 10 }, async () => new Uint8Array(await (await client.download("dfs", e.Cid, { size: bytes.length })).arrayBuffer())));
  for (const r of reads) expect(r).toEqual(bytes);
  expect(Number((await client.trafficHash(0)).used)).toBe(before + 10 * bytes.length);
});

test("two requests racing with the SAME requestID: exactly one succeeds", async () => {
  for (let round = 0; round < 5; round++) {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    const [a, b] = [crypto.getRandomValues(new Uint8Array(20_000)), crypto.getRandomValues(new Uint8Array(20_000))];
    const requests = await Promise.all([gw.uploadRequest(s, { requestID: 1, bytes: a, name: "a" }), gw.uploadRequest(s, { requestID: 1, bytes: b, name: "b" })]);
    const answers = await Promise.all(requests.map((r) => gw.app.handle(r)));
    expect(answers.map((r) => r.status).sort()).toEqual([200, 401]);
    const refused = answers.find((r) => r.status === 401) as Response;
    expect((await readJson(refused)).Description).toMatch(/already used/);
    const ok = await readJson(answers.find((r) => r.status === 200) as Response);
    const listed = await gw.app.handle(new Request(`http://stowage.test/dfs/listobjects`, { headers: { authorization: `Bearer ${s.accessToken}` } }));
    expect((await readJson(listed)).Object).toEqual([ok]);
  }
});

// Each upload looks at its voucher before its body and claims it where it records the file: both
// may stream, one is recorded, the other refused keeping nothing. A voucher names one
// file (D22), so the two carry the same bytes under two names.
test("two uploads racing with the SAME voucher: exactly one succeeds, the other keeps nothing", async () => {
  for (let round = 0; round < 3; round++) {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    const size = 1_000_000;
    const bytes = crypto.getRandomValues(new Uint8Array(20_000));
    const fields = { size: String(size), sign: await gw.sign.voucher(s.account, size, await cidOf([bytes])) };
    const requests = await Promise.all([gw.uploadRequest(s, { requestID: 1, bytes, name: "a", fields }), gw.uploadRequest(s, { requestID: 2, bytes, name: "b", fields })]);
    const answers = await Promise.all(requests.map((r) => gw.app.handle(r)));
    expect(answers.map((r) => r.status).sort()).toEqual([200, 402]);
    expect((await readJson(answers.find((r) => r.status === 402) as Response)).Description).toMatch(/already used/);
    const ok = await readJson(answers.find((r) => r.status === 200) as Response);
    const listed = await gw.app.handle(new Request(`http://stowage.test/dfs/listobjects`, { headers: { authorization: `Bearer ${s.accessToken}` } }));
    expect((await readJson(listed)).Object).toEqual([ok]);
    expect(await gw.storage?.vouchers.usedBy(s.account.address)).toBe(20_000);
  }
});

test("two deletes racing with the same requestID: exactly one succeeds", async () => {
  const { account, client } = await gw.user();
  const x = await client.upload("dfs", new TextEncoder().encode("x"), { name: "x" });
  const y = await client.upload("dfs", new TextEncoder().encode("y"), { name: "y" });
  const s = await gw.session(account);
  const del = async (id: number) => {
    const signature = await gw.sign.request(account, { did: s.did, token: s.token, requestID: 1, action: "delete", payload: String(id) });
    const q = new URLSearchParams({ id: String(id), did: s.did, token: s.token, requestID: "1", payload: String(id), signature });
    return new Request(`http://stowage.test/dfs/delete?${q}`, { headers: { authorization: `Bearer ${s.accessToken}` } });
  };
  const answers = await Promise.all((await Promise.all([del(x.ID), del(y.ID)])).map((r) => gw.app.handle(r)));
  expect(answers.map((r) => r.status).sort()).toEqual([200, 401]);
  expect((await client.list("dfs")).Object).toHaveLength(1);
});

test("two gateways, one database: the same requestID sent to both at once passes exactly once", async () => {
  for (let round = 0; round < 5; round++) {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    const [a, b] = [crypto.getRandomValues(new Uint8Array(20_000)), crypto.getRandomValues(new Uint8Array(20_000))];
    const requests = await Promise.all([gw.uploadRequest(s, { requestID: 1, bytes: a, name: "a" }), gw.uploadRequest(s, { requestID: 1, bytes: b, name: "b" })]);
    const answers = await Promise.all([gw.app.handle(requests[0] as Request), gw2.app.handle(requests[1] as Request)]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 401]);
    const listed = await gw2.app.handle(new Request(`http://stowage.test/dfs/listobjects`, { headers: { authorization: `Bearer ${s.accessToken}` } }));
    expect((await readJson(listed)).Object).toHaveLength(1);
  }
});

test("two gateways, one database: one voucher spent on both at once is accepted once, and counted once", async () => {
  const { account, client } = await gw.user();
  const bytes = crypto.getRandomValues(new Uint8Array(30_000));
  const e = await client.upload("dfs", bytes, { name: "twice.bin" });
  for (let round = 0; round < 5; round++) {
    const before = await gw.storage?.vouchers.usedBy(account.address);
    const size = (before ?? 0) + 2 * bytes.length;
    const q = new URLSearchParams({ size: String(size), sign: await gw.sign.voucher(account, size, e.Cid) });
    const read = (app: typeof gw.app) => app.handle(new Request(`http://stowage.test/dfs/${e.Cid}?${q}`));
    const answers = await Promise.all([read(gw.app), read(gw2.app)]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 402]);
    const refused = answers.find((r) => r.status === 402) as Response;
    expect((await readJson(refused)).Description).toMatch(/already used/);
    expect(await gw2.storage.vouchers.usedBy(account.address)).toBe((before ?? 0) + bytes.length);
  }
});

/**
 * A fetch to the test gateway that holds the first request whose URL matches until `release()`;
 * `reached` resolves once that request is held.
 */
function holdFirst(matches: (url: string) => boolean) {
  const reached = Promise.withResolvers<void>();
  const gate = Promise.withResolvers<void>();
  let first = true;
  const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = String(input instanceof Request ? input.url : input);
    if (first && matches(url)) {
      first = false;
      reached.resolve();
      await gate.promise;
    }
    return gw.fetch(input, init);
  }) as typeof globalThis.fetch;
  return { fetch, reached: reached.promise, release: () => gate.resolve() };
}

test("the SDK: a download whose request is overtaken by a later one of the same client still succeeds, and each is counted once", async () => {
  // The order parallel requests reach a server is not the order they were signed in (on one
  // gateway that awaits its database, and across gateways). Here the first download's request is
  // held until the second has finished: its voucher, signed first, no longer covers it when it is
  // accepted, and the SDK signs again from the counter as it is then.
  const { account, client: owner } = await gw.user();
  const bytes = crypto.getRandomValues(new Uint8Array(40_000));
  const e = await owner.upload("dfs", bytes, { name: "overtaken.bin" });
  const hold = holdFirst((url) => url.includes(`/dfs/${e.Cid}?size=`));
  const client = await connectStorage({ baseUrl: BASE, account, fetch: hold.fetch });
  await client.login();
  const before = Number((await client.trafficHash(0)).used);
  const a = client.download("dfs", e.Cid, { size: bytes.length });
  await hold.reached;
  const b = await client.download("dfs", e.Cid, { size: bytes.length });
  expect(new Uint8Array(await b.arrayBuffer())).toEqual(bytes);
  hold.release();
  expect(new Uint8Array(await (await a).arrayBuffer())).toEqual(bytes);
  expect(Number((await client.trafficHash(0)).used)).toBe(before + 2 * bytes.length);
});

test("the SDK: an upload whose request is overtaken by a later, larger one of the same client still succeeds", async () => {
  const { account } = await gw.user({ login: false });
  const hold = holdFirst((url) => url.endsWith("/dfs/"));
  const client = await connectStorage({ baseUrl: BASE, account, fetch: hold.fetch });
  await client.login();
  const [small, large] = [crypto.getRandomValues(new Uint8Array(10_000)), crypto.getRandomValues(new Uint8Array(50_000))];
  const a = client.upload("dfs", small, { name: "small.bin" });
  await hold.reached;
  await client.upload("dfs", large, { name: "large.bin" });
  hold.release();
  expect((await a).Size).toBe(small.length);
  expect((await client.list("dfs")).Object.map((f) => f.Name).sort()).toEqual(["large.bin", "small.bin"]);
  expect(Number((await client.trafficHash(0)).used)).toBe(small.length + large.length);
});

/**
 * A fetch to the test gateway that, before the first upload (POST /dfs/) and the first download
 * (GET /dfs/<cid>?size=…) it sends on, spends a voucher of that request's very size through a
 * download of `spent` by hand: as a second device of the same wallet would when it signed the same
 * size (for another file: vouchers are accepted once per payer and size, whatever their file).
 */
function spendFirstVouchers(account: LocalAccount, spent: string) {
  const done = { upload: false, download: false };
  const spend = async (size: string) => {
    const res = await gw.fetch(`${BASE}/dfs/${spent}?size=${size}&sign=${await gw.sign.voucher(account, BigInt(size), spent)}`);
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  };
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const request = toRequest(input, init);
    const url = new URL(request.url);
    if (!done.upload && request.method === "POST" && url.pathname === "/dfs/") {
      done.upload = true;
      const form = await request.clone().formData();
      await spend(String(form.get("size")));
    } else if (!done.download && request.method === "GET" && url.searchParams.has("sign") && !url.pathname.endsWith(spent)) {
      done.download = true;
      await spend(url.searchParams.get("size") as string);
    }
    return gw.fetch(request);
  }) as typeof globalThis.fetch;
}

test("the SDK: a transfer whose voucher another device of the same wallet spent first signs again and succeeds", async () => {
  // Two clients of one wallet sign voucher sizes from the same counter, apart by a random part
  // only: now and then both sign the same size, and the second to arrive is refused as already
  // used (it kept nothing). Here that is made certain, once for an upload and once for a download.
  const { account, client: device } = await gw.user();
  const spent = await device.upload("dfs", crypto.getRandomValues(new Uint8Array(1_000)), { name: "spent.bin" });
  const client = await connectStorage({ baseUrl: BASE, account, fetch: spendFirstVouchers(account, spent.Cid) });
  await client.login();
  const bytes = crypto.getRandomValues(new Uint8Array(30_000));
  const e = await client.upload("dfs", bytes, { name: "second-device.bin" });
  expect(e.Size).toBe(bytes.length);
  const back = await client.download("dfs", e.Cid, { size: bytes.length });
  expect(new Uint8Array(await back.arrayBuffer())).toEqual(bytes);
  // Counted: the first file's upload and its two spending downloads, this upload and download.
  expect(Number((await client.trafficHash(0)).used)).toBe(3 * spent.Size + 2 * bytes.length);
});

test("two gateways, one database: one file deleted on both at once is deleted once; its content is released once", async () => {
  const { account, client } = await gw.user();
  const s = await gw.session(account);
  for (let round = 0; round < 8; round++) {
    const bytes = crypto.getRandomValues(new Uint8Array(30_000));
    const x = await client.upload("dfs", bytes, { name: `x${round}` });
    // A second file with the same bytes: the content must outlive the one delete.
    await client.upload("dfs", bytes, { name: `x${round}-again` });
    const del = async (requestID: number) => {
      const signature = await gw.sign.request(account, { did: s.did, token: s.token, requestID, action: "delete", payload: String(x.ID) });
      const q = new URLSearchParams({ id: String(x.ID), did: s.did, token: s.token, requestID: String(requestID), payload: String(x.ID), signature });
      return new Request(`http://stowage.test/dfs/delete?${q}`, { headers: { authorization: `Bearer ${s.accessToken}` } });
    };
    const [one, two] = await Promise.all([del(2 * round + 1), del(2 * round + 2)]);
    const answers = await Promise.all([gw.app.handle(one), gw2.app.handle(two)]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 404]);
    expect((await client.list("dfs")).Object.map((f) => f.Name)).not.toContain(`x${round}`);
    expect(new Uint8Array(await (await client.download("dfs", x.Cid, { size: bytes.length })).arrayBuffer())).toEqual(bytes);
  }
});
