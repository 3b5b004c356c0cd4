/**
 * D8's purchase rules through `app.handle()` on a real anvil: the default packages when `size` is
 * left out, `Cache-Control: no-store` on both purchases, and a chain that fails under a purchase
 * (the operator cannot pay gas; the node is gone) answering 500 with the quota record unchanged.
 * The failures are real ones of the chain, not stand-ins for our own code.
 */
import { describe, expect, test } from "bun:test";
import { parseEther } from "viem";
import { connectGateway } from "../../src/sdk/chain.ts";
import { get, readJson } from "../support/app.ts";
import { BASE, testGateway } from "../support/storage.ts";

const GiB = 2 ** 30;
type Gateway = Awaited<ReturnType<typeof testGateway>>;

async function buyer(gw: Gateway, eth: string) {
  const u = await gw.user();
  await (await connectGateway(BASE, { account: u.account, fetch: gw.fetch })).deposit(parseEther(eth));
  const buy = (path: string, headers: Record<string, string> = {}) =>
    gw.app.handle(get(path, { headers: { authorization: `Bearer ${u.client.accessToken}`, ...headers } }));
  return { ...u, buy };
}

const gw = await testGateway({ quota: true, ipfs: false });

describe("purchases (D8)", () => {
  test("without a size, buyspace buys 1 GiB and buytraffic 10 GiB at the set prices; both answers are no-store", async () => {
    const { client, buy } = await buyer(gw, "3"); // 3,000,000,000 gwei
    const space = await buy("/dfs/buyspace");
    expect(space.status).toBe(200);
    expect(space.headers.get("cache-control")).toBe("no-store");
    expect((await readJson(space)).tx).toMatch(/^0x[0-9a-f]{64}$/);
    // 1 GiB at 1 gwei a byte.
    expect(await client.space()).toMatchObject({ Nonce: 1, SizeByte: GiB, FreeByte: 0, Balance: 3_000_000_000 - GiB });

    const traffic = await buy("/ipfs/buytraffic");
    expect(traffic.status).toBe(200);
    expect(traffic.headers.get("cache-control")).toBe("no-store");
    expect((await readJson(traffic)).tx).toMatch(/^0x[0-9a-f]{64}$/);
    // 10 GiB at 0.1 gwei a byte.
    expect(await client.traffic()).toMatchObject({ Nonce: 1, SizeByte: 10 * GiB, FreeByte: 0, Balance: 3_000_000_000 - GiB - GiB });
  });

  test("an operator that cannot pay gas: 500 in the storage shape, the record unchanged; the same key buys once later", async () => {
    const { client, buy } = await buyer(gw, "1");
    const before = { space: await client.space(), traffic: await client.traffic() };
    const operator = gw.chain.operator.address;
    const gas = await gw.chain.anvil.publicClient.getBalance({ address: operator });
    await gw.chain.anvil.fund(operator, 0n);
    try {
      for (const path of ["/dfs/buyspace?size=100000", "/dfs/buytraffic?size=100000"]) {
        const res = await buy(path, { "idempotency-key": `order-${path}` });
        expect(res.status).toBe(500);
        expect(res.headers.get("cache-control")).toBe("no-store");
        expect(await readJson(res)).toEqual({ Code: "InternalError", Description: "Internal error, try again", HTTPStatusCode: 500 });
      }
      expect({ space: await client.space(), traffic: await client.traffic() }).toEqual(before);
    } finally {
      await gw.chain.anvil.fund(operator, gas);
    }
    // The failed purchase kept nothing that blocks its retry, and the retry buys once.
    const retry = await buy("/dfs/buyspace?size=100000", { "idempotency-key": "order-/dfs/buyspace?size=100000" });
    expect(retry.status).toBe(200);
    expect(await client.space()).toMatchObject({ Nonce: 1, SizeByte: 100_000, Balance: before.space.Balance - 100_000 });
  });
});

test("three purchases of one record at once on one gateway: each expects the record's nonce as the last one left it, and all mine", async () => {
  const { client, buy } = await buyer(gw, "1");
  const answers = await Promise.all([1, 2, 3].map((i) => buy(`/dfs/buyspace?size=${i * 1000}`)));
  expect(answers.map((r) => r.status)).toEqual([200, 200, 200]);
  expect(await client.space()).toMatchObject({ Nonce: 3, SizeByte: 6000 });
});

test("a chain node that is gone: 500 in the storage shape, not a hang", async () => {
  const doomed = await testGateway({ quota: true, ipfs: false });
  const { buy } = await buyer(doomed, "1");
  await doomed.chain.anvil.stop();
  for (const path of ["/dfs/buyspace?size=1000", "/ipfs/buytraffic"]) {
    const res = await buy(path);
    expect(res.status).toBe(500);
    expect(await readJson(res)).toMatchObject({ Code: "InternalError", HTTPStatusCode: 500 });
  }
}, 30_000);
