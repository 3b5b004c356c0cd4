import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { parseEther, type Address } from "viem";
import { proxyAbi } from "../../src/chain/artifacts/index.ts";
import { chainClients } from "../../src/chain/clients.ts";
import { createIndexer, type Consumer, type IndexedEvent } from "../../src/chain/indexer.ts";
import { openDatabase, type OpenDatabase } from "../../src/db/open.ts";
import { silentLogger } from "../../src/log.ts";
import { mined } from "../support/anvil.ts";
import { testChain, type TestChain } from "../support/chain.ts";
import { tempDir } from "../support/tmp.ts";

const chain: TestChain = await testChain();

/** A consumer that records Deposited events in its own table, keyed so a duplicate would fail. */
function depositsConsumer(database: OpenDatabase, overrides: Partial<Consumer> = {}): Consumer {
  database.sqlite.exec("CREATE TABLE IF NOT EXISTS deposits (block INTEGER NOT NULL, log_index INTEGER NOT NULL, tx TEXT NOT NULL, user TEXT NOT NULL, amount TEXT NOT NULL, UNIQUE (tx, log_index))");
  return {
    name: "deposits",
    address: chain.context.contracts.proxy,
    abi: proxyAbi,
    fromBlock: chain.deployBlock,
    apply(_tx, events: IndexedEvent[]) {
      for (const e of events.filter((e) => e.eventName === "Deposited")) {
        database.sqlite.query("INSERT INTO deposits VALUES (?, ?, ?, ?, ?)").run(Number(e.blockNumber), e.logIndex, e.transactionHash, String(e.args.user), String(e.args.amount));
      }
    },
    rollback(_tx, block) {
      database.sqlite.query("DELETE FROM deposits WHERE block > ?").run(Number(block));
    },
    ...overrides,
  };
}

function freshDb() {
  return openDatabase(join(tempDir("idx"), "stowage.db"));
}

const rows = (database: OpenDatabase) => database.sqlite.query<{ user: string; amount: string }, []>("SELECT user, amount FROM deposits ORDER BY block, log_index").all();

async function deposit(eth: string) {
  const user = await chain.anvil.newAccount();
  await mined(chain.anvil.publicClient, chain.anvil.wallet(user).writeContract({ address: chain.context.contracts.proxy, abi: proxyAbi, functionName: "deposit", value: parseEther(eth) }));
  return { user: user.address as Address, amount: String(parseEther(eth)) };
}

describe("event indexer", () => {
  test("applies every event once, in chain order, across several ranges", async () => {
    const database = freshDb();
    const expected = [await deposit("1"), await deposit("2"), await deposit("3")];
    const indexer = createIndexer({ db: database.db, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger, batchBlocks: 1 });
    indexer.add(depositsConsumer(database));
    await indexer.syncOnce();
    expect(rows(database)).toEqual(expected);
    await indexer.syncOnce();
    expect(rows(database)).toEqual(expected);
  });

  test("waits for the confirmation depth", async () => {
    const database = freshDb();
    const indexer = createIndexer({ db: database.db, publicClient: chain.anvil.publicClient, confirmations: 2, log: silentLogger });
    indexer.add(depositsConsumer(database, { fromBlock: (await chain.anvil.publicClient.getBlockNumber()) + 1n }));
    const d = await deposit("1");
    await indexer.syncOnce();
    expect(rows(database)).toEqual([]);
    await chain.anvil.testClient.mine({ blocks: 2 });
    await indexer.syncOnce();
    expect(rows(database)).toEqual([d]);
  });

  test("a crash in the middle of a range applies nothing of it, and a restart applies it once", async () => {
    const database = freshDb();
    const start = (await chain.anvil.publicClient.getBlockNumber()) + 1n;
    const expected = [await deposit("4"), await deposit("5")];
    let calls = 0;
    const crashing = depositsConsumer(database, {
      fromBlock: start,
      apply(tx, events) {
        depositsConsumer(database).apply(tx, events.slice(0, 1));
        if (++calls === 1) throw new Error("power cut");
      },
    });
    const first = createIndexer({ db: database.db, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger });
    first.add(crashing);
    await expect(first.syncOnce()).rejects.toThrow("power cut");
    expect(rows(database)).toEqual([]);

    // A new process: same database, a healthy consumer.
    const second = createIndexer({ db: database.db, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger });
    second.add(depositsConsumer(database, { fromBlock: start }));
    await second.syncOnce();
    await second.syncOnce();
    expect(rows(database)).toEqual(expected);
  });

  test("keeps retrying while the RPC fails, then catches up", async () => {
    const database = freshDb();
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
    const { publicClient } = chainClients(chain.anvil.chainId, `http://127.0.0.1:${flaky.port}`, true);
    const indexer = createIndexer({ db: database.db, publicClient, confirmations: 0, log: silentLogger, pollMs: 20, backoffMs: 10, maxBackoffMs: 50 });
    indexer.add(depositsConsumer(database, { fromBlock: start }));
    indexer.start();
    const d = await deposit("6");
    while (refused < 5) await Bun.sleep(10);
    expect(rows(database)).toEqual([]);
    down = false;
    await indexer.nextPass();
    expect(rows(database)).toEqual([d]);
    await indexer.stop();
  });

  test("rolls back what a rewound chain no longer has", async () => {
    const database = freshDb();
    const start = (await chain.anvil.publicClient.getBlockNumber()) + 1n;
    const indexer = createIndexer({ db: database.db, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger });
    indexer.add(depositsConsumer(database, { fromBlock: start }));
    const kept = await deposit("7");
    await indexer.syncOnce();
    const snapshot = await chain.anvil.testClient.snapshot();
    const lost = await deposit("8");
    await indexer.syncOnce();
    expect(rows(database)).toEqual([kept, lost]);

    await chain.anvil.testClient.revert({ id: snapshot });
    const replacement = [await deposit("9"), await deposit("10")];
    await indexer.syncOnce();
    await indexer.syncOnce();
    expect(rows(database)).toEqual([kept, ...replacement]);
  });
});

test("passes started at once apply each event once", async () => {
  const database = freshDb();
  const start = (await chain.anvil.publicClient.getBlockNumber()) + 1n;
  const expected = [await deposit("11"), await deposit("12"), await deposit("13")];
  const indexer = createIndexer({ db: database.db, publicClient: chain.anvil.publicClient, confirmations: 0, log: silentLogger, batchBlocks: 1 });
  indexer.add(depositsConsumer(database, { fromBlock: start }));
  await Promise.all([indexer.syncOnce(), indexer.syncOnce(), indexer.syncOnce()]);
  expect(rows(database)).toEqual(expected);
});
