/** The embedded devnet's own behaviour, on a real anvil (and the in-process EVM) in a temp data dir. */
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { namespaceWrapper, readDevnetRecord, startDevnet } from "../../src/chain/devnet.ts";
import { rpcCall, type RpcEndpoint } from "../../src/chain/endpoint.ts";
import { silentLogger } from "../../src/log.ts";
import { tempDir } from "../support/tmp.ts";

const latestTime = async (endpoint: RpcEndpoint) => Number((await rpcCall<{ timestamp: string }>(endpoint, "eth_getBlockByNumber", ["latest", false])).timestamp);

test("an idle embedded chain keeps its clock near real time (expiry is judged by it)", async () => {
  const devnet = await startDevnet({ dataDir: tempDir("devnet"), chainId: 985, log: silentLogger, idleSeconds: 1 });
  try {
    const first = await latestTime(devnet.endpoint);
    // No transaction is sent: only the heartbeat can move the chain's clock.
    const deadline = Date.now() + 10_000;
    let now = first;
    while (now <= first && Date.now() < deadline) {
      await Bun.sleep(100);
      now = await latestTime(devnet.endpoint);
    }
    expect(now).toBeGreaterThan(first);
    expect(Math.abs(Date.now() / 1000 - now)).toBeLessThan(5);
  } finally {
    await devnet.stop();
  }
}, 20_000);

test("this host allows a private network namespace, so auto picks anvil, in a namespace of its own", async () => {
  expect(namespaceWrapper()).not.toBeNull();
  const dataDir = tempDir("devnet-ns");
  const devnet = await startDevnet({ dataDir, chainId: 985, log: silentLogger });
  try {
    expect(devnet.engine).toBe("anvil");
    const record = readDevnetRecord(dataDir)!;
    expect(record.ipc).toBe(join(dataDir, "chain", "rpc.ipc"));
    expect(readFileSync(`/proc/${record.pid}/cmdline`, "utf8")).toContain("anvil");
    // Its listener lives in another network namespace: nothing in ours can connect to it.
    expect(readlinkSync(`/proc/${record.pid}/ns/net`)).not.toBe(readlinkSync("/proc/self/ns/net"));
    expect(await rpcCall<string>(devnet.endpoint, "eth_chainId")).toBe("0x3d9");
  } finally {
    await devnet.stop();
  }
  expect(readDevnetRecord(dataDir)).toBeUndefined();
}, 20_000);

test("a data dir keeps the engine it started with, and refuses another one by name", async () => {
  const dataDir = tempDir("devnet-keep");
  mkdirSync(join(dataDir, "chain"), { recursive: true });
  writeFileSync(join(dataDir, "chain", "state.json"), "{}");
  await expect(startDevnet({ dataDir, chainId: 985, log: silentLogger, engine: "evm" })).rejects.toThrow("runs on anvil");
});

test("a data dir too deep for anvil's socket path is refused by name before anvil is spawned (none is left running)", async () => {
  const dataDir = join(tempDir("devnet-long"), "d".repeat(100));
  await expect(startDevnet({ dataDir, chainId: 985, log: silentLogger, engine: "anvil" })).rejects.toThrow("longer than a Unix socket path may be");
  // A spawned anvil is detached and recorded: no record means none was started to outlive the refusal.
  expect(readDevnetRecord(dataDir)).toBeUndefined();
});

test("a damaged record of an earlier run (cut by a kill mid-write) does not stop the start", async () => {
  const dataDir = tempDir("devnet-damaged");
  mkdirSync(join(dataDir, "chain"), { recursive: true });
  writeFileSync(join(dataDir, "chain", "anvil.json"), '{"pid": 12'); // a release before D14 wrote this name
  writeFileSync(join(dataDir, "chain", "running.json"), '{"engine": "an');
  const devnet = await startDevnet({ dataDir, chainId: 985, log: silentLogger });
  try {
    expect(await rpcCall<string>(devnet.endpoint, "eth_chainId")).toBe("0x3d9");
  } finally {
    await devnet.stop();
  }
}, 20_000);
