/**
 * One request must not freeze the gateway: the compiled server, on each embedded chain engine,
 * answers /healthz within 100 ms (its chain component, a read the server makes itself, included)
 * while the public /rpc runs code that loops, alone or as a flood from many clients that keeps
 * within every per-client cap; a looping call ends with a JSON-RPC error within the wall-clock
 * limit; in a flood every client gets its turn; and eth_getLogs over too many blocks is refused.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";

/** Init code that jumps back to its start for ever: it runs until its gas or its time is gone. */
const LOOP = "0x5b600056";
/** Long enough that a warm simulation thread finishes a few of the flood's calls on a loaded machine. */
const LIMIT_MS = 3000;
/** Blocks one eth_getLogs may span: fewer than a fresh chain has (its contracts took three). */
const LOG_BLOCKS = 2;
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
 * none may take 1 s. Both hold on a loaded 2-core machine (load 12–15 beside these tests: p90
 * under 25 ms, worst 90 ms). A listener held by a call that loops holds the probe in flight for the
 * whole call, and few others get answered meanwhile: 0.3–1.5 s for the default 5 M gas in the
 * in-process EVM, so that probe alone is more than one in ten; a flood holds them for seconds.
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
      STOWAGE_RPC_LOG_BLOCKS: String(LOG_BLOCKS),
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

  test("a flood of looping calls from many clients, each within its caps, leaves /healthz and the server's own chain reads answering; every client gets its turn", async () => {
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
    let ran = 0;
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.body).toHaveLength(20);
      // Each ends in an error: out of gas (it ran to its end), stopped at the limit, or turned away while the gateway is busy.
      for (const entry of a.body) expect(entry.error?.message).toMatch(/out of gas|OutOfGas|execution aborted|busy/i);
      ran += a.body.filter((entry) => /out of gas|OutOfGas/i.test(entry.error?.message ?? "")).length;
      // 200 calls are more than the line holds, but every client keeps a place in it: the
      // first clients' full batches make room for the later ones instead of shutting them out.
      expect(a.body.filter((entry) => !/busy/.test(entry.error?.message ?? "")).length).toBeGreaterThan(0);
    }
    expect(ran).toBeGreaterThan(0);
    expect(took).toBeLessThan(LIMIT_MS + 1500);
    expect(slowProbes(probes)).toEqual([]);
  }, 60_000);

  test("eth_getLogs over more blocks than the cap is refused with -32005; a narrower one is answered", async () => {
    const { url } = server;
    const getLogs = async (filter: unknown) => (await (await rpc(url, { jsonrpc: "2.0", id: 1, method: "eth_getLogs", params: [filter] }, "198.51.100.9")).json()) as { result?: unknown[]; error?: { code: number; message: string } };
    const whole = await getLogs({ fromBlock: "earliest", toBlock: "latest" });
    expect(whole.error?.code).toBe(-32005);
    expect(whole.error?.message).toContain(`cap of ${LOG_BLOCKS} blocks per call`);
    expect(Array.isArray((await getLogs({ fromBlock: "latest" })).result)).toBe(true);
    expect(await server.stop()).toBe(0);
  }, 60_000);
});
