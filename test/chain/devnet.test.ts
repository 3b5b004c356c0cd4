/** The embedded devnet's own behaviour, on a real anvil in a temp data dir. */
import { expect, test } from "bun:test";
import { startDevnet } from "../../src/chain/devnet.ts";
import { rpcCall } from "../../src/chain/rpc.ts";
import { silentLogger } from "../../src/log.ts";
import { tempDir } from "../support/tmp.ts";

const latestTime = async (url: string) => Number((await rpcCall<{ timestamp: string }>(url, "eth_getBlockByNumber", ["latest", false])).timestamp);

test("an idle embedded chain keeps its clock near real time (expiry is judged by it)", async () => {
  const devnet = await startDevnet({ dataDir: tempDir("devnet"), chainId: 985, log: silentLogger, idleSeconds: 1 });
  try {
    const first = await latestTime(devnet.url);
    // No transaction is sent: only the heartbeat can move the chain's clock.
    const deadline = Date.now() + 10_000;
    let now = first;
    while (now <= first && Date.now() < deadline) {
      await Bun.sleep(100);
      now = await latestTime(devnet.url);
    }
    expect(now).toBeGreaterThan(first);
    expect(Math.abs(Date.now() / 1000 - now)).toBeLessThan(5);
  } finally {
    await devnet.stop();
  }
}, 20_000);
