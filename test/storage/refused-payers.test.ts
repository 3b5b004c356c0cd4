/**
 * A download voucher that names a DID for another key than the DID's own address costs a registry
 * lookup: only the registry knows the DID's delegates, and any signature recovers to some key. So
 * a client whose vouchers named a DID for keys it does not have is, past a few such refusals,
 * refused (429, Retry-After) without the registry being asked, per client (IPv6 by /64) and until
 * the window ends; the DID's own keys, and other clients, read on.
 */
import { expect, test } from "bun:test";
import type { LocalAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { rememberClientIp } from "../../src/http/client-ip.ts";
import { connectGateway } from "../../src/sdk/chain.ts";
import { REFUSED_PAYER_LIMIT } from "../../src/storage/service.ts";
import { readJson } from "../support/app.ts";
import { BASE, testGateway } from "../support/storage.ts";

const LIMIT = { ...REFUSED_PAYER_LIMIT, max: 5 };
/** How far the gateway's clock runs ahead of the real one (the limit's window is judged by it). */
let skew = 0;
const gw = await testGateway({ ipfs: false, extra: { rateLimits: true, refusedPayerLimit: LIMIT, now: () => Date.now() + skew } });
const owner = await gw.user();
const bytes = crypto.getRandomValues(new Uint8Array(4_000));
const { Cid } = await owner.client.upload("dfs", bytes, { name: "a.bin" });
const used = async (account: LocalAccount) => (await gw.storage?.vouchers.usedBy(account.address)) ?? 0;

/** A voucher of `account` for the file, naming `did` when given. */
async function voucher(account: LocalAccount, did?: string) {
  // Room for the transfers of this key running beside it, and never the same size twice.
  const size = (await used(account)) + 10_000_000 + Math.floor(Math.random() * 1_000_000_000);
  return { size: String(size), sign: await gw.sign.voucher(account, size, Cid), ...(did ? { did } : {}) };
}

/** A download of the file from `ip`; the registry reads it caused. */
async function send(query: Record<string, string>, ip: string, method: "GET" | "HEAD" = "GET") {
  const request = new Request(`${BASE}/dfs/${Cid}?${new URLSearchParams(query)}`, { method });
  rememberClientIp(request, ip);
  const start = gw.registryReads.length;
  const res = await gw.app.handle(request);
  return { res, reads: gw.registryReads.length - start };
}
const stranger = () => privateKeyToAccount(generatePrivateKey());

test("a client's vouchers naming a DID for keys it lacks: a lookup each up to the limit, then 429 without one; others read on", async () => {
  const did = owner.client.did;
  const attacker = "2001:db8:7:7::1";
  for (let i = 0; i < LIMIT.max; i++) {
    const { res, reads } = await send(await voucher(stranger(), did), attacker);
    expect(res.status).toBe(403);
    expect(reads).toBeGreaterThan(0);
  }
  // Another address of the same /64 is the same client.
  for (const method of ["GET", "HEAD"] as const) {
    const { res, reads } = await send(await voucher(stranger(), did), "2001:db8:7:7::beef", method);
    expect({ method, status: res.status, reads }).toEqual({ method, status: 429, reads: 0 });
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    if (method === "GET") expect(await readJson(res)).toMatchObject({ Code: "RateLimited", HTTPStatusCode: 429 });
  }
  // The owner's own voucher asks nothing of the registry about another key: it reads, even from there.
  const own = await send(await voucher(owner.account), attacker);
  expect(own.res.status).toBe(200);
  expect(new Uint8Array(await own.res.arrayBuffer())).toEqual(bytes);

  // The DID's real delegate, from another client: its voucher naming the DID reads the file.
  const delegate = stranger();
  await (await connectGateway(BASE, { account: owner.account, fetch: gw.fetch })).addDelegate(delegate.address, 3600n);
  const byDelegate = await send(await voucher(delegate, did), "198.51.100.20");
  expect(byDelegate.res.status).toBe(200);
  expect(new Uint8Array(await byDelegate.res.arrayBuffer())).toEqual(bytes);
  // A stranger from another client is still asked about (and refused as a stranger).
  expect((await send(await voucher(stranger(), did), "198.51.100.21")).res.status).toBe(403);

  // Once the window ends, the client's vouchers are looked up again.
  skew = LIMIT.windowMs + 1_000;
  try {
    const later = await send(await voucher(delegate, did), attacker);
    expect(later.res.status).toBe(200);
    await later.res.arrayBuffer();
  } finally {
    skew = 0;
  }
});

test("a burst of parallel vouchers naming a DID for keys it lacks: no more lookups than the limit, the rest 429", async () => {
  const vouchers = await Promise.all(Array.from({ length: 4 * LIMIT.max }, async () => voucher(stranger(), owner.client.did)));
  const start = gw.registryReads.length;
  const statuses = (await Promise.all(vouchers.map((v) => send(v, "198.51.100.40")))).map((a) => a.res.status);
  const refused = statuses.filter((s) => s === 403).length;
  expect(refused).toBeGreaterThan(0);
  expect(refused).toBeLessThanOrEqual(LIMIT.max);
  expect(statuses.filter((s) => s === 429).length).toBe(statuses.length - refused);
  expect(gw.registryReads.slice(start).filter((r) => r.functionName === "identityOwner").length).toBeLessThanOrEqual(LIMIT.max);
});

test("the limit counts refusals only: a DID's delegate reading many times from one client, in parallel too, is never limited", async () => {
  const delegate = stranger();
  await (await connectGateway(BASE, { account: owner.account, fetch: gw.fetch })).addDelegate(delegate.address, 3600n);
  const ip = "198.51.100.30";
  // Its first reads at once, while the registry is still being asked about it: one lookup for all.
  const first = await Promise.all(Array.from({ length: 3 * LIMIT.max }, async (_, i) => send(await voucher(delegate, owner.client.did), ip, i % 2 ? "HEAD" : "GET")));
  for (const { res } of first) {
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  }
  for (let i = 0; i < 3 * LIMIT.max; i++) {
    const { res } = await send(await voucher(delegate, owner.client.did), ip, i % 2 ? "HEAD" : "GET");
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  }
});
