/**
 * The embedded chain, driven through the compiled binary: first start deploys, restarts don't,
 * `stowage admin fund` and `grant` mine and show in contract reads made through the public /rpc,
 * and a kill -9 loses none of it and leaves no second anvil.
 */
import { expect, test } from "bun:test";
import { statSync } from "node:fs";
import { join } from "node:path";
import { createPublicClient, http, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { proxyAbi } from "../../src/chain/artifacts/index.ts";
import { anvilsOf, runBinary, startBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";
import { isAlive } from "../../src/datadir/lock.ts";

interface ChainInfo {
  chainId: number;
  rpcUrl: string;
  contracts: { proxy: `0x${string}`; didRegistry: `0x${string}`; directory: `0x${string}` };
  seller: string;
}


test("embedded chain: deploy once, admin fund and grant, survive kill -9 with one anvil", async () => {
  const dataDir = join(tempDir("e2e-chain"), "data");
  const args = ["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir];
  const first = await startBinary(args);
  const info = (await (await fetch(`${first.url}/chain`)).json()) as ChainInfo;
  expect(info.chainId).toBe(985);
  expect(first.output()).toContain("deploying contracts");
  expect(anvilsOf(dataDir)).toHaveLength(1);

  // Reads go through the public RPC filter, as a client's would.
  const client = createPublicClient({ transport: http(`${first.url}/rpc`) });
  const user = privateKeyToAccount(generatePrivateKey()).address;

  const fund = await runBinary(["admin", "fund", user, "5", "--data-dir", dataDir]);
  expect(fund.stderr).toContain("sending 5 ETH");
  expect(fund.code).toBe(0);
  expect(fund.stdout.trim()).toMatch(/^0x[0-9a-f]{64}$/);
  expect(await client.getBalance({ address: user })).toBe(parseEther("5"));

  const grant = await runBinary(["admin", "grant", "--did", `did:ethr:0x3d9:${user}`, "--space", "1GiB", "--data-dir", dataDir]);
  expect(grant.code).toBe(0);
  expect(grant.stdout.trim()).toMatch(/^0x[0-9a-f]{64}$/);
  const granted = await client.readContract({ address: info.contracts.proxy, abi: proxyAbi, functionName: "spaceRecord", args: [user] });
  expect(granted[3]).toBe(2n ** 30n);
  // --days only lengthens a record: one that lasts longer keeps its later expiry, and says so.
  expect(grant.stderr).not.toContain("lasts longer");
  const traffic = (...days: string[]) => runBinary(["admin", "grant", "--did", user, "--traffic", "1KiB", ...days, "--data-dir", dataDir]);
  expect((await traffic()).code).toBe(0);
  const years = await client.readContract({ address: info.contracts.proxy, abi: proxyAbi, functionName: "trafficRecord", args: [user] });
  const month = await traffic("--days", "30");
  expect(month.code, month.stderr).toBe(0);
  expect(month.stderr).toContain(`expires ${new Date(Number(years[4]) * 1000).toISOString()} (the account's earlier record lasts longer than 30 days)`);
  const after = await client.readContract({ address: info.contracts.proxy, abi: proxyAbi, functionName: "trafficRecord", args: [user] });
  expect([after[3], after[4]]).toEqual([2048n, years[4]]);

  // anvil saves its state every 2 s: wait for a save that includes the grant, then kill -9.
  const state = join(dataDir, "chain", "state.json");
  const grantedAt = Date.now();
  const deadline = grantedAt + 10_000;
  while (statSync(state).mtimeMs <= grantedAt && Date.now() < deadline) await Bun.sleep(50);
  expect(statSync(state).mtimeMs).toBeGreaterThan(grantedAt);
  const [orphan] = anvilsOf(dataDir);
  expect(await first.stop("SIGKILL")).not.toBe(0);
  expect(isAlive(orphan!)).toBe(true); // the killed server's anvil is still running…

  const second = await startBinary(args);
  expect(isAlive(orphan!)).toBe(false); // …until the next start stops it
  expect(anvilsOf(dataDir)).toHaveLength(1);
  expect(second.output()).not.toContain("deploying contracts");
  const again = (await (await fetch(`${second.url}/chain`)).json()) as ChainInfo;
  expect(again.contracts).toEqual(info.contracts);
  const client2 = createPublicClient({ transport: http(`${second.url}/rpc`) });
  expect(await client2.getBalance({ address: user })).toBe(parseEther("5"));
  const kept = await client2.readContract({ address: info.contracts.proxy, abi: proxyAbi, functionName: "spaceRecord", args: [user] });
  expect(kept[3]).toBe(2n ** 30n);

  expect(await second.stop("SIGTERM")).toBe(0);
  expect(anvilsOf(dataDir)).toHaveLength(0);
  const unreachable = await runBinary(["admin", "prices", "--data-dir", dataDir]);
  expect(unreachable.code).toBe(1);
  expect(unreachable.stderr).toContain("is not running");
}, 60_000);
