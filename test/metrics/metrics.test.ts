/**
 * GET /metrics (D19) against the compiled binary: served on its own listener and not on the public
 * port, parsed by a Prometheus text-format parser, and moving with traffic — requests by route and
 * status, file bytes in and out per back-end, purchases, chain calls — while the gauges (indexer
 * lag, IPFS peers, live reservations, pin requests by status, a Pinning Service token counted as
 * one and not as an S3 key) are there. A bad
 * STOWAGE_METRICS_LISTEN stops the start by name.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { connectGateway } from "../../src/sdk/chain.ts";
import { keysClient } from "../../src/sdk/keys.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { parsePrometheus, type PromFamily, type PromSample } from "../support/prometheus.ts";
import { tempDir } from "../support/tmp.ts";

const dataDir = join(tempDir("metrics"), "data");
let server: RunningBinary;
let metricsUrl: string;

beforeAll(async () => {
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], { STOWAGE_METRICS_LISTEN: "127.0.0.1:0" }, 60_000);
  const logged = /"msg":"metrics listening","url":"(http:\/\/[^"]+)"/.exec(server.output());
  if (!logged) throw new Error(`no "metrics listening" line:\n${server.output()}`);
  metricsUrl = logged[1] as string;
  // One pin request, before the first scrape (the gauge is read at most every 30 s): a Cid no
  // origin has, so it is queued, pinning or failed, but counted.
  const pinner = privateKeyToAccount(generatePrivateKey());
  expect((await runBinary(["admin", "fund", pinner.address, "1", "--data-dir", dataDir])).code).toBe(0);
  await (await connectGateway(server.url, { account: pinner })).deposit(parseEther("0.001"));
  const store = await connectStorage({ baseUrl: server.url, account: pinner });
  await store.login();
  await store.buySpace({ size: 100_000 });
  const { token } = await keysClient({ baseUrl: server.url, store }).create({ scope: "pins" });
  const pinned = await fetch(`${server.url}/psa/pins`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ cid: "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy" }) });
  expect(pinned.status).toBe(202);
}, 90_000);

afterAll(async () => {
  expect(await server.stop()).toBe(0);
});

/** Every sample of a scrape, as the Prometheus client's own parser reads it. */
async function scrape(): Promise<{ families: Map<string, PromFamily>; samples: PromSample[] }> {
  const res = await fetch(metricsUrl);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toStartWith("text/plain; version=0.0.4");
  const families = await parsePrometheus(await res.text());
  return { families, samples: [...families.values()].flatMap((f) => f.samples) };
}

type Scrape = Awaited<ReturnType<typeof scrape>>;
const matches = (s: PromSample, labels: Record<string, string>) => Object.entries(labels).every(([k, v]) => s.labels[k] === v);
/** The sum of the series `name` over those that have the labels (0 when none exists yet). */
function value({ samples }: Scrape, name: string, labels: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && matches(s, labels)).reduce((n, s) => n + s.value, 0);
}

test("the metrics are on their own listener, not on the public port", async () => {
  expect(new URL(metricsUrl).port).not.toBe(new URL(server.url).port);
  const pub = await fetch(`${server.url}/metrics`);
  expect(pub.status).toBe(404);
  expect((await fetch(`${metricsUrl}/other`)).status).toBe(404);
  const first = await scrape();
  // The client's parser names a counter's family without its `_total`.
  for (const [name, type] of [
    ["stowage_http_requests", "counter"],
    ["stowage_http_request_duration_seconds", "histogram"],
    ["stowage_chain_rpc_duration_seconds", "histogram"],
    ["stowage_transfer_bytes", "counter"],
    ["stowage_purchases", "counter"],
    ["stowage_indexer_lag_blocks", "gauge"],
    ["stowage_ipfs_peers", "gauge"],
    ["stowage_quota_reservations", "gauge"],
    ["stowage_pin_requests", "gauge"],
    ["process_resident_memory_bytes", "gauge"],
    ["process_cpu_seconds", "counter"],
  ] as const) {
    expect(first.families.get(name)?.type, name).toBe(type);
  }
  // The server deployed its contracts and polls the chain: RPC calls were timed, the indexer has a cursor.
  expect(value(first, "stowage_chain_rpc_duration_seconds_count", { method: "eth_blockNumber", outcome: "ok" })).toBeGreaterThan(0);
  expect(first.families.get("stowage_indexer_lag_blocks")?.samples.length).toBe(1);
  expect(value(first, "stowage_indexer_lag_blocks")).toBeGreaterThanOrEqual(0);
  expect(first.families.get("stowage_ipfs_peers")?.samples.length).toBe(1);
  // Every status has its series; the one request made is in one of them, and none is pinned.
  expect(first.families.get("stowage_pin_requests")?.samples.map((s) => s.labels.status).sort()).toEqual(["failed", "pinned", "pinning", "queued"]);
  expect(value(first, "stowage_pin_requests")).toBe(1);
  expect(value(first, "stowage_pin_requests", { status: "pinned" })).toBe(0);
  // The pin request's token is a Pinning Service token, not an S3 access key.
  expect(value(first, "stowage_pin_tokens")).toBe(1);
  expect(first.families.get("stowage_s3_access_keys")?.samples.map((s) => s.value)).toEqual([0]);
  expect(value(first, "process_resident_memory_bytes")).toBeGreaterThan(10 * 1024 * 1024);
}, 30_000);

test("counters move with traffic: requests by route and status, bytes per back-end, purchases", async () => {
  const before = await scrape();
  const account = privateKeyToAccount(generatePrivateKey());
  expect((await runBinary(["admin", "fund", account.address, "1", "--data-dir", dataDir])).code).toBe(0);
  await (await connectGateway(server.url, { account })).deposit(parseEther("0.001"));
  const store = await connectStorage({ baseUrl: server.url, account });
  await store.login();
  await store.buySpace({ size: 300_000 });
  await store.buyTraffic({ size: 600_000 });
  const file = crypto.getRandomValues(new Uint8Array(100_000));
  const entry = await store.upload("dfs", file, { name: "m.bin" });
  expect(new Uint8Array(await (await store.download("dfs", entry.Cid)).arrayBuffer())).toEqual(file);
  for (let i = 0; i < 3; i++) expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  expect((await fetch(`${server.url}/no/such/route`)).status).toBe(404);

  const after = await scrape();
  const moved = (name: string, labels: Record<string, string>) => value(after, name, labels) - value(before, name, labels);
  expect(moved("stowage_http_requests_total", { method: "GET", route: "/healthz", status: "200" })).toBe(3);
  // A route's pattern is the label, never the raw path (no label per Cid or scanner's guess).
  expect(moved("stowage_http_requests_total", { method: "GET", route: "unmatched", status: "404" })).toBe(1);
  expect(moved("stowage_http_requests_total", { method: "GET", route: "/:type/:cid", status: "200" })).toBe(1);
  expect(moved("stowage_http_requests_total", { method: "POST", route: "/:type", status: "200" })).toBe(1);
  expect(after.samples.filter((s) => (s.labels.route ?? "").includes(entry.Cid))).toEqual([]);
  expect(moved("stowage_http_request_duration_seconds_count", { method: "GET", route: "/healthz" })).toBe(3);
  // Each observation lands in the +Inf bucket and in no bucket below the fastest possible answer.
  expect(moved("stowage_http_request_duration_seconds_bucket", { method: "GET", route: "/healthz", le: "+Inf" })).toBe(3);
  expect(moved("stowage_transfer_bytes_total", { backend: "dfs", direction: "in" })).toBe(file.byteLength);
  expect(moved("stowage_transfer_bytes_total", { backend: "dfs", direction: "out" })).toBe(file.byteLength);
  expect(moved("stowage_purchases_total", { kind: "space", outcome: "done" })).toBe(1);
  expect(moved("stowage_purchases_total", { kind: "traffic", outcome: "done" })).toBe(1);
  // Nothing in flight now: no live reservation holds bytes.
  expect(value(after, "stowage_quota_reserved_bytes", { pool: "space" })).toBe(0);
}, 60_000);

test("a bad STOWAGE_METRICS_LISTEN stops the start and names the setting", async () => {
  const bad = await runBinary(["serve", "--port", "0", "--data-dir", join(tempDir("metrics-bad"), "data")], { STOWAGE_METRICS_LISTEN: "9464" });
  expect(bad.code).not.toBe(0);
  expect(bad.stderr).toContain("STOWAGE_METRICS_LISTEN");
});
