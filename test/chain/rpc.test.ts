import { describe, expect, test } from "bun:test";
import { parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { MAX_RPC_BODY } from "../../src/chain/rpc-filter.ts";
import { get, postJson, readJson, testApp } from "../support/app.ts";
import { testChain } from "../support/chain.ts";

const chain = await testChain();
const { app, config } = testApp({ chain: chain.context, env: { STOWAGE_PUBLIC_URL: "https://gw.example" } });
const rpc = async (body: unknown) => {
  const res = await app.handle(postJson("/rpc", body));
  return { status: res.status, body: await readJson(res) };
};
const call = (method: string, params: unknown[] = [], id: number | string = 1) => ({ jsonrpc: "2.0", id, method, params });
const someone = privateKeyToAccount(generatePrivateKey()).address;

describe("GET /chain", () => {
  test("tells SDKs the chain, the public RPC, the contracts and the seller", async () => {
    const res = await app.handle(get("/chain"));
    expect(res.status).toBe(200);
    expect(await readJson(res)).toEqual({
      chainId: 985,
      rpcUrl: "https://gw.example/rpc",
      contracts: chain.context.contracts,
      seller: chain.operator.address,
    });
  });
});

describe("POST /rpc", () => {
  test("standard reads pass", async () => {
    expect((await rpc(call("eth_chainId"))).body).toEqual({ jsonrpc: "2.0", id: 1, result: "0x3d9" });
    const code = await rpc(call("eth_getCode", [chain.context.contracts.proxy, "latest"], "c"));
    expect(code.body.id).toBe("c");
    expect(code.body.result.length).toBeGreaterThan(100);
  });

  for (const method of ["anvil_setBalance", "evm_increaseTime", "eth_sendTransaction", "debug_traceTransaction", "personal_unlockAccount", "anvil_mine", "made_up"]) {
    test(`${method} is refused and changes nothing`, async () => {
      const before = await chain.anvil.publicClient.getBalance({ address: someone });
      const r = await rpc(call(method, method === "anvil_setBalance" ? [someone, "0xffff"] : [3600]));
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ jsonrpc: "2.0", id: 1, error: { code: -32601, message: `Method not allowed: ${method}` } });
      expect(await chain.anvil.publicClient.getBalance({ address: someone })).toBe(before);
    });
  }

  test("inside a batch, refused entries get errors and allowed ones their answers, in order", async () => {
    const before = await chain.anvil.publicClient.getBlock();
    const r = await rpc([
      call("eth_blockNumber", [], 1),
      call("evm_increaseTime", [100000], 2),
      call("anvil_setBalance", [someone, "0xffff"], 3),
      call("eth_sendTransaction", [{ from: someone, to: someone }], 4),
      call("eth_chainId", [], 5),
      call("wat", [], 6),
    ]);
    expect(r.body.map((a: { id: number }) => a.id)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(r.body[0].result).toBe(`0x${before.number.toString(16)}`);
    for (const i of [1, 2, 3, 5]) expect(r.body[i].error.code).toBe(-32601);
    expect(r.body[4].result).toBe("0x3d9");
    await chain.anvil.testClient.mine({ blocks: 1 });
    const after = await chain.anvil.publicClient.getBlock();
    expect(after.timestamp - before.timestamp).toBeLessThan(100000n);
    expect(await chain.anvil.publicClient.getBalance({ address: someone })).toBe(0n);
  });

  test("eth_sendRawTransaction of a transaction signed by the user passes", async () => {
    const user = await chain.anvil.newAccount();
    const wallet = chain.anvil.wallet(user);
    const raw = await wallet.signTransaction(await wallet.prepareTransactionRequest({ to: someone, value: parseEther("1") }));
    const r = await rpc(call("eth_sendRawTransaction", [raw]));
    expect(r.body.result).toMatch(/^0x[0-9a-f]{64}$/);
    await chain.anvil.publicClient.waitForTransactionReceipt({ hash: r.body.result });
    expect(await chain.anvil.publicClient.getBalance({ address: someone })).toBe(parseEther("1"));
  });

  test("malformed requests get JSON-RPC errors, never a 500", async () => {
    const bad = await app.handle(new Request("http://stowage.test/rpc", { method: "POST", body: "{not json" }));
    expect(bad.status).toBe(200);
    expect((await readJson(bad)).error.code).toBe(-32700);
    expect((await rpc([])).body.error.code).toBe(-32600);
    expect((await rpc({ id: 1, method: "eth_chainId" })).body.error.code).toBe(-32600);
    expect((await rpc("eth_chainId")).body.error.code).toBe(-32600);
    expect((await rpc(Array.from({ length: config.rpcMaxBatch + 1 }, (_, i) => call("eth_chainId", [], i)))).body.error.message).toContain("larger than this gateway's cap");
  });

  test("a body over the cap is refused with 413", async () => {
    const res = await app.handle(postJson("/rpc", call("eth_call", [{ data: `0x${"00".repeat(MAX_RPC_BODY)}` }])));
    expect(res.status).toBe(413);
  });
});
