/**
 * Metering and payments (spec 4.1 rows 9–12, D7, D8) through `app.handle()`, on anvil.
 */
import { describe, expect, test } from "bun:test";
import { parseEther } from "viem";
import { runAdmin } from "../../src/cli/admin.ts";
import { connectGateway } from "../../src/sdk/chain.ts";
import { StorageApiError } from "../../src/sdk/storage.ts";
import { get, readJson, statusOf } from "../support/app.ts";
import { BASE, testGateway } from "../support/storage.ts";
import { tempDir } from "../support/tmp.ts";
import { granter } from "./grants.ts";
import { openBlobStore } from "../../src/blob/index.ts";
import { chunkKey } from "../../src/storage/dfs/cid.ts";

const gw = await testGateway({ quota: true });
const { anvil, context } = gw.chain;
const grant = granter(gw.chain);

async function funded(eth = "0") {
  const u = await gw.user();
  if (eth !== "0") await (await connectGateway(BASE, { account: u.account, fetch: gw.fetch })).deposit(parseEther(eth));
  return u;
}


const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

describe("quota records", () => {
  test("a new account has nothing; dfs and ipfs answer the same record", async () => {
    const { client } = await funded();
    const dfs = await client.space("dfs");
    expect(dfs).toEqual({ Nonce: 0, Balance: 0, SizeByte: 0, FreeByte: 0, Expire: 0 });
    expect(await client.space("ipfs")).toEqual(dfs);
    expect(await client.traffic("ipfs")).toEqual(await client.traffic("dfs"));
    // Nothing was ever bought or granted: nothing "expired".
    const refused = await client.upload("dfs", random(10), { name: "first" }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StorageApiError);
    expect((refused as StorageApiError).status).toBe(402);
    expect((refused as StorageApiError).message).toContain("no storage space: buy some");
  });

  test("deposit, purchase, grant, upload, download and delete each show at once", async () => {
    const { client } = await funded("2");
    expect((await client.space()).Balance).toBe(2_000_000_000);

    const { tx } = await client.buySpace({ size: 100_000 });
    expect(tx).toMatch(/^0x[0-9a-f]{64}$/);
    const afterBuy = await client.space();
    // 100000 bytes × 1 gwei = 100000 gwei
    expect(afterBuy).toMatchObject({ Nonce: 1, Balance: 2_000_000_000 - 100_000, SizeByte: 100_000, FreeByte: 0 });
    expect(afterBuy.Expire).toBeGreaterThan(Math.floor(Date.now() / 1000) + 3 * 365 * 86400 - 120);

    // A grant from the command line shows at once.
    const env = {
      STOWAGE_DATA_DIR: tempDir("cli"),
      STOWAGE_CHAIN_RPC: anvil.url,
      STOWAGE_ADMIN_KEY: gw.chain.adminKey,
      STOWAGE_PROXY_ADDRESS: context.contracts.proxy,
      STOWAGE_DID_REGISTRY_ADDRESS: context.contracts.didRegistry,
      STOWAGE_DIRECTORY_ADDRESS: context.contracts.directory,
    };
    await runAdmin(["grant", "--did", client.did, "--traffic", "50000"], env, () => {}, () => {});
    expect(await client.traffic()).toMatchObject({ Nonce: 1, SizeByte: 50_000, FreeByte: 50_000 });

    const file = await client.upload("dfs", random(30_000), { name: "a.bin" });
    expect((await client.space()).SizeByte).toBe(70_000);
    // An upload moves its bytes too.
    expect((await client.traffic()).SizeByte).toBe(20_000);

    const res = await client.download("dfs", file.Cid, { range: [0, 9_999] });
    expect((await res.arrayBuffer()).byteLength).toBe(10_000);
    expect((await client.traffic()).SizeByte).toBe(10_000);

    await client.delete(file.ID);
    expect((await client.space()).SizeByte).toBe(100_000);
  });

  test("needs a DID account's Bearer token, and a known storage type", async () => {
    const none = await gw.app.handle(get("/dfs/space"));
    expect(none.status).toBe(401);
    expect(await readJson(none)).toMatchObject({ Code: "Authentication", HTTPStatusCode: 401 });
    const { client } = await funded();
    const wrong = await gw.app.handle(get("/mefs/space", { headers: { authorization: `Bearer ${client.accessToken}` } }));
    expect(wrong.status).toBe(518);
  });
});

describe("enforcement", () => {
  test("over quota is 402 and keeps nothing", async () => {
    const { client, account } = await funded();
    await grant(account.address, "space", 1000);
    await grant(account.address, "traffic", 1_000_000);
    expect(await statusOf(client.upload("dfs", random(1001), { name: "big" }))).toBe(402);
    expect((await client.list("dfs")).Object).toEqual([]);
    expect((await client.space()).SizeByte).toBe(1000);
    expect(await statusOf(client.upload("dfs", random(1000), { name: "fits" }))).toBe(200);
  });

  // The stored bytes the meter counts come from the storage catalog (storedBytes): the entry an
  // upload replaces (same back-end, same name) stops counting, any other entry still does.
  test("replacing a file by name needs room for the new bytes only; other entries, on either back-end, still count", async () => {
    const { client, account } = await funded();
    await grant(account.address, "space", 1000);
    await grant(account.address, "traffic", 1_000_000);
    expect(await statusOf(client.upload("dfs", random(800), { name: "a" }))).toBe(200);
    expect(await statusOf(client.upload("dfs", random(900), { name: "a" }))).toBe(200);
    expect((await client.space()).SizeByte).toBe(100);
    expect(await statusOf(client.upload("dfs", random(200), { name: "b" }))).toBe(402);
    expect(await statusOf(client.upload("ipfs", random(200), { name: "a" }))).toBe(402);
    expect(await statusOf(client.upload("ipfs", random(100), { name: "a" }))).toBe(200);
    expect((await client.space()).SizeByte).toBe(0);
  });

  test("50 parallel uploads: exactly as many as fit the space allowance are stored, never more", async () => {
    const { client, account } = await funded();
    const size = 10_000;
    await grant(account.address, "space", size * 20 + 5_000);
    await grant(account.address, "traffic", 100_000_000);
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => statusOf(client.upload("dfs", random(size), { name: `f${i}` }))));
    expect(results.every((s) => s === 200 || s === 402)).toBe(true);
    // 20 files fit; a refusal happens only when the others stored or arriving already fill the pool.
    expect(results.filter((s) => s === 200)).toHaveLength(20);
    const listed = (await client.list("dfs")).Object;
    expect(listed).toHaveLength(20);
    const stored = listed.reduce((n, f) => n + f.Size, 0);
    expect(stored).toBe(size * 20);
    expect((await client.space()).SizeByte).toBe(5_000);
    // Refused uploads left nothing behind: every dfs object belongs to a listed file.
    for (const f of listed) expect(await gw.backends.dfs?.stat(f.Cid)).toEqual({ size });
  });

  test("50 parallel downloads never move more than the traffic allowance together", async () => {
    const { client, account } = await funded();
    await grant(account.address, "space", 1_000_000);
    await grant(account.address, "traffic", 10_000 + 10 * 1000 + 500);
    const file = await client.upload("dfs", random(10_000), { name: "d.bin" });
    // The upload used 10000 bytes of traffic: 10500 remain, enough for 10 downloads of 1000.
    const results = await Promise.all(
      Array.from({ length: 50 }, async () => {
        try {
          const res = await client.download("dfs", file.Cid, { range: [0, 999] });
          return (await res.arrayBuffer()).byteLength === 1000 ? 200 : 0;
        } catch (err) {
          if (err instanceof StorageApiError) return err.status;
          throw err;
        }
      }),
    );
    const ok = results.filter((s) => s === 200).length;
    expect(results.every((s) => s === 200 || s === 402)).toBe(true);
    expect(ok).toBe(10);
    expect((await client.traffic()).SizeByte).toBe(10_500 - ok * 1000);
  });

  test("a download refused for its voucher holds no traffic", async () => {
    const { client, account } = await funded();
    await grant(account.address, "space", 10_000);
    await grant(account.address, "traffic", 100_000);
    const file = await client.upload("dfs", random(5_000), { name: "v.bin" });
    const before = (await client.traffic()).SizeByte;
    const size = BigInt(before) + 1_000_000n;
    const sign = await gw.sign.voucher(account, size, file.Cid);
    const url = `/dfs/${file.Cid}?size=${size}&sign=${sign}`;
    expect((await gw.app.handle(get(url))).status).toBe(200);
    expect((await gw.app.handle(get(url))).status).toBe(402); // the same voucher again
    expect((await client.traffic()).SizeByte).toBe(before - 5_000);
  });

  test("a download whose read fails (a damaged chunk) answers 500 and charges nothing: traffic and the voucher's count stay", async () => {
    const { client, account } = await funded();
    await grant(account.address, "space", 10_000);
    await grant(account.address, "traffic", 100_000);
    const bytes = random(5_000);
    const file = await client.upload("dfs", bytes, { name: "damaged.bin" });
    // Its one chunk's object replaced by other bytes of its size (a new file: read whole and hashed).
    const store = await openBlobStore(gw.config);
    await store.put(chunkKey(new Bun.CryptoHasher("sha256").update(bytes).digest("hex")), random(5_000));
    const traffic = (await client.traffic()).SizeByte;
    const counted = await gw.storage?.vouchers.usedBy(account.address);
    const size = BigInt(counted ?? 0) + 1_000_000n;
    const sign = await gw.sign.voucher(account, size, file.Cid);
    // The same voucher each time: a failed read leaves it unused.
    for (const range of [undefined, "bytes=10-99", "bytes=0-4999"]) {
      const res = await gw.app.handle(new Request(`${BASE}/dfs/${file.Cid}?size=${size}&sign=${sign}`, { headers: range ? { range } : {} }));
      expect(res.status).toBe(500);
    }
    expect((await client.traffic()).SizeByte).toBe(traffic);
    expect(await gw.storage?.vouchers.usedBy(account.address)).toBe(counted);
  });

  test("after expiry new uploads are refused; a new grant starts a new period", async () => {
    const { client, account } = await funded();
    await grant(account.address, "space", 5000, 100);
    await grant(account.address, "traffic", 100_000);
    await client.upload("dfs", random(3000), { name: "before" });
    await anvil.testClient.increaseTime({ seconds: 200 });
    await anvil.testClient.mine({ blocks: 1 });
    expect((await client.space()).SizeByte).toBe(0);
    const refused = await client.upload("dfs", random(10), { name: "after" }).catch((e: unknown) => e);
    expect((refused as StorageApiError).status).toBe(402);
    expect((refused as StorageApiError).message).toContain("your storage space has expired");
    // Files stay stored and readable while traffic remains.
    const [kept] = (await client.list("dfs")).Object;
    expect((await (await client.download("dfs", kept!.Cid)).arrayBuffer()).byteLength).toBe(3000);

    await grant(account.address, "space", 4000);
    const space = await client.space();
    // The new period holds only the new grant; the stored file still counts against it.
    expect(space).toMatchObject({ FreeByte: 4000, SizeByte: 1000 });
  });
});

describe("purchases", () => {
  test("too little deposit is 402 and buys nothing", async () => {
    const { client } = await funded("0.000001"); // 1000 gwei
    expect(await statusOf(client.buySpace({ size: 1_000_000 }))).toBe(402);
    expect(await client.space()).toMatchObject({ Nonce: 0, SizeByte: 0, Balance: 1000 });
  });

  test("a retry with the same Idempotency-Key answers the same tx and buys once", async () => {
    const { client } = await funded("1");
    const [a, b] = await Promise.all([
      client.buyTraffic({ size: 1000, idempotencyKey: "order-1" }).catch((e) => e),
      client.buyTraffic({ size: 1000, idempotencyKey: "order-1" }).catch((e) => e),
    ]);
    // Two at once: one buys, the other is told it is in progress (409) or gets the same tx.
    const txs = [a, b].filter((r) => r && typeof r.tx === "string").map((r) => r.tx);
    expect(txs.length).toBeGreaterThan(0);
    const again = await client.buyTraffic({ size: 1000, idempotencyKey: "order-1" });
    for (const tx of txs) expect(again.tx).toBe(tx);
    expect(await client.traffic()).toMatchObject({ Nonce: 1, SizeByte: 1000 });
    await expect(client.buyTraffic({ size: 2000, idempotencyKey: "order-1" })).rejects.toThrow("different size");
  });

  test("answers carry Cache-Control: no-store and the default package is 1 GiB of space", async () => {
    const { client } = await funded("2");
    const res = await gw.app.handle(get("/ipfs/buyspace", { headers: { authorization: `Bearer ${client.accessToken}` } }));
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect((await client.space()).SizeByte).toBe(2 ** 30);
  });

  test("a bad size is 400 and buys nothing", async () => {
    const { client } = await funded("1");
    for (const size of ["0", "-5", "lots", "99999999999999999999"]) {
      const res = await gw.app.handle(get(`/dfs/buyspace?size=${size}`, { headers: { authorization: `Bearer ${client.accessToken}` } }));
      expect(res.status).toBe(400);
    }
    expect((await client.space()).Nonce).toBe(0);
  });
});
