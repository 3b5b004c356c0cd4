/**
 * Many gateways over one database (D16): quota checks of one account on two gateways run one after
 * the other (the account's quota row is locked first), so parallel uploads spread over both never
 * exceed the pool; and operator transactions take their nonces from the database, so purchases
 * sent by two gateways at once never share one, nor wait behind a nonce one of them took and never
 * used (it is filled). The second gateway is a second set of services
 * over the same `Sql`, as a second process would be; both passes (SQLite, PostgreSQL) run it.
 */
import { describe, expect, test } from "bun:test";
import { parseEther } from "viem";
import { purchaseNonces } from "../../src/quota/purchase.ts";
import { connectGateway } from "../../src/sdk/chain.ts";
import { mined } from "../support/anvil.ts";
import { get, readJson } from "../support/app.ts";
import { BASE, testGateway } from "../support/storage.ts";
import { granter } from "./grants.ts";

const gw = await testGateway({ quota: true, ipfs: false });
const gw2 = gw.another();
const { anvil, context } = gw.chain;
const grant = granter(gw.chain);

const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

describe("two gateways, one database", () => {
  test("parallel uploads spread over both never store more than the space pool", async () => {
    const FILE = 100_000;
    const SPACE = 5 * FILE + FILE / 2;
    for (let round = 0; round < 3; round++) {
      const { account } = await gw.user();
      await grant(account.address, "space", SPACE);
      await grant(account.address, "traffic", 100 * FILE);
      const s = await gw.session(account);
      const requests = await Promise.all(Array.from({ length: 12 }, (_, i) => gw.uploadRequest(s, { requestID: i + 1, bytes: random(FILE), name: `f${i}` })));
      const answers = await Promise.all(requests.map((r, i) => (i % 2 ? gw2 : gw).app.handle(r)));
      const statuses = answers.map((r) => r.status);
      for (const st of statuses) expect([200, 402]).toContain(st);
      const stored = statuses.filter((st) => st === 200).length;
      expect(stored).toBeGreaterThan(0);
      expect(stored * FILE).toBeLessThanOrEqual(SPACE);
      const auth = { authorization: `Bearer ${s.accessToken}` };
      expect((await readJson(await gw2.app.handle(get("/dfs/listobjects", { headers: auth })))).Object).toHaveLength(stored);
      expect((await readJson(await gw.app.handle(get("/dfs/space", { headers: auth })))).SizeByte).toBe(SPACE - stored * FILE);
      // Every hold is gone, on both gateways: nothing is left to count against the pool.
      expect(await gw.database.sql.all("SELECT id FROM quota_reservations WHERE account = $1", [account.address])).toEqual([]);
    }
  });

  test("purchases sent by both at once each mine, with nonces of their own", async () => {
    const buyers = await Promise.all(
      Array.from({ length: 6 }, async () => {
        const u = await gw.user();
        await (await connectGateway(BASE, { account: u.account, fetch: gw.fetch })).deposit(parseEther("1"));
        return u;
      }),
    );
    const operator = gw.chain.operator.address;
    const sentBefore = await anvil.publicClient.getTransactionCount({ address: operator });
    const answers = await Promise.all(
      buyers.map((u, i) => (i % 2 ? gw2 : gw).app.handle(get("/dfs/buyspace?size=1000", { headers: { authorization: `Bearer ${u.client.accessToken}` } }))),
    );
    expect(answers.map((r) => r.status)).toEqual(buyers.map(() => 200));
    const hashes = await Promise.all(answers.map(async (r) => (await readJson(r)).tx as `0x${string}`));
    const nonces = await Promise.all(hashes.map(async (hash) => (await anvil.publicClient.getTransaction({ hash })).nonce));
    expect(new Set(nonces).size).toBe(buyers.length);
    expect(await anvil.publicClient.getTransactionCount({ address: operator })).toBe(sentBefore + buyers.length);
    for (const u of buyers) expect((await u.client.space()).SizeByte).toBe(1000);
  });

  test("one user's purchases of one record sent to both at once all go through, one after the other", async () => {
    const u = await gw.user();
    await (await connectGateway(BASE, { account: u.account, fetch: gw.fetch })).deposit(parseEther("1"));
    const auth = { authorization: `Bearer ${u.client.accessToken}` };
    // Each expects the record's nonce it read: sent together from two gateways, all but one would revert.
    const answers = await Promise.all(Array.from({ length: 4 }, (_, i) => (i % 2 ? gw2 : gw).app.handle(get("/dfs/buyspace?size=1000", { headers: auth }))));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(await u.client.space()).toMatchObject({ SizeByte: 4000, Nonce: 4 });
  });
});

describe("Idempotency-Key over two gateways", () => {
  test("one key sent to both at once buys once: every 200 answers the same transaction, the others are 409", async () => {
    for (let round = 0; round < 3; round++) {
      const u = await gw.user();
      await (await connectGateway(BASE, { account: u.account, fetch: gw.fetch })).deposit(parseEther("1"));
      const headers = { authorization: `Bearer ${u.client.accessToken}`, "idempotency-key": `order-${round}` };
      const answers = await Promise.all(Array.from({ length: 4 }, (_, i) => (i % 2 ? gw2 : gw).app.handle(get("/dfs/buyspace?size=700", { headers }))));
      const statuses = answers.map((r) => r.status);
      for (const st of statuses) expect([200, 409]).toContain(st);
      const txs = new Set(await Promise.all(answers.filter((r) => r.status === 200).map(async (r) => (await readJson(r)).tx)));
      expect(txs.size).toBe(1);
      expect((await u.client.space()).SizeByte).toBe(700);
      // Once it is mined, the same key answers the same transaction, on either gateway.
      const again = await gw2.app.handle(get("/dfs/buyspace?size=700", { headers }));
      expect((await readJson(again)).tx).toBe([...txs][0]);
    }
  });
});

describe("operator nonces", () => {
  test("a transaction of the operator key the database did not hand out (sent by other means) does not stall the next purchase", async () => {
    const u = await gw.user();
    await (await connectGateway(BASE, { account: u.account, fetch: gw.fetch })).deposit(parseEther("1"));
    const buy = (app: typeof gw.app) => app.handle(get("/dfs/buyspace?size=500", { headers: { authorization: `Bearer ${u.client.accessToken}` } }));
    expect((await buy(gw.app)).status).toBe(200);
    const operator = gw.chain.operator;
    await mined(anvil.publicClient, anvil.wallet(operator).sendTransaction({ to: operator.address, value: 0n }));
    await mined(anvil.publicClient, anvil.wallet(operator).sendTransaction({ to: operator.address, value: 0n }));
    const next = await buy(gw2.app);
    expect(next.status).toBe(200);
    const { nonce } = await anvil.publicClient.getTransaction({ hash: (await readJson(next)).tx });
    expect(nonce).toBe((await anvil.publicClient.getTransactionCount({ address: operator.address })) - 1);
    expect((await u.client.space()).SizeByte).toBe(1000);
  });

  test("a nonce taken and never sent after another gateway took the next one is filled: the next purchase mines at once, not after its receipt's timeout", async () => {
    const u = await gw.user();
    await (await connectGateway(BASE, { account: u.account, fetch: gw.fetch })).deposit(parseEther("1"));
    const operator = gw.chain.operator.address;
    const row = "SELECT next FROM operator_nonces WHERE chain_id = $1 AND address = $2";
    // A third gateway's operator transaction: its nonce is taken, then a purchase on gw2 takes the
    // next one and is sent, and only then does this one's send fail (as a refusing RPC would).
    const third = purchaseNonces({ sql: gw.database.sql, chain: context, log: gw.log });
    let buying: Promise<Response> | undefined;
    let started = 0;
    const failed = third.send(async (nonce) => {
      started = Date.now();
      buying = gw2.app.handle(get("/dfs/buyspace?size=600", { headers: { authorization: `Bearer ${u.client.accessToken}` } }));
      // Until the purchase has its nonce (nonce + 1): the row then reads nonce + 2.
      while (((await gw.database.sql.get<{ next: number }>(row, [context.chain.id, operator]))?.next ?? 0) < nonce + 2) await Bun.sleep(5);
      throw new Error("the RPC refused this transaction");
    });
    await expect(failed).rejects.toThrow("the RPC refused this transaction");
    if (!buying) throw new Error("the failing send never ran");
    const answer = await buying;
    const ms = Date.now() - started;
    expect(answer.status).toBe(200);
    // Without the fill the purchase's transaction waits behind the gap for its 120 s receipt timeout.
    expect(ms).toBeLessThan(5_000);
    const bought = await anvil.publicClient.getTransaction({ hash: (await readJson(answer)).tx });
    expect((await u.client.space()).SizeByte).toBe(600);
    // The nonce before it went to a 0-value transfer from the operator to itself, mined with it or just before.
    const near = await Promise.all([0n, 1n].map(async (back) => (await anvil.publicClient.getBlock({ blockNumber: (bought.blockNumber ?? 0n) - back, includeTransactions: true })).transactions));
    const fill = near.flat().find((t) => t.from.toLowerCase() === operator.toLowerCase() && t.nonce === bought.nonce - 1);
    expect(fill).toMatchObject({ to: operator.toLowerCase(), value: 0n });
  }, 20_000);
});
