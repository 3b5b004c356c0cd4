import { describe, expect, test } from "bun:test";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { proxyAbi } from "../../src/chain/artifacts/index.ts";
import { runAdmin } from "../../src/cli/admin.ts";
import { ConfigError } from "../../src/config.ts";
import { testChain } from "../support/chain.ts";
import { tempDir } from "../support/tmp.ts";

const chain = await testChain();
const { proxy, didRegistry, directory } = chain.context.contracts;
const env = {
  STOWAGE_DATA_DIR: tempDir("cli"),
  STOWAGE_CHAIN_RPC: chain.anvil.url,
  STOWAGE_ADMIN_KEY: chain.adminKey,
  STOWAGE_PROXY_ADDRESS: proxy,
  STOWAGE_DID_REGISTRY_ADDRESS: didRegistry,
  STOWAGE_DIRECTORY_ADDRESS: directory,
};

async function admin(args: string[], extraEnv: Record<string, string> = {}) {
  const out: string[] = [];
  const log: string[] = [];
  const code = await runAdmin(args, { ...env, ...extraEnv }, (l) => out.push(l), (l) => log.push(l));
  return { code, out: out.join("\n"), log: log.join("\n") };
}
const record = (fn: "spaceRecord" | "trafficRecord", user: `0x${string}`) =>
  chain.anvil.publicClient.readContract({ address: proxy, abi: proxyAbi, functionName: fn, args: [user] });
const TX = /^0x[0-9a-f]{64}$/;

describe("stowage admin grant", () => {
  test("grants free space to a canonical DID and prints the mined transaction", async () => {
    const user = privateKeyToAccount(generatePrivateKey()).address;
    const r = await admin(["grant", "--did", `did:ethr:0x3d9:${user}`, "--space", "1GiB"]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(TX);
    const receipt = await chain.anvil.publicClient.getTransactionReceipt({ hash: r.out as `0x${string}` });
    expect(receipt.status).toBe("success");
    const [nonce, , purchased, free, expire] = await record("spaceRecord", user);
    expect([nonce, purchased, free]).toEqual([1n, 0n, 2n ** 30n]);
    const now = (await chain.anvil.publicClient.getBlock()).timestamp;
    expect(expire - now).toBeGreaterThan(3n * 365n * 86400n - 60n);
  });

  test("grants traffic for a number of days, to a short DID form", async () => {
    const user = privateKeyToAccount(generatePrivateKey()).address;
    const r = await admin(["grant", "--did", `did:ethr:${user.toLowerCase()}`, "--traffic", "500MiB", "--days", "30"]);
    expect(r.out).toMatch(TX);
    const [, , , free, expire] = await record("trafficRecord", user);
    expect(free).toBe(500n * 2n ** 20n);
    const now = (await chain.anvil.publicClient.getBlock()).timestamp;
    expect(expire - now).toBeLessThanOrEqual(30n * 86400n);
    expect(expire - now).toBeGreaterThan(30n * 86400n - 60n);
  });

  test("needs exactly one of --space and --traffic, and a DID", async () => {
    const did = `did:ethr:0x3d9:${privateKeyToAccount(generatePrivateKey()).address}`;
    await expect(admin(["grant", "--did", did])).rejects.toThrow(ConfigError);
    await expect(admin(["grant", "--did", did, "--space", "1", "--traffic", "1"])).rejects.toThrow("exactly one");
    await expect(admin(["grant", "--space", "1GiB"])).rejects.toThrow("--did");
    await expect(admin(["grant", "--did", did, "--space", "lots"])).rejects.toThrow("--space: must be a size");
  });

  test("refuses a DID of another chain", async () => {
    const user = privateKeyToAccount(generatePrivateKey()).address;
    await expect(admin(["grant", "--did", `did:ethr:0x1:${user}`, "--space", "1"])).rejects.toThrow("network 0x1");
  });

  test("a key that is not the owner's gets the contract's reason", async () => {
    const user = privateKeyToAccount(generatePrivateKey()).address;
    await expect(admin(["grant", "--did", user, "--space", "1"], { STOWAGE_ADMIN_KEY: generatePrivateKey() })).rejects.toThrow("the contract refused: NotOwner(");
  });

  test("an unreachable chain is said plainly", async () => {
    await expect(admin(["grant", "--did", chain.admin.address, "--space", "1"], { STOWAGE_CHAIN_RPC: "http://127.0.0.1:1" })).rejects.toThrow("cannot reach the chain");
  });
});

describe("stowage admin prices", () => {
  test("shows the prices, and sets one keeping the other", async () => {
    expect((await admin(["prices"])).out).toBe("space 1000000000 wei/byte\ntraffic 100000000 wei/byte");
    const set = await admin(["prices", "--space", "2000000000"]);
    expect(set.out).toMatch(TX);
    expect((await admin(["prices"])).out).toBe("space 2000000000 wei/byte\ntraffic 100000000 wei/byte");
    await expect(admin(["prices", "--traffic", "-1"])).rejects.toThrow("--traffic");
  });
});

describe("stowage admin fund", () => {
  test("is refused on an external chain", async () => {
    await expect(admin(["fund", chain.admin.address, "1"])).rejects.toThrow("only on the embedded chain");
  });

  test("checks its arguments", async () => {
    await expect(admin(["fund", "nobody", "1"])).rejects.toThrow("not an address");
    await expect(admin(["fund", chain.admin.address, "zero"])).rejects.toThrow("AMOUNT_ETH");
  });
});

test("an unknown admin command is a usage error", async () => {
  await expect(admin(["destroy"])).rejects.toThrow(ConfigError);
});
