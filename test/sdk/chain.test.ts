import { expect, test } from "bun:test";
import { parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { didRegistryAbi } from "../../src/chain/artifacts/index.ts";
import { DELEGATE_TYPES } from "../../src/identity/delegates.ts";
import { connectGateway, discoverGateway } from "../../src/sdk/chain.ts";
import { appFetch, testApp } from "../support/app.ts";
import { testChain } from "../support/chain.ts";

const chain = await testChain();
// The app sees http:// URLs only (src/http/listen.ts makes them; TLS ends at a proxy before it).
const BASE = "http://gw.example";
const { app } = testApp({ chain: chain.context, env: { STOWAGE_PUBLIC_URL: BASE } });
// Every SDK call, RPC included, goes through the app as it would over the network.
const viaApp = appFetch(app);

test("discovers the gateway through GET /chain", async () => {
  const info = await discoverGateway(`${BASE}/`, { fetch: viaApp });
  expect(info).toEqual({ chainId: 985, rpcUrl: `${BASE}/rpc`, contracts: chain.context.contracts, seller: chain.operator.address });
});

test("deposit and withdraw move the deposit in the quota records", async () => {
  const account = await chain.anvil.newAccount();
  const gw = await connectGateway(BASE, { account, fetch: viaApp });
  expect(await gw.prices()).toEqual({ space: 1_000_000_000n, traffic: 100_000_000n });
  expect((await gw.deposit(parseEther("1"))).length).toBe(66);
  const after = await gw.records();
  expect(after.space.deposit).toBe(parseEther("1"));
  expect(after.traffic.deposit).toBe(parseEther("1"));
  await gw.withdraw(parseEther("0.4"));
  expect((await gw.records()).space.deposit).toBe(parseEther("0.6"));
  await expect(gw.withdraw(parseEther("5"))).rejects.toThrow("InsufficientDeposit");
  expect((await gw.records()).space.deposit).toBe(parseEther("0.6"));
});

test("delegates are added and revoked in the DID registry", async () => {
  const account = await chain.anvil.newAccount();
  const delegate = privateKeyToAccount(generatePrivateKey()).address;
  const gw = await connectGateway(BASE, { account, fetch: viaApp });
  const valid = () =>
    chain.anvil.publicClient.readContract({ address: chain.context.contracts.didRegistry, abi: didRegistryAbi, functionName: "validDelegate", args: [account.address, DELEGATE_TYPES.sigAuth, delegate] });
  await gw.addDelegate(delegate, 3600n);
  expect(await valid()).toBe(true);
  await gw.revokeDelegate(delegate);
  expect(await valid()).toBe(false);
});

test("operations that sign need an account", async () => {
  const gw = await connectGateway(BASE, { fetch: viaApp });
  await expect(gw.deposit(1n)).rejects.toThrow("needs an account");
  expect((await gw.records(chain.admin.address)).space.nonce).toBe(0n);
});
