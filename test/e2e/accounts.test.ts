/**
 * The account API of the compiled binary, used the way a client would: the SDK over real HTTP,
 * settings from the environment, the dev mailbox on disk.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createPublicClient, createWalletClient, defineChain, encodeFunctionData, getAddress, http, keccak256, serializeErc6492Signature, toHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createAccountClient } from "../../src/sdk/account.ts";
import { testWalletFactoryAbi, testWalletFactoryBytecode } from "../support/artifacts/test-wallets.ts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";

const APP_ORIGIN = "https://app.stowage.test";
const admin = privateKeyToAccount(generatePrivateKey());

let server: RunningBinary;
let dataDir: string;

beforeAll(async () => {
  dataDir = join(tempDir("e2e-accounts"), "data");
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], {
    STOWAGE_ALLOWED_ORIGINS: `http://localhost:8080,${APP_ORIGIN}`,
    ADMIN_ADDRESSES: admin.address.toLowerCase(),
    STOWAGE_RENEWAL_DAYS: "30",
  });
});
afterAll(async () => {
  if (server) expect(await server.stop()).toBe(0);
});

describe("account API of the binary", () => {
  test("EVM login with the SDK, me, user info, record 5 then 6, refresh", async () => {
    const client = createAccountClient({ baseUrl: server.url, origin: APP_ORIGIN, source: "e2e" });
    const key = privateKeyToAccount(generatePrivateKey());
    const login = await client.loginWithEvmAccount(key);
    expect(login.did).toBe(`did:ethr:0x3d9:${key.address}`);
    expect(Number(login.number)).toBeGreaterThanOrEqual(100001);

    expect(await client.me()).toEqual({ uid: key.address, role: "user" });
    const info = await client.userInfo();
    expect(info).toMatchObject({ address: key.address, did: login.did, points: 0, social_info: false });

    await client.addRecord(5);
    const five = await client.getRecord(5);
    expect(five).toMatchObject({ action: 5, points: 100 });
    expect(Math.abs(five!.time - Date.now() / 1000)).toBeLessThan(60);
    await client.addRecord(6);
    expect(await client.getRecord(6)).toMatchObject({ action: 6, points: 50 });
    expect((await client.userInfo()).points).toBe(150);
    // Once only, and a renewal only every 30 days.
    await expect(client.addRecord(5)).rejects.toMatchObject({ error: "USER_ADD_ACTION_FAILED" });
    await expect(client.addRecord(6)).rejects.toMatchObject({ error: "VERIFY_ACTION_FAILED" });

    const before = client.tokens!;
    const refreshed = await client.refresh();
    expect(refreshed.accessToken).not.toBe(before.accessToken);
    expect(refreshed.refreshToken).not.toBe(before.refreshToken);
    expect((await client.me()).uid).toBe(key.address);

    // The same key later is the same account.
    const again = createAccountClient({ baseUrl: server.url, origin: APP_ORIGIN });
    expect((await again.loginWithEvmAccount(key)).number).toBe(login.number);
  });

  test("ADMIN_ADDRESSES from the environment makes that address admin", async () => {
    const client = createAccountClient({ baseUrl: server.url, origin: APP_ORIGIN });
    await client.loginWithEvmAccount(admin);
    expect((await client.me()).role).toBe("admin");
  });

  test("an origin outside STOWAGE_ALLOWED_ORIGINS gets no challenge", async () => {
    const client = createAccountClient({ baseUrl: server.url, origin: "https://evil.test" });
    await expect(client.loginWithEvmAccount(privateKeyToAccount(generatePrivateKey()))).rejects.toMatchObject({ status: 403, error: "FORBIDDEN" });
  });

  test("smart wallets on the embedded chain: a deployed EIP-1271 wallet and an undeployed ERC-6492 one", async () => {
    // A deployer funded by the admin CLI puts the test wallet factory on the chain via the public RPC.
    const deployer = privateKeyToAccount(generatePrivateKey());
    expect((await runBinary(["admin", "fund", deployer.address, "1", "--data-dir", dataDir])).code).toBe(0);
    const chain = defineChain({ id: 985, name: "stowage", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [`${server.url}/rpc`] } } });
    const transport = http(`${server.url}/rpc`);
    const reader = createPublicClient({ chain, transport, pollingInterval: 50 });
    const writer = createWalletClient({ account: deployer, chain, transport });
    const deployed = await reader.waitForTransactionReceipt({ hash: await writer.deployContract({ abi: testWalletFactoryAbi, bytecode: testWalletFactoryBytecode }) });
    const factory = getAddress(deployed.contractAddress!);

    const owner = privateKeyToAccount(generatePrivateKey());
    const salt = keccak256(toHex("e2e-wallet"));
    const wallet = await reader.readContract({ address: factory, abi: testWalletFactoryAbi, functionName: "predict", args: [owner.address, salt] });
    const deployData = encodeFunctionData({ abi: testWalletFactoryAbi, functionName: "deploy", args: [owner.address, salt] });

    // Undeployed: the owner's signature wrapped per ERC-6492.
    const client = createAccountClient({ baseUrl: server.url, origin: APP_ORIGIN });
    const counterfactual = {
      address: wallet,
      signMessage: async (args: { message: string }) => serializeErc6492Signature({ address: factory, data: deployData, signature: await owner.signMessage(args) }),
    };
    const before = await client.loginWithEvmAccount(counterfactual);
    expect(before.did).toBe(`did:ethr:0x3d9:${wallet}`);

    // Deployed: the owner's plain signature, checked by the wallet's isValidSignature.
    await reader.waitForTransactionReceipt({ hash: await writer.writeContract({ address: factory, abi: testWalletFactoryAbi, functionName: "deploy", args: [owner.address, salt] }) });
    const after = await client.loginWithEvmAccount({ address: wallet, signMessage: (args) => owner.signMessage(args) });
    expect(after.number).toBe(before.number);
    const stranger = privateKeyToAccount(generatePrivateKey());
    await expect(client.loginWithEvmAccount({ address: wallet, signMessage: (args) => stranger.signMessage(args) })).rejects.toMatchObject({ status: 401 });
  });

  test("email code through the dev mailbox in DATA_DIR/mail", async () => {
    const client = createAccountClient({ baseUrl: server.url });
    await client.sendEmailCode("e2e@example.com");
    const mailDir = join(dataDir, "mail");
    const newest = readdirSync(mailDir).sort().at(-1)!;
    const code = /^Subject: Your Stowage code: (\d{6})$/m.exec(readFileSync(join(mailDir, newest), "utf8"))?.[1];
    expect(code).toMatch(/^\d{6}$/);
    await client.loginWithEmailCode("e2e@example.com", code!);
    expect((await client.me()).email).toBe("e2e@example.com");
    // The code went to the mailbox, never to the log.
    expect(server.output()).not.toContain(code!);
  });
});
