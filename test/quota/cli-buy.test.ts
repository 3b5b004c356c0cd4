/**
 * `stowage buy --space A --traffic B`: both purchases in one run (one login, as the README's shell
 * example does), and, when the deposit cannot pay both, neither: a half-done purchase would leave
 * the user guessing what was bought. Served over HTTP, as a shell's command reaches a gateway.
 */
import { expect, test } from "bun:test";
import { parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { userCommands } from "../../src/cli/user/index.ts";
import type { Io } from "../../src/cli/user/common.ts";
import { connectGateway } from "../../src/sdk/chain.ts";
import { serveOverHttp } from "../support/serve.ts";
import { testGateway } from "../support/storage.ts";

// Served by the server's own listener; the app is built once its URL is known.
const server = await serveOverHttp();
const gateway = server.url;
const gw = await testGateway({ quota: true, ipfs: false, env: { STOWAGE_PUBLIC_URL: gateway } });
server.handle = (r) => gw.app.handle(r);

const MiB = 2 ** 20;

async function stowage(key: string, args: string[]) {
  const out: string[] = [];
  const log: string[] = [];
  const io: Io = { out: (l) => out.push(l), log: (l) => log.push(l), stderrTty: false };
  const [name, ...rest] = args as [string, ...string[]];
  const command = userCommands({ STOWAGE_USER_KEY: key, STOWAGE_GATEWAY: gateway }, io)[name];
  if (!command) throw new Error(`no command ${name}`);
  try {
    return { code: await command.run(rest), out, log, error: "" };
  } catch (err) {
    return { code: 1, out, log, error: (err as Error).message };
  }
}

test("buy --space and --traffic together buys both; a deposit that cannot pay both buys neither", async () => {
  const key = generatePrivateKey();
  const account = privateKeyToAccount(key);
  await gw.chain.anvil.fund(account.address, 10n ** 20n);
  const chain = await connectGateway(gateway, { account });
  await chain.deposit(parseEther("0.01")); // 10,000,000 gwei
  const records = async () => {
    const { space, traffic } = await chain.records();
    return { space: space.purchased, traffic: traffic.purchased, deposit: space.deposit };
  };

  const both = await stowage(key, ["buy", "--space", "2MiB", "--traffic", "4MiB"]);
  expect(both.error).toBe("");
  expect(both.out).toHaveLength(2);
  for (const tx of both.out) expect(tx).toMatch(/^0x[0-9a-f]{64}$/);
  const bought = await records();
  // 2 MiB at 1 gwei a byte, 4 MiB at 0.1 gwei a byte.
  expect(bought).toEqual({ space: BigInt(2 * MiB), traffic: BigInt(4 * MiB), deposit: parseEther("0.01") - BigInt(2 * MiB) * 10n ** 9n - BigInt(4 * MiB) * 10n ** 8n });

  // Either alone would fit; both do not.
  const left = Number(bought.deposit / 10n ** 9n);
  const tooMuch = await stowage(key, ["buy", "--space", `${Math.floor(left * 0.8)}`, "--traffic", `${Math.floor(left * 0.8 * 10)}`]);
  expect(tooMuch.code).toBe(1);
  expect(tooMuch.error).toMatch(/^your deposit, [\d.]+ gwei, is less than the [\d.]+ gwei both cost: nothing bought/);
  expect(tooMuch.out).toEqual([]);
  expect(await records()).toEqual(bought);

  expect((await stowage(key, ["buy"])).error).toBe("buy needs --space BYTES, --traffic BYTES or both");
}, 60_000);
