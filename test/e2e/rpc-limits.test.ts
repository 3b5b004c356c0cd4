/**
 * One request must not freeze the gateway: the compiled server, on each embedded chain engine,
 * answers /healthz within 100 ms (its chain component, a read the server makes itself, included)
 * while the public /rpc runs code that loops, alone or as a flood from many clients that keeps
 * within every per-client cap; and a looping call ends with a JSON-RPC error within the
 * wall-clock limit.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";

/** Init code that jumps back to its start for ever: it runs until its gas or its time is gone. */
const LOOP = "0x5b600056";
const LIMIT_MS = 1000;
const HEALTHZ_MS = 100;

const servers: RunningBinary[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop("SIGKILL").catch(() => {});
});

interface Probe {
  status: number;
  ms: number;
  chainOk: boolean;
}

/** Asks /healthz every 25 ms until `until` settles; each answer with how long it took. */
async function probeWhile(url: string, until: Promise<unknown>): Promise<Probe[]> {
  let done = false;
  void until.finally(() => (done = true));
  const probes: Probe[] = [];
  while (!done) {
    const started = performance.now();
    const res = await fetch(`${url}/healthz`);
    const body = (await res.json()) as { components: { chain?: { ok: boolean } } };
    probes.push({ status: res.status, ms: performance.now() - started, chainOk: body.components.chain?.ok === true });
    await Bun.sleep(25);
  }
  return probes;
}

/**
 * Probes that failed the bar: not 200, the chain component not ok, or slow. On a machine shared
 * with other jobs the scheduler alone holds up the odd probe (an idle server here answers 1 ms
 * typically, 20 ms at p99, 190 ms at worst): so nine probes in ten must answer within 100 ms and
 * none may take 1 s. A listener held by a call that loops holds every probe for the whole call:
 * 1.8–3.7 s for 30 M gas in the in-process EVM.
 */
function slowProbes(probes: Probe[]): Probe[] {
  const failed = probes.filter((p) => p.status !== 200 || !p.chainOk || p.ms >= 1000);
  const slow = probes.filter((p) => p.ms >= HEALTHZ_MS);
  return slow.length > probes.length / 10 ? [...failed, ...slow.filter((p) => !failed.includes(p))] : failed;
}

const rpc = (url: string, body: unknown, client: string) =>
  fetch(`${url}/rpc`, { method: "POST", headers: { "content-type": "application/json", "x-forwarded-for": client }, body: JSON.stringify(body) });

describe.each([
  ["anvil", { STOWAGE_EMBEDDED_CHAIN: "anvil" }],
  ["the in-process EVM", { STOWAGE_EMBEDDED_CHAIN: "evm" }],
])("public /rpc on %s", (_name, engine) => {
  let server: RunningBinary;
  const start = async () => {
    server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", join(tempDir("rpc-limits"), "data")], {
      ...engine,
      STOWAGE_RPC_TIMEOUT: `${LIMIT_MS}ms`,
      // Each request names its client in X-Forwarded-For: the flood comes from many of them.
      STOWAGE_TRUST_PROXY: "1",
    });
    servers.push(server);
    // Warm: the first answers of a fresh server (the chain's first reads) are not the point here.
    for (let i = 0; i < 3; i++) expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    return server;
  };

  test("a looping eth_call with the full default gas ends with an error within the limit; /healthz answers within 100 ms all the while", async () => {
    const { url } = await start();
    const started = performance.now();
    const call = rpc(url, { jsonrpc: "2.0", id: 1, method: "eth_call", params: [{ data: LOOP }, "latest"] }, "198.51.100.1").then(async (res) => ({
      status: res.status,
      body: (await res.json()) as { error?: { code: number; message: string } },
      ms: performance.now() - started,
    }));
    const probes = await probeWhile(url, call);
    const answer = await call;
    expect(answer.status).toBe(200);
    expect(answer.body.error?.message).toMatch(/out of gas|OutOfGas|execution aborted/i);
    expect(answer.ms).toBeLessThan(LIMIT_MS + 500);
    expect(probes.length).toBeGreaterThan(0);
    expect(slowProbes(probes)).toEqual([]);
  }, 60_000);

  test("a flood of looping calls from many clients, each within its caps, leaves /healthz and the server's own chain reads answering", async () => {
    const { url } = server;
    const started = performance.now();
    // Ten clients at once, each a full batch of looping calls that name no gas.
    const batch = Array.from({ length: 20 }, (_, i) => ({ jsonrpc: "2.0", id: i, method: "eth_call", params: [{ data: LOOP }, "latest"] }));
    const flood = Promise.all(
      Array.from({ length: 10 }, (_, c) =>
        rpc(url, batch, `203.0.113.${c + 1}`).then(async (res) => ({ status: res.status, body: (await res.json()) as { error?: { message: string } }[] })),
      ),
    );
    const probes = await probeWhile(url, flood);
    const answers = await flood;
    const took = performance.now() - started;
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.body).toHaveLength(20);
      // Each ends in an error: out of gas, stopped at the limit, or turned away while the gateway is busy.
      for (const entry of a.body) expect(entry.error?.message).toMatch(/out of gas|OutOfGas|execution aborted|busy/i);
    }
    expect(took).toBeLessThan(LIMIT_MS + 1500);
    expect(slowProbes(probes)).toEqual([]);
    expect(await server.stop()).toBe(0);
  }, 60_000);
});
