// What one client can make the chain do through the public POST /rpc: batch size, gas per call
// and per request, calls per minute per client (IPv6 by /64), turns on the chain that clients
// flooding it cannot take from others, and eth_getLogs' range and results, against a real anvil.
import { describe, expect, test } from "bun:test";
import { encodeFunctionData, parseEther } from "viem";
import { proxyAbi } from "../../src/chain/artifacts/index.ts";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { rememberClientIp } from "../../src/http/client-ip.ts";
import { OPENAPI_PATH } from "../../src/app.ts";
import { get, postJson, readJson, testApp } from "../support/app.ts";
import { testChain } from "../support/chain.ts";

const chain = await testChain();
const call = (method: string, params: unknown[] = [], id: number | string = 1) => ({ jsonrpc: "2.0", id, method, params });
/** Init code that jumps back to its start for ever: it runs until its gas is gone. */
const LOOP = "0x5b600056";
const hex = (n: number | bigint) => `0x${n.toString(16)}`;

function appWith(env: Record<string, string> = {}, blockGasLimit?: bigint) {
  const { app, config } = testApp({ chain: { ...chain.context, blockGasLimit }, env });
  const openapi = async () => readJson(await app.handle(get(`${OPENAPI_PATH}/json`)));
  const rpc = async (body: unknown, ip = "192.0.2.1") => {
    const request = postJson("/rpc", body);
    rememberClientIp(request, ip);
    const res = await app.handle(request);
    return { status: res.status, headers: res.headers, body: await readJson(res) };
  };
  return { rpc, config, openapi };
}

/** A signed transfer of 1 ETH to a fresh address, not sent. */
async function signedTransfer() {
  const user = await chain.anvil.newAccount();
  const wallet = chain.anvil.wallet(user);
  const to = privateKeyToAccount(generatePrivateKey()).address;
  return { to, raw: await wallet.signTransaction(await wallet.prepareTransactionRequest({ to, value: parseEther("1") })) };
}

describe("batch size", () => {
  test("a batch over the cap is refused whole: nothing in it reaches the chain", async () => {
    const { rpc, config } = appWith();
    expect(config.rpcMaxBatch).toBe(20);
    const { to, raw } = await signedTransfer();
    const batch = [call("eth_sendRawTransaction", [raw], 0), ...Array.from({ length: 20 }, (_, i) => call("eth_chainId", [], i + 1))];
    const r = await rpc(batch);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "Batch of 21 calls is larger than this gateway's cap of 20" } });
    await chain.anvil.testClient.mine({ blocks: 1 });
    expect(await chain.anvil.publicClient.getBalance({ address: to })).toBe(0n);
    // At the cap, it passes.
    const ok = await rpc(batch.slice(0, 20));
    expect(ok.body).toHaveLength(20);
    expect(ok.body[0].result).toMatch(/^0x[0-9a-f]{64}$/);
  });
});

describe("gas", () => {
  test("a call asking for more gas than the cap is refused with a clear error; at the cap it runs", async () => {
    const { rpc } = appWith();
    for (const method of ["eth_call", "eth_estimateGas"]) {
      const over = await rpc(call(method, [{ data: LOOP, gas: hex(5_000_001) }, "latest"]));
      expect(over.body).toEqual({ jsonrpc: "2.0", id: 1, error: { code: -32602, message: "gas 5000001 is over this gateway's cap of 5000000 gas per call" } });
    }
    const huge = await rpc(call("eth_call", [{ data: LOOP, gas: hex(10n ** 30n) }, "latest"]));
    expect(huge.body.error.code).toBe(-32602);
    const bad = await rpc(call("eth_call", [{ data: LOOP, gas: "lots" }, "latest"]));
    expect(bad.body.error).toEqual({ code: -32602, message: "Invalid params: gas must be a hex quantity" });
    // At the cap the loop runs out of it, as the chain itself says.
    const at = await rpc(call("eth_estimateGas", [{ data: LOOP, gas: hex(5_000_000) }, "latest"]));
    expect(at.body.error.message).toContain("5000000");
  });

  test("a call that names no gas gets the cap, never more; STOWAGE_RPC_GAS_CAP lowers it", async () => {
    expect((await appWith().rpc(call("eth_estimateGas", [{ data: LOOP }, "latest"]))).body.error.message).toContain("allowance: 5000000");
    const low = appWith({ STOWAGE_RPC_GAS_CAP: "1000000" });
    expect((await low.rpc(call("eth_estimateGas", [{ data: LOOP }, "latest"]))).body.error.message).toContain("allowance: 1000000");
    // A real read still works under the cap.
    // Nor above the chain's block gas limit, whatever the settings say.
    const small = appWith({ STOWAGE_RPC_GAS_CAP: "50000000", STOWAGE_RPC_BATCH_GAS: "90000000" }, 10_000_000n);
    expect((await small.rpc(call("eth_call", [{ data: LOOP, gas: hex(10_000_001) }, "latest"]))).body.error.message).toBe("gas 10000001 is over this gateway's cap of 10000000 gas per call");
    expect((await small.rpc([1, 2].map((i) => call("eth_estimateGas", [{ data: LOOP }, "latest"], i)))).body[0].error.message).toContain("allowance: 5000000");
    const price = await low.rpc(call("eth_call", [{ to: chain.context.contracts.proxy, data: encodeFunctionData({ abi: proxyAbi, functionName: "spacePrice" }) }, "latest"]));
    expect(BigInt(price.body.result)).toBeGreaterThan(0n);
  });

  test("the calls of one request share its gas budget: those without gas split what is left, those over it are refused", async () => {
    // A per-call cap as large as the budget, so that the budget is what binds.
    const { rpc, config } = appWith({ STOWAGE_RPC_GAS_CAP: "30000000" });
    expect(config.rpcBatchGas).toBe(30_000_000);
    const estimate = (id: number, gas?: number) => call("eth_estimateGas", [{ data: LOOP, ...(gas ? { gas: hex(gas) } : {}) }, "latest"], id);
    // Four loops without gas: 7.5 M each.
    const four = await rpc([1, 2, 3, 4].map((i) => estimate(i)));
    for (const a of four.body) expect(a.error.message).toContain("allowance: 7500000");
    // One that names 20 M: a second such is over the budget, one without gas gets the 10 M left.
    const mixed = await rpc([estimate(1, 20_000_000), estimate(2, 20_000_000), estimate(3), call("eth_chainId", [], 4)]);
    expect(mixed.body[0].error.message).toContain("allowance: 20000000");
    expect(mixed.body[1].error).toEqual({ code: -32005, message: "the batch's calls ask for more than this gateway's budget of 30000000 gas per request" });
    expect(mixed.body[2].error.message).toContain("allowance: 10000000");
    expect(mixed.body[3]).toEqual({ jsonrpc: "2.0", id: 4, result: "0x3d9" });
    // One that takes it all leaves nothing to share.
    const all = await rpc([estimate(1, 30_000_000), estimate(2)]);
    expect(all.body[0].error.message).toContain("allowance: 30000000");
    expect(all.body[1].error).toEqual({ code: -32005, message: "the batch's other calls took this gateway's budget of 30000000 gas per request" });
  });
});

describe("turns on the chain", () => {
  test("two clients that keep the queue full cannot shut a third out: its first call is served within the limit", async () => {
    const { rpc, config } = appWith({ STOWAGE_RPC_RATE: "0" });
    const spacePrice = call("eth_call", [{ to: chain.context.contracts.proxy, data: encodeFunctionData({ abi: proxyAbi, functionName: "spacePrice" }) }, "latest"]);
    // Each flooder keeps two full batches of looping calls in flight, sending the next as soon as
    // one is answered: 80 calls at once at first, more than the line holds for everyone together.
    const loops = Array.from({ length: 20 }, (_, i) => call("eth_call", [{ data: LOOP }, "latest"], i));
    let flooding = true;
    const seen = { ran: 0, busy: 0 };
    const flooder = async (ip: string) => {
      while (flooding) {
        for (const entry of (await rpc(loops, ip)).body) {
          if (entry.error?.code === -32005) seen.busy++;
          else seen.ran++;
        }
        // A turn of the event loop, as a network round trip would give: a batch turned away
        // whole is answered without one, and the flooder would spin on microtasks alone.
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    const floods = ["198.51.100.1", "198.51.100.1", "198.51.100.2", "198.51.100.2"].map(flooder);
    try {
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        const answer = await rpc(spacePrice, "198.51.100.3");
        expect(answer.body.error).toBeUndefined();
        expect(BigInt(answer.body.result)).toBeGreaterThan(0n);
        expect(performance.now() - started).toBeLessThan(config.rpcTimeout);
      }
    } finally {
      flooding = false;
      await Promise.all(floods);
    }
    // The flood was real: its calls ran, and what each flooder sent past its share was turned away.
    expect(seen.ran).toBeGreaterThan(0);
    expect(seen.busy).toBeGreaterThan(0);
  });
});

describe("calls per minute per client", () => {
  test("over its budget a client gets 429 with Retry-After and a JSON-RPC error; batch entries count; an IPv6 /64 is one client", async () => {
    const { rpc } = appWith({ STOWAGE_RPC_RATE: "5" });
    const a1 = "2001:db8:1:2::1";
    const a2 = "2001:db8:1:2:ffff:ffff:ffff:fffe"; // the same /64
    expect((await rpc([call("eth_chainId", [], 1), call("eth_chainId", [], 2), call("eth_chainId", [], 3)], a1)).status).toBe(200);
    expect((await rpc(call("eth_chainId"), a2)).status).toBe(200);
    // One left: a batch of two does not fit (the request itself still counts, on arrival).
    const batch = await rpc([call("eth_chainId", [], 1), call("eth_chainId", [], 2)], a2);
    expect(batch.status).toBe(429);
    const { to, raw } = await signedTransfer();
    const over = await rpc(call("eth_sendRawTransaction", [raw]), a2);
    expect(over.status).toBe(429);
    const retry = Number(over.headers.get("retry-after"));
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(60);
    expect(over.body).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32005, message: expect.stringContaining("5 calls a minute per client") } });
    await chain.anvil.testClient.mine({ blocks: 1 });
    expect(await chain.anvil.publicClient.getBalance({ address: to })).toBe(0n);
    // Another /64, and an IPv4 client, have budgets of their own.
    expect((await rpc(call("eth_chainId"), "2001:db8:1:3::1")).status).toBe(200);
    expect((await rpc(call("eth_chainId"), "192.0.2.7")).status).toBe(200);
  });

  test("STOWAGE_RPC_RATE=0 turns the limit off", async () => {
    const { rpc } = appWith({ STOWAGE_RPC_RATE: "0" });
    for (let i = 0; i < 30; i++) expect((await rpc(call("eth_chainId"))).status).toBe(200);
  });
});

test("the OpenAPI document states the limits as this gateway sets them, and the 429", async () => {
  const { openapi } = appWith({ STOWAGE_RPC_RATE: "120", STOWAGE_RPC_GAS_CAP: "4000000", STOWAGE_RPC_LOG_BLOCKS: "500", STOWAGE_RPC_MAX_LOGS: "700" });
  const post = (await openapi()).paths["/rpc"].post;
  expect(Object.keys(post.responses)).toEqual(expect.arrayContaining(["200", "413", "429", "502"]));
  expect(post.responses["429"].description).toContain("Retry-After");
  expect(post.description).toContain("120 calls a minute");
  expect(post.description).toContain("at most 4000000 gas each");
  expect(post.description).toContain("eth_getLogs spans at most 500 blocks per call");
  expect(post.description).toContain("at most 700 logs together");
  expect(post.description).toContain("batches of at most 20 entries");
});
