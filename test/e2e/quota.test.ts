/**
 * Metering and payments through the compiled binary, as a new user lives them: funded by the
 * operator's command line, deposits, buys space and traffic, uploads and downloads until refused
 * with 402, gets a free grant from the command line, and goes on.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { connectGateway } from "../../src/sdk/chain.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { statusOf } from "../support/app.ts";
import { runBinary, startBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";


test("fund, deposit, buy, use until 402, grant from the command line, go on", async () => {
  const dataDir = join(tempDir("e2e-quota"), "data");
  const server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir]);
  try {
    const account = privateKeyToAccount(generatePrivateKey());
    const fund = await runBinary(["admin", "fund", account.address, "1", "--data-dir", dataDir]);
    expect(fund.code, fund.stderr).toBe(0);

    const gateway = await connectGateway(server.url, { account });
    await gateway.deposit(parseEther("0.001")); // 1,000,000 gwei
    const store = await connectStorage({ baseUrl: server.url, account });
    await store.login();
    expect((await store.space()).Balance).toBe(1_000_000);

    // 300 KB of space at 1 gwei/byte and 600 KB of traffic at 0.1 gwei/byte.
    await store.buySpace({ size: 300_000 });
    await store.buyTraffic({ size: 600_000, idempotencyKey: "first-traffic" });
    expect(await store.space()).toMatchObject({ SizeByte: 300_000, Balance: 1_000_000 - 300_000 - 60_000 });

    const file = crypto.getRandomValues(new Uint8Array(100_000));
    const a = await store.upload("dfs", file, { name: "a.bin" });
    await store.upload("ipfs", file, { name: "b.bin" });
    // Both back-ends draw on one space pool: 100 KB left, so a third copy of 100 KB fits, a fourth not.
    await store.upload("dfs", file, { name: "c.bin" });
    expect((await store.space()).SizeByte).toBe(0);
    expect(await statusOf(store.upload("dfs", file, { name: "d.bin" }))).toBe(402);
    expect((await store.list("dfs")).Object.map((f) => f.Name).sort()).toEqual(["a.bin", "c.bin"]);

    // 300 KB of traffic went into uploads; downloads take the rest, then are refused.
    const whole = async () => new Uint8Array(await (await store.download("dfs", a.Cid, { size: 100_000 })).arrayBuffer());
    expect(await whole()).toEqual(file);
    expect(await whole()).toEqual(file);
    expect(await whole()).toEqual(file);
    expect((await store.traffic()).SizeByte).toBe(0);
    expect(await statusOf(whole())).toBe(402);

    // A free grant from the command line shows within the records' 1 s freshness, and the user goes on.
    const grant = await runBinary(["admin", "grant", "--did", store.did, "--traffic", "200KB", "--data-dir", dataDir]);
    expect(grant.code, grant.stderr).toBe(0);
    const deadline = Date.now() + 1500;
    let traffic = await store.traffic();
    while (traffic.FreeByte === 0 && Date.now() < deadline) traffic = await store.traffic();
    expect(traffic).toMatchObject({ SizeByte: 200_000, FreeByte: 200_000 });
    expect(await whole()).toEqual(file);
  } finally {
    expect(await server.stop()).toBe(0);
  }
}, 120_000);
