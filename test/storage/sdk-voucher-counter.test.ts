// The SDK's voucher counter (src/sdk/traffic-counter.ts, D6): one client's transfers one after
// another ask GET /traffichash once, and every voucher is still exactly the gateway's counter plus
// the transfer's bytes plus the random part below 1,024; a download cancelled half way, and a
// counter moved by another device of the same wallet, make the client ask again.
import { expect, test } from "bun:test";
import type { LocalAccount } from "viem";
import { connectStorage } from "../../src/sdk/storage.ts";
import { toRequest } from "../support/app.ts";
import { BASE, testGateway } from "../support/storage.ts";

const gw = await testGateway({ ipfs: false });

interface Seen {
  counterAsks: number;
  vouchers: bigint[];
}

/** A fetch to the test gateway that records how often the counter was asked for, and each voucher's size. */
function watchedFetch(seen: Seen): typeof globalThis.fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const request = toRequest(input, init);
    const url = new URL(request.url);
    if (url.pathname === "/traffichash") seen.counterAsks++;
    else if (url.searchParams.has("sign")) seen.vouchers.push(BigInt(url.searchParams.get("size") as string));
    else if (request.method === "POST" && url.pathname === "/dfs/") seen.vouchers.push(BigInt(String((await request.clone().formData()).get("size"))));
    return gw.fetch(request);
  }) as typeof globalThis.fetch;
}

/** A logged-in client of `account` whose requests are watched. */
async function watchedClient(account: LocalAccount) {
  const seen: Seen = { counterAsks: 0, vouchers: [] };
  const client = await connectStorage({ baseUrl: BASE, account, fetch: watchedFetch(seen) });
  await client.login();
  return { client, seen };
}

/** The gateway's counter for `account`, read beside the client (not through it). */
const serverCounter = async (account: LocalAccount) => BigInt((await gw.storage?.vouchers.usedBy(account.address)) ?? 0);

/** The last voucher covers `bytes` over the counter before it, with less than 1,024 to spare (D6). */
function expectTight(seen: Seen, before: bigint, bytes: number) {
  const slack = (seen.vouchers.at(-1) as bigint) - before - BigInt(bytes);
  expect(slack).toBeGreaterThanOrEqual(0n);
  expect(slack).toBeLessThan(1024n);
}

test("transfers one after another ask for the counter once, and each voucher is the counter + its bytes + < 1,024", async () => {
  const account = await gw.chain.anvil.newAccount();
  const { client, seen } = await watchedClient(account);
  const bytes = crypto.getRandomValues(new Uint8Array(40_000));

  let before = await serverCounter(account);
  const e = await client.upload("dfs", bytes, { name: "a.bin" });
  expectTight(seen, before, bytes.length);

  before = await serverCounter(account);
  expect(new Uint8Array(await (await client.download("dfs", e.Cid, { size: e.Size })).arrayBuffer())).toEqual(bytes);
  expectTight(seen, before, bytes.length);

  before = await serverCounter(account);
  const part = await client.download("dfs", e.Cid, { range: [100, 1_099] });
  expect(new Uint8Array(await part.arrayBuffer())).toEqual(bytes.slice(100, 1_100));
  expectTight(seen, before, 1_000);

  // A HEAD (sizeOf) goes with the Bearer token, signs no voucher and charges nothing; then a second upload.
  expect(await client.sizeOf("dfs", e.Cid)).toBe(bytes.length);
  before = await serverCounter(account);
  await client.upload("dfs", bytes.slice(0, 5_000), { name: "b.bin" });
  expectTight(seen, before, 5_000);

  expect(seen.vouchers).toHaveLength(4);
  expect(seen.counterAsks).toBe(1);
  expect(await serverCounter(account)).toBe(BigInt(2 * bytes.length + 1_000 + 5_000));
});

test("a download cancelled half way: the gateway counts what it sent, and the next voucher asks again and stays tight", async () => {
  const account = await gw.chain.anvil.newAccount();
  const { client, seen } = await watchedClient(account);
  // Larger than a body sent whole: it streams and is counted as it goes.
  const bytes = crypto.getRandomValues(new Uint8Array(3 * 1024 * 1024));
  const e = await client.upload("dfs", bytes, { name: "big.bin" });
  const res = await client.download("dfs", e.Cid, { size: e.Size });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  expect((await reader.read()).done).toBe(false);
  await reader.cancel();
  const asked = seen.counterAsks;

  const before = await serverCounter(account);
  // Fewer bytes than the file: the cancelled download was not counted whole.
  expect(before).toBeLessThan(BigInt(2 * bytes.length));
  const part = await client.download("dfs", e.Cid, { range: [0, 999] });
  expect(new Uint8Array(await part.arrayBuffer())).toEqual(bytes.slice(0, 1_000));
  expect(seen.counterAsks).toBe(asked + 1);
  expectTight(seen, before, 1_000);
});

test("another device of the same wallet moves the counter: the stale voucher is refused, the client asks again and succeeds", async () => {
  const account = await gw.chain.anvil.newAccount();
  const { client, seen } = await watchedClient(account);
  const { client: device } = await watchedClient(account);
  const first = crypto.getRandomValues(new Uint8Array(20_000));
  await client.upload("dfs", first, { name: "first.bin" });
  const asked = seen.counterAsks;
  // Unseen by `client`: its known counter is now 30,000 short.
  await device.upload("dfs", crypto.getRandomValues(new Uint8Array(30_000)), { name: "other.bin" });

  const second = crypto.getRandomValues(new Uint8Array(10_000));
  const e = await client.upload("dfs", second, { name: "second.bin" });
  expect(e.Size).toBe(second.length);
  expect(seen.counterAsks).toBe(asked + 1);
  const back = await client.download("dfs", e.Cid, { size: e.Size });
  expect(new Uint8Array(await back.arrayBuffer())).toEqual(second);
  expect(await serverCounter(account)).toBe(BigInt(20_000 + 30_000 + 2 * 10_000));
});

test("an upload that fails before it is sent (no session to sign with) leaves later vouchers tight", async () => {
  const account = await gw.chain.anvil.newAccount();
  const { client: other } = await watchedClient(account);
  // A Bearer token but no session of its own: the voucher is signed, the request cannot be.
  const seen: Seen = { counterAsks: 0, vouchers: [] };
  const client = await connectStorage({ baseUrl: BASE, account, accessToken: other.accessToken, fetch: watchedFetch(seen) });
  const bytes = crypto.getRandomValues(new Uint8Array(50_000));
  await expect(client.upload("dfs", bytes, { name: "never.bin" })).rejects.toThrow(/log in first/);
  const e = await other.upload("dfs", bytes, { name: "kept.bin" });
  const before = await serverCounter(account);
  const part = await client.download("dfs", e.Cid, { range: [0, 999] });
  expect(new Uint8Array(await part.arrayBuffer())).toEqual(bytes.slice(0, 1_000));
  expectTight(seen, before, 1_000);
});
