/**
 * `stowage admin usage` on this pass's database (SQLite or PostgreSQL): two accounts buy, are
 * granted, upload, download and make S3 keys and Pinning Service tokens through the gateway and
 * the chain (the two counted apart, though one table holds them); the report's
 * numbers are what the quota records and the chain say (read from the Proxy contract, not from
 * the report's own tables), its totals are the sums of its rows, `--since` bounds what has a time,
 * and the Prometheus gauges show the same totals without naming any account.
 */
import { describe, expect, test } from "bun:test";
import { parseEther } from "viem";
import { runAdmin } from "../../src/cli/admin.ts";
import { createIndexer } from "../../src/chain/indexer.ts";
import { readRecord } from "../../src/chain/records.ts";
import { silentLogger } from "../../src/log.ts";
import { createMetrics } from "../../src/metrics/index.ts";
import { usageReport, usageTotals, type AccountUsage, type UsageReport } from "../../src/ops/usage.ts";
import { quotaEventsConsumer } from "../../src/quota/events.ts";
import { connectGateway } from "../../src/sdk/chain.ts";
import { keysClient } from "../../src/sdk/keys.ts";
import { granter } from "../quota/grants.ts";
import { TEST_DB, testDatabaseUrlOf } from "../support/db.ts";
import { BASE, testGateway } from "../support/storage.ts";

const gw = await testGateway({ quota: true });
const sql = gw.database.sql;
const { context } = gw.chain;
const grant = granter(gw.chain);
const env: Record<string, string> = { STOWAGE_DATA_DIR: gw.dataDir, ...(TEST_DB === "postgres" ? { STOWAGE_DATABASE_URL: await testDatabaseUrlOf(gw.dataDir) } : {}) };
const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

// Alice deposits and buys through the gateway (the operator's Purchased events); Bob is granted
// (the owner's FreeGranted events) and buys nothing.
const alice = await gw.user();
await (await connectGateway(BASE, { account: alice.account, fetch: gw.fetch })).deposit(parseEther("1"));
await alice.client.buySpace({ size: 5_000_000 });
await alice.client.buyTraffic({ size: 8_000_000 });
await alice.client.buyTraffic({ size: 1_000_000, idempotencyKey: "second" });
const bob = await gw.user();
await grant(bob.account.address, "space", 3_000_000);
await grant(bob.account.address, "traffic", 4_000_000);

const a1 = await alice.client.upload("dfs", random(1_500_000), { name: "a1.bin" });
await alice.client.upload("ipfs", random(700_000), { name: "a2.bin" });
await alice.client.upload("dfs", random(200_000), { name: "a3.bin" });
await alice.client.download("dfs", a1.Cid, { range: [0, 99_999] });
await bob.client.upload("dfs", random(1_000_000), { name: "b1.bin" });
const aliceKeys = keysClient({ baseUrl: BASE, store: alice.client, fetch: gw.fetch });
await aliceKeys.create();
await aliceKeys.create({ scope: "pins" });
const bobKeys = keysClient({ baseUrl: BASE, store: bob.client, fetch: gw.fetch });
await bobKeys.create();
await bobKeys.revoke((await bobKeys.create()).accessKeyId);
await bobKeys.revoke((await bobKeys.create({ scope: "pins" })).accessKeyId);

// The server's indexer does this at every poll: the Proxy's events into quota_events.
const indexer = createIndexer({ sql, publicClient: context.publicClient, confirmations: 0, log: silentLogger });
indexer.add(quotaEventsConsumer({ address: context.contracts.proxy, fromBlock: gw.chain.deployBlock }));
await indexer.syncOnce();

async function cli(...args: string[]): Promise<string> {
  const out: string[] = [];
  expect(await runAdmin(["usage", ...args], env, (l) => out.push(l), () => {}, false)).toBe(0);
  return out.join("\n");
}

const find = (r: UsageReport, who: { account: { address: string } }) => r.accounts.find((a) => a.account === who.account.address) as AccountUsage;

describe("stowage admin usage", () => {
  test("each account's numbers are what its quota records and the chain say", async () => {
    const report = JSON.parse(await cli("--json")) as UsageReport;
    expect(report.accounts.map((a) => a.account).sort()).toEqual([alice.account.address, bob.account.address].sort());
    for (const { client, account } of [alice, bob]) {
      const row = find(report, { account });
      const space = await readRecord(context.publicClient, context.contracts.proxy, account.address, "space");
      const traffic = await readRecord(context.publicClient, context.contracts.proxy, account.address, "traffic");
      // What the chain says was bought and granted.
      expect(row.purchases.space.bytes).toBe(String(space.purchased));
      expect(row.purchases.traffic.bytes).toBe(String(traffic.purchased));
      expect(row.grants.space.bytes).toBe(String(space.free));
      expect(row.grants.traffic.bytes).toBe(String(traffic.free));
      // Each purchase and grant is one nonce of its record.
      expect(row.purchases.space.count + row.grants.space.count).toBe(Number(space.nonce));
      expect(row.purchases.traffic.count + row.grants.traffic.count).toBe(Number(traffic.nonce));
      // What the quota counts against each pool: its allowance less what it says is left.
      const spaceLeft = await client.space();
      const trafficLeft = await client.traffic();
      expect(row.stored.bytes).toBe(Number(space.purchased + space.free) - spaceLeft.SizeByte);
      expect(row.traffic.periodBytes).toBe(Number(traffic.purchased + traffic.free) - trafficLeft.SizeByte);
      // The deposit spent on purchases, in wei.
      const deposited = client === alice.client ? parseEther("1") : 0n;
      expect(row.purchases.spentWei).toBe(String(deposited - space.deposit));
      // Files per back-end: what the listings show.
      for (const backend of ["dfs", "ipfs"] as const) {
        const listed = (await client.list(backend)).Object;
        expect(row.stored[backend]).toEqual({ count: listed.length, bytes: listed.reduce((n, f) => n + f.Size, 0) });
      }
      expect(row.did).toBe(client.did);
    }
    expect(find(report, alice)).toMatchObject({ purchases: { space: { count: 1 }, traffic: { count: 2, bytes: "9000000" } }, s3: { keys: 1, keysMade: 1 }, ipfs: { pins: 1, pinTokens: 1 } });
    // A revoked token, as a revoked key, works no more.
    expect(find(report, bob)).toMatchObject({ grants: { space: { count: 1, bytes: "3000000" } }, purchases: { spentWei: "0" }, s3: { keys: 1, keysMade: 2 }, ipfs: { pinTokens: 0 } });
    // Uploads and the download, under the vouchers' counters.
    expect(find(report, alice).traffic.voucherBytes).toBe(1_500_000 + 700_000 + 200_000 + 100_000);
  });

  test("totals are the sums of the rows", async () => {
    const report = await usageReport(sql);
    const sum = (f: (a: AccountUsage) => number) => report.accounts.reduce((n, a) => n + f(a), 0);
    expect(report.totals.stored.bytes).toBe(sum((a) => a.stored.bytes));
    expect(report.totals.stored.dfs).toEqual({ count: sum((a) => a.stored.dfs.count), bytes: sum((a) => a.stored.dfs.bytes) });
    const exact = (f: (a: AccountUsage) => string) => String(report.accounts.reduce((n, a) => n + BigInt(f(a)), 0n));
    expect(report.totals.purchases.traffic.bytes).toBe(exact((a) => a.purchases.traffic.bytes));
    expect(report.totals.grants.space.bytes).toBe(exact((a) => a.grants.space.bytes));
    expect(report.totals.traffic.periodBytes).toBe(sum((a) => a.traffic.periodBytes));
    expect(report.totals.s3.keys).toBe(2);
    expect(report.totals.ipfs.pinTokens).toBe(1);
  });

  test("--since bounds what has a time; what is stored now stays", async () => {
    const later = (await cli("--since", new Date(Date.now() + 86_400_000).toISOString(), "--json")) as string;
    const report = JSON.parse(later) as UsageReport;
    const a = find(report, alice);
    expect(a.purchases).toEqual({ space: { count: 0, bytes: "0" }, traffic: { count: 0, bytes: "0" }, spentWei: "0" });
    expect(a.storedSince.dfs).toEqual({ count: 0, bytes: 0 });
    expect(a.s3.keysMade).toBe(0);
    expect(a.stored.dfs.count).toBe(2);
    expect(a.s3.keys).toBe(1);
    const earlier = JSON.parse(await cli("--since", "2000-01-01", "--json")) as UsageReport;
    const all = find(earlier, alice);
    expect(all.storedSince).toEqual({ dfs: all.stored.dfs, ipfs: all.stored.ipfs });
    expect(all.purchases.traffic.bytes).toBe("9000000");
  });

  test("--csv: a header and one row per account, with the JSON's numbers", async () => {
    const [header, ...rows] = (await cli("--csv")).split("\n");
    const columns = (header as string).split(",");
    expect(columns.slice(0, 3)).toEqual(["account", "did", "dfs_files"]);
    expect(rows).toHaveLength(2);
    const byAccount = Object.fromEntries(rows.map((r) => [r.split(",")[0], Object.fromEntries(r.split(",").map((v, i) => [columns[i], v]))]));
    const json = await usageReport(sql);
    const a = byAccount[alice.account.address] as Record<string, string>;
    expect(Number(a.stored_bytes)).toBe(find(json, alice).stored.bytes);
    expect(Number(a.traffic_purchased_bytes)).toBe(9_000_000);
    expect(a.spent_wei).toBe(find(json, alice).purchases.spentWei);
    expect([a.s3_keys, a.ipfs_pin_tokens]).toEqual(["1", "1"]);
  });

  test("the table: S3 keys and pin tokens in columns of their own", async () => {
    const [, header, ...rows] = (await cli()).split("\n");
    expect(header).toEndWith(" s3 keys pin tokens");
    const last2 = (who: string) => (rows.find((r) => r.startsWith(who)) as string).trim().split(/ +/).slice(-2);
    expect(last2(alice.account.address)).toEqual(["1", "1"]);
    expect(last2(bob.account.address)).toEqual(["1", "0"]);
    expect(last2("total")).toEqual(["2", "1"]);
  });

  test("Prometheus gauges show the totals, and no label names an account", async () => {
    const metrics = createMetrics();
    metrics.gauges({ usage: () => usageTotals(sql) });
    const text = await metrics.registry.metrics();
    const report = await usageReport(sql);
    const value = (series: string) => Number(new RegExp(`^${series.replace(/[{}"]/g, "\\$&")} (\\S+)$`, "m").exec(text)?.[1]);
    expect(value(`stowage_stored_bytes{backend="dfs"}`)).toBe(report.totals.stored.dfs.bytes);
    expect(value(`stowage_stored_files{backend="ipfs"}`)).toBe(report.totals.stored.ipfs.count);
    expect(value("stowage_accounts_storing")).toBe(2);
    expect(value("stowage_traffic_period_bytes")).toBe(report.totals.traffic.periodBytes);
    expect(value(`stowage_quota_event_bytes{kind="purchase",pool="traffic"}`)).toBe(9_000_000);
    expect(value(`stowage_quota_events{kind="grant",pool="space"}`)).toBe(1);
    expect(value("stowage_s3_access_keys")).toBe(2);
    expect(value("stowage_pin_tokens")).toBe(1);
    for (const who of [alice, bob]) {
      expect(text.toLowerCase()).not.toContain(who.account.address.toLowerCase().slice(2));
    }
  });

  test("grants past 2^53 and of 2^64 − 1 bytes are indexed and summed exactly", async () => {
    // `stowage admin grant --space 9EiB` sends one such; the chain's record is a uint64.
    const above = 2n ** 53n + 1n;
    const max = 2n ** 64n - 1n;
    const carol = await gw.chain.anvil.newAccount();
    const dave = await gw.chain.anvil.newAccount();
    await grant(carol.address, "space", above);
    await grant(carol.address, "traffic", 9n * 2n ** 60n);
    await grant(dave.address, "space", max);
    await indexer.syncOnce();
    const report = JSON.parse(await cli("--json")) as UsageReport;
    for (const who of [carol, dave]) {
      const row = find(report, { account: who });
      expect(row.grants.space.bytes).toBe(String((await readRecord(context.publicClient, context.contracts.proxy, who.address, "space")).free));
      expect(row.grants.traffic.bytes).toBe(String((await readRecord(context.publicClient, context.contracts.proxy, who.address, "traffic")).free));
    }
    expect(find(report, { account: carol }).grants).toEqual({ space: { count: 1, bytes: "9007199254740993" }, traffic: { count: 1, bytes: "10376293541461622784" } });
    expect(find(report, { account: dave }).grants.space).toEqual({ count: 1, bytes: "18446744073709551615" });
    // The total passes even a uint64, exactly.
    expect(report.totals.grants.space.bytes).toBe(String(3_000_000n + above + max));
    const [header, ...rows] = (await cli("--csv")).split("\n");
    const column = (header as string).split(",").indexOf("space_granted_bytes");
    expect(rows.find((r) => r.startsWith(dave.address))?.split(",")[column]).toBe("18446744073709551615");
    expect(await cli()).toContain("16.0 EiB");
    // The gauge is a float, as every Prometheus value is.
    const metrics = createMetrics();
    metrics.gauges({ usage: () => usageTotals(sql) });
    const text = await metrics.registry.metrics();
    const gauge = Number(/^stowage_quota_event_bytes\{kind="grant",pool="space"\} (\S+)$/m.exec(text)?.[1]);
    expect(gauge).toBe(Number(3_000_000n + above + max));
  });

  test("bad usage exits with 2's error: a date that is none, two formats", async () => {
    await expect(runAdmin(["usage", "--since", "yesterday"], env, () => {}, () => {}, false)).rejects.toThrow("--since: not a date");
    await expect(runAdmin(["usage", "--json", "--csv"], env, () => {}, () => {}, false)).rejects.toThrow("one of --json and --csv");
  });
});
