/**
 * The chain event indexer on a real anvil and the database of this pass (SQLite or PostgreSQL):
 * every event once and in order, confirmations, crashes, RPC outages, rewinds; and, with many
 * gateways (D16), the "indexer" lease: only its holder indexes, and a holder that lost it cannot
 * move the cursor.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { parseEther, type Address } from "viem";
import { proxyAbi } from "../../src/chain/artifacts/index.ts";
import { chainClients } from "../../src/chain/clients.ts";
import { createIndexer, type Consumer, type IndexedEvent } from "../../src/chain/indexer.ts";
import { acquire, aborted, LeaseLostError, singleton } from "../../src/db/leases.ts";
import type { Sql } from "../../src/db/sql.ts";
import { silentLogger } from "../../src/log.ts";
import { mined } from "../support/anvil.ts";
import { testChain, type TestChain } from "../support/chain.ts";
import { TEST_DB, testDatabase } from "../support/db.ts";
import { postgres } from "../support/postgres.ts";
import { tempDir } from "../support/tmp.ts";

const chain: TestChain = await testChain();
// PostgreSQL's start (initdb included) takes seconds: before the tests, not inside the first one's timeout.
if (TEST_DB === "postgres") await postgres();

const DEPOSITS = "CREATE TABLE IF NOT EXISTS deposits (block BIGINT NOT NULL, log_index BIGINT NOT NULL, tx TEXT NOT NULL, depositor TEXT NOT NULL, amount TEXT NOT NULL, UNIQUE (tx, log_index))";

/** A consumer that records Deposited events in its own table, keyed so a duplicate would fail. */
function depositsConsumer(overrides: Partial<Consumer> = {}): Consumer {
  return {
    name: "deposits",
    address: chain.context.contracts.proxy,
    abi: proxyAbi,
    fromBlock: chain.deployBlock,
    async apply(tx, events: IndexedEvent[]) {
      for (const e of events.filter((e) => e.eventName === "Deposited")) {
        await tx.run("INSERT INTO deposits VALUES ($1, $2, $3, $4, $5)", [Number(e.blockNumber), e.logIndex, e.transactionHash, String(e.args.user), String(e.args.amount)]);
      }
    },
    async rollback(tx, block) {
      await tx.run("DELETE FROM deposits WHERE block > $1", [Number(block)]);
    },
    ...overrides,
  };
}

/** A fresh database of this pass, with the consumers' table. */
async function freshDb(): Promise<Sql> {
  const database = testDatabase(tempDir("idx"));
  afterAll(() => database.close());
  await database.sql.run(DEPOSITS);
  return database.sql;
}

const rows = (sql: Sql) => sql.all<{ user: string; amount: string }>('SELECT depositor AS "user", amount FROM deposits ORDER BY block, log_index');

async function deposit(eth: string) {
  const user = await chain.anvil.newAccount();
  await mined(chain.anvil.publicClient, chain.anvil.wallet(user).writeContract({ address: chain.context.contracts.proxy, abi: proxyAbi, functionName: "deposit", value: parseEther(eth) }));
  return { user: user.address as Address, amount: String(parseEther(eth)) };
}

describe("event indexer", () => {
  test("applies every event once, in chain order, across several ranges", async () => {
    const database = await freshDb();
    const expected = [await deposit("1"), await deposit("2"), await deposit("3")];
    const indexer = createIndexer({ sql: database, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger, batchBlocks: 1 });
    indexer.add(depositsConsumer());
    await indexer.syncOnce();
    expect(await rows(database)).toEqual(expected);
    await indexer.syncOnce();
    expect(await rows(database)).toEqual(expected);
  });

  test("waits for the confirmation depth", async () => {
    const database = await freshDb();
    const indexer = createIndexer({ sql: database, publicClient: chain.anvil.publicClient, confirmations: 2, log: silentLogger });
    indexer.add(depositsConsumer({ fromBlock: (await chain.anvil.publicClient.getBlockNumber()) + 1n }));
    const d = await deposit("1");
    await indexer.syncOnce();
    expect(await rows(database)).toEqual([]);
    await chain.anvil.testClient.mine({ blocks: 2 });
    await indexer.syncOnce();
    expect(await rows(database)).toEqual([d]);
  });

  test("a crash in the middle of a range applies nothing of it, and a restart applies it once", async () => {
    const database = await freshDb();
    const start = (await chain.anvil.publicClient.getBlockNumber()) + 1n;
    const expected = [await deposit("4"), await deposit("5")];
    let calls = 0;
    const crashing = depositsConsumer({
      fromBlock: start,
      async apply(tx, events) {
        await depositsConsumer().apply(tx, events.slice(0, 1));
        if (++calls === 1) throw new Error("power cut");
      },
    });
    const first = createIndexer({ sql: database, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger });
    first.add(crashing);
    await expect(first.syncOnce()).rejects.toThrow("power cut");
    expect(await rows(database)).toEqual([]);

    // A new process: same database, a healthy consumer.
    const second = createIndexer({ sql: database, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger });
    second.add(depositsConsumer({ fromBlock: start }));
    await second.syncOnce();
    await second.syncOnce();
    expect(await rows(database)).toEqual(expected);
  });

  test("keeps retrying while the RPC fails, then catches up", async () => {
    const database = await freshDb();
    let down = true;
    let refused = 0;
    const flaky = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      async fetch(req) {
        if (down) {
          refused++;
          return new Response("unavailable", { status: 503 });
        }
        return fetch(chain.anvil.url, { method: "POST", headers: { "content-type": "application/json" }, body: await req.text() });
      },
    });
    afterAll(() => flaky.stop(true));
    const start = (await chain.anvil.publicClient.getBlockNumber()) + 1n;
    const { publicClient } = chainClients(chain.anvil.chainId, `http://127.0.0.1:${flaky.port}`, 25);
    const indexer = createIndexer({ sql: database, publicClient, confirmations: 0, log: silentLogger, pollMs: 20, backoffMs: 10, maxBackoffMs: 50 });
    indexer.add(depositsConsumer({ fromBlock: start }));
    indexer.start();
    const d = await deposit("6");
    while (refused < 5) await Bun.sleep(10);
    expect(await rows(database)).toEqual([]);
    down = false;
    await indexer.nextPass();
    expect(await rows(database)).toEqual([d]);
    await indexer.stop();
  });

  test("rolls back what a rewound chain no longer has", async () => {
    const database = await freshDb();
    const start = (await chain.anvil.publicClient.getBlockNumber()) + 1n;
    const indexer = createIndexer({ sql: database, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger });
    indexer.add(depositsConsumer({ fromBlock: start }));
    const kept = await deposit("7");
    await indexer.syncOnce();
    const snapshot = await chain.anvil.testClient.snapshot();
    const lost = await deposit("8");
    await indexer.syncOnce();
    expect(await rows(database)).toEqual([kept, lost]);

    await chain.anvil.testClient.revert({ id: snapshot });
    const replacement = [await deposit("9"), await deposit("10")];
    await indexer.syncOnce();
    await indexer.syncOnce();
    expect(await rows(database)).toEqual([kept, ...replacement]);
  });
});

test("passes started at once apply each event once", async () => {
  const database = await freshDb();
  const start = (await chain.anvil.publicClient.getBlockNumber()) + 1n;
  const expected = [await deposit("11"), await deposit("12"), await deposit("13")];
  const indexer = createIndexer({ sql: database, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger, batchBlocks: 1 });
  indexer.add(depositsConsumer({ fromBlock: start }));
  await Promise.all([indexer.syncOnce(), indexer.syncOnce(), indexer.syncOnce()]);
  expect(await rows(database)).toEqual(expected);
});

test("two indexers (two gateways, no lease) racing over one database apply each event once", async () => {
  const database = await freshDb();
  const start = (await chain.anvil.publicClient.getBlockNumber()) + 1n;
  const expected = [await deposit("14"), await deposit("15"), await deposit("16")];
  const indexers = [1, 2, 3].map(() => {
    const indexer = createIndexer({ sql: database, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger, batchBlocks: 1 });
    indexer.add(depositsConsumer({ fromBlock: start }));
    return indexer;
  });
  await Promise.all(indexers.flatMap((i) => [i.syncOnce(), i.syncOnce()]));
  expect(await rows(database)).toEqual(expected);
});

describe("under the indexer lease (D16)", () => {
  /** A gateway: its lease runner (on a shared fake clock) and its indexer, fenced by that lease. */
  function gateway(database: Sql, holder: string, now: () => number, fromBlock: bigint) {
    const runs: number[] = [];
    const lease = singleton(
      database,
      "indexer",
      holder,
      async ({ lease, signal }) => {
        runs.push(lease.epoch);
        await aborted(signal);
      },
      { now },
    );
    const indexer = createIndexer({ sql: database, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger, batchBlocks: 1, fence: () => lease.held() });
    indexer.add(depositsConsumer({ fromBlock }));
    return { lease, indexer, runs };
  }

  test("two gateways on one database: only the holder runs and indexes, each event once", async () => {
    const database = await freshDb();
    const start = (await chain.anvil.publicClient.getBlockNumber()) + 1n;
    const expected = [await deposit("17"), await deposit("18")];
    const clock = 1_000_000;
    const [a, b] = [gateway(database, "gw-a", () => clock, start), gateway(database, "gw-b", () => clock, start)] as const;
    await Promise.all([a.lease.tick(), b.lease.tick()]);
    const [holder, other] = a.lease.held() ? [a, b] : [b, a];
    expect(holder.lease.held()?.epoch).toBe(1);
    expect(other.lease.held()).toBeUndefined();
    expect([holder.runs, other.runs]).toEqual([[1], []]);
    // The other gateway's indexer does nothing while it holds no lease.
    await expect(other.indexer.syncOnce()).rejects.toThrow(LeaseLostError);
    expect(await rows(database)).toEqual([]);
    await Promise.all([holder.indexer.syncOnce(), holder.indexer.syncOnce()]);
    expect(await rows(database)).toEqual(expected);
    await Promise.all([a.lease.stop(), b.lease.stop()]);
  });

  test("a holder that stops renewing is replaced within 10 s; its cursor writes are refused from then on", async () => {
    const database = await freshDb();
    const start = (await chain.anvil.publicClient.getBlockNumber()) + 1n;
    let clock = 5_000_000;
    const now = () => clock;
    const a = gateway(database, "gw-a", now, start);
    const b = gateway(database, "gw-b", now, start);
    await a.lease.tick();
    await b.lease.tick();
    const term = a.lease.held();
    expect(term?.epoch).toBe(1);
    // gw-a as a paused or partitioned process sees it: its term never ended.
    const stale = createIndexer({ sql: database, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger, fence: () => term });
    stale.add(depositsConsumer({ fromBlock: start }));
    const first = await deposit("19");
    await stale.syncOnce();
    expect(await rows(database)).toEqual([first]);

    clock += 3_000;
    await a.lease.tick(); // its last renewal; then gw-a dies
    const death = clock;
    for (let i = 0; i < 10 && !b.lease.held(); i++) {
      const wait = await b.lease.tick();
      if (!b.lease.held()) clock += wait;
    }
    expect(b.lease.held()?.epoch).toBe(2);
    expect(clock - death).toBeLessThanOrEqual(10_000);
    expect(b.runs).toEqual([2]);

    // The former holder's range is refused whole: neither its events nor its cursor are written.
    const second = await deposit("20");
    const cursor = await stale.cursor("deposits");
    await expect(stale.syncOnce()).rejects.toThrow(LeaseLostError);
    expect(await rows(database)).toEqual([first]);
    expect(await stale.cursor("deposits")).toBe(cursor);
    // The new holder carries on from the cursor.
    await b.indexer.syncOnce();
    expect(await rows(database)).toEqual([first, second]);
    // gw-a wakes up: its renewal fails and its run is ended.
    await a.lease.tick();
    expect(a.lease.held()).toBeUndefined();
    await Promise.all([a.lease.stop(), b.lease.stop()]);
  });

  test("the fenced cursor write is a compare-and-set on the epoch, even for the same holder name", async () => {
    const database = await freshDb();
    const start = (await chain.anvil.publicClient.getBlockNumber()) + 1n;
    const old = await acquire(database, "indexer", "gw-a", { now: 1 });
    // gw-b took over, then gw-a again: same holder, a later term.
    await acquire(database, "indexer", "gw-b", { now: 20_000 });
    const current = await acquire(database, "indexer", "gw-a", { now: 40_000 });
    expect([old?.epoch, current?.epoch]).toEqual([1, 3]);
    const deposited = await deposit("21");
    const stale = createIndexer({ sql: database, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger, fence: () => old });
    stale.add(depositsConsumer({ fromBlock: start }));
    await expect(stale.syncOnce()).rejects.toThrow(LeaseLostError);
    expect(await rows(database)).toEqual([]);
    const live = createIndexer({ sql: database, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger, fence: () => current });
    live.add(depositsConsumer({ fromBlock: start }));
    await live.syncOnce();
    expect(await rows(database)).toEqual([deposited]);
  });
});
