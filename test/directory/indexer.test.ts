/**
 * The directory consumer under the chain indexer, on a real anvil and the database of this pass
 * (SQLite or PostgreSQL): whatever happens while
 * indexing (a crash and restart mid-stream, an RPC outage, a chain rewind), the index ends up
 * exactly as a fresh index of the same chain, and no event is applied twice.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { decodeEventLog, getContract, parseGwei, type Address } from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import { CID } from "multiformats/cid";
import { sha256 } from "multiformats/hashes/sha2";
import * as raw from "multiformats/codecs/raw";
import { directoryAbi } from "../../src/chain/artifacts/index.ts";
import { chainClients } from "../../src/chain/clients.ts";
import { createIndexer, type Consumer } from "../../src/chain/indexer.ts";
import type { Queryable } from "../../src/db/sql.ts";
import { directoryConsumer } from "../../src/directory/indexer.ts";
import { silentLogger } from "../../src/log.ts";
import { mined } from "../support/anvil.ts";
import { testChain } from "../support/chain.ts";
import { tempDir } from "../support/tmp.ts";
import { TEST_DB, testDatabase } from "../support/db.ts";
import { postgres } from "../support/postgres.ts";
import { indexState, textMatches } from "./support.ts";

const chain = await testChain();
// PostgreSQL's start (initdb included) takes seconds: before the tests, not inside the first one's timeout.
if (TEST_DB === "postgres") await postgres();
/** Each test mines a dozen transactions and indexes them twice (its index and a reference, each a
 * new database): seconds on PostgreSQL, more when the machine is busy. */
const SLOW = 30_000;
const { anvil } = chain;
const address = chain.context.contracts.directory;

const as = (account: PrivateKeyAccount) => getContract({ address, abi: directoryAbi, client: { public: anvil.publicClient, wallet: anvil.wallet(account) } });
const send = (hash: Promise<`0x${string}`>) => mined(anvil.publicClient, hash);
const cidOf = async (text: string) => CID.create(1, raw.code, await sha256.digest(new TextEncoder().encode(text))).toString();

/** A fresh database and a consumer over it, as a server process would have. */
function indexDb(name = "directory") {
  const database = testDatabase(tempDir("dir-idx"));
  afterAll(() => database.close());
  const consumer = () => directoryConsumer({ chainId: anvil.chainId, address, fromBlock: chain.deployBlock, name });
  return { database, consumer };
}

/** A fresh index of the whole chain as it is now: what any other index must equal. */
async function reference() {
  const { database, consumer } = indexDb();
  const indexer = createIndexer({ sql: database.sql, publicClient: anvil.publicClient, confirmations: 0, log: silentLogger });
  indexer.add(consumer());
  await indexer.syncOnce();
  return indexState(database.sql);
}

/** Directory traffic in two acts, one transaction (and block) per step. */
async function story() {
  const [a, b, r1, r2, r3] = await Promise.all([anvil.newAccount(), anvil.newAccount(), anvil.newAccount(), anvil.newAccount(), anvil.newAccount()]);
  const m1 = await cidOf(`ledger ${crypto.randomUUID()}`);
  const m2 = `not-a-cid-${crypto.randomUUID()}`;
  const act1 = async () => {
    await send(as(a).write.publish([m1, "Ledger", 100n, 5n, false, ["finance", "books"]]));
    await send(as(a).write.publish([m2, "Gallery", 200n, 0n, true, ["art"]]));
    await send(as(a).write.grantRead([m1, r1.address]));
    await send(as(a).write.grantRead([m1, r2.address]));
    await send(as(r3).write.buyRead([a.address, m1], { value: parseGwei("5") }));
  };
  const act2 = async () => {
    await send(as(a).write.update([m1, "Ledger renamed", 100n, 9n, false, ["finance"]]));
    await send(as(a).write.revokeRead([m1, r1.address]));
    await send(as(a).write.unpublish([m2]));
    await send(as(a).write.publish([m2, "Gallery reopened", 200n, 0n, true, ["art", "reopened"]]));
    await send(as(b).write.publish([m1, "Ledger copy", 100n, 0n, false, []]));
    await send(as(r1).write.buyRead([b.address, m1]));
  };
  return { a, b, r1, r2, r3, m1, m2, act1, act2, events: 11 };
}

const eventCount = async (sql: Queryable) => (await sql.get<{ n: number }>("SELECT count(*) AS n FROM directory_events"))?.n;

describe("directory indexing", () => {
  test("a crash mid-stream and a restart apply every event exactly once", async () => {
    const s = await story();
    const { database, consumer } = indexDb();
    const before = (await eventCount(database.sql)) ?? 0;

    // Process 1 indexes the first act, then goes away.
    await s.act1();
    const first = createIndexer({ sql: database.sql, publicClient: anvil.publicClient, confirmations: 0, log: silentLogger, batchBlocks: 1 });
    first.add(consumer());
    await first.syncOnce();

    // Process 2 dies in the middle of the second act: its third range fails after applying part.
    await s.act2();
    let ranges = 0;
    const healthy = consumer();
    const crashing: Consumer = {
      ...healthy,
      async apply(tx, events) {
        await healthy.apply(tx, events);
        if (events.length > 0 && ++ranges === 3) throw new Error("power cut");
      },
    };
    const second = createIndexer({ sql: database.sql, publicClient: anvil.publicClient, confirmations: 0, log: silentLogger, batchBlocks: 1 });
    second.add(crashing);
    await expect(second.syncOnce()).rejects.toThrow("power cut");

    // Process 3 picks up from the cursor.
    const third = createIndexer({ sql: database.sql, publicClient: anvil.publicClient, confirmations: 0, log: silentLogger, batchBlocks: 1 });
    third.add(consumer());
    await third.syncOnce();
    await third.syncOnce();

    const state = await indexState(database.sql);
    expect(state).toEqual(await reference());
    expect(state.ftsInStep).not.toBe(false);
    expect(await eventCount(database.sql)).toBe(before + s.events);
    expect(await database.sql.all("SELECT reader FROM directory_grants WHERE owner = $1 AND mid = $2", [s.a.address, s.m1])).toEqual([{ reader: s.r2.address }]);
    expect(await database.sql.all("SELECT owner, reader FROM directory_purchases WHERE mid = $1 ORDER BY reader", [s.m1])).toHaveLength(2);

    // A range delivered once more (say, by a buggy caller) changes nothing: positions are logged.
    const logs = await anvil.publicClient.getLogs({ address, fromBlock: chain.deployBlock });
    const again = consumer();
    const events = logs.map((l) => {
      const d = decodeEventLog({ abi: directoryAbi, data: l.data, topics: l.topics });
      return { eventName: d.eventName, args: d.args as Record<string, unknown>, blockNumber: l.blockNumber, logIndex: l.logIndex, transactionHash: l.transactionHash, address: l.address };
    });
    await database.sql.tx((tx) => again.apply(tx, events));
    expect(await indexState(database.sql)).toEqual(state);
  }, SLOW);

  test("an RPC outage during indexing is waited out, and nothing is lost or doubled", async () => {
    const { database, consumer } = indexDb();
    let mode: "down" | "flaky" | "up" = "down";
    let requests = 0;
    let refused = 0;
    const proxy = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      async fetch(req) {
        requests++;
        if (mode === "down" || (mode === "flaky" && requests % 3 === 0)) {
          refused++;
          return new Response("unavailable", { status: 503 });
        }
        return fetch(anvil.url, { method: "POST", headers: { "content-type": "application/json" }, body: await req.text() });
      },
    });
    afterAll(() => proxy.stop(true));
    const { publicClient } = chainClients(anvil.chainId, `http://127.0.0.1:${proxy.port}`, 25);
    const indexer = createIndexer({ sql: database.sql, publicClient, confirmations: 0, log: silentLogger, pollMs: 20, backoffMs: 5, maxBackoffMs: 40, batchBlocks: 2 });
    indexer.add(consumer());
    indexer.start();
    try {
      const s = await story();
      await s.act1();
      while (refused < 5) await Bun.sleep(5);
      expect(await eventCount(database.sql)).toBe(0);
      mode = "flaky";
      await s.act2();
      const refusedBefore = refused;
      while (refused < refusedBefore + 5) await Bun.sleep(5);
      mode = "up";
      await indexer.nextPass();
      await indexer.nextPass();
      const state = await indexState(database.sql);
      expect(state).toEqual(await reference());
      expect(state.entries.some((e) => (e as { name: string }).name === "Gallery reopened")).toBe(true);
    } finally {
      await indexer.stop();
    }
  }, SLOW);

  test("a chain rewind rolls entries, grants and purchases back to what the new chain says", async () => {
    const s = await story();
    await s.act1();
    const { database, consumer } = indexDb();
    const indexer = createIndexer({ sql: database.sql, publicClient: anvil.publicClient, confirmations: 0, log: silentLogger });
    indexer.add(consumer());
    await indexer.syncOnce();
    const row = async (owner: Address, mid: string) => {
      const r = await database.sql.get<{ name: string; price: string; public: number | boolean }>("SELECT name, price, public FROM directory_entries WHERE owner = $1 AND mid = $2", [owner, mid]);
      return r && { ...r, public: Boolean(r.public) };
    };
    const beforeFork = await indexState(database.sql);

    const snapshot = await anvil.testClient.snapshot();
    await s.act2(); // update, revoke, unpublish + re-publish, another owner, a purchase: all to be lost
    const lost = await cidOf(`lost ${crypto.randomUUID()}`);
    await send(as(s.a).write.publish([lost, "Vanishing entry", 1n, 0n, true, ["vanish"]]));
    await indexer.syncOnce();
    expect(await row(s.a.address, s.m1)).toEqual({ name: "Ledger renamed", price: "9", public: false });
    expect(await row(s.a.address, lost)).toBeDefined();

    await anvil.testClient.revert({ id: snapshot });
    // The new chain goes another way: same block numbers, other blocks.
    const kept = await cidOf(`kept ${crypto.randomUUID()}`);
    await send(as(s.b).write.publish([kept, "Other history", 1n, 0n, true, ["other"]]));
    await send(as(s.a).write.grantRead([s.m1, s.r3.address]));
    await indexer.syncOnce(); // notices the rewind and rolls back
    await indexer.syncOnce(); // indexes the new chain

    const state = await indexState(database.sql);
    expect(state).toEqual(await reference());
    expect(state.ftsInStep).not.toBe(false);
    expect(await row(s.a.address, s.m1)).toEqual({ name: "Ledger", price: "5", public: false });
    expect(await row(s.a.address, lost)).toBeUndefined();
    expect(await row(s.b.address, s.m1)).toBeUndefined();
    expect(await row(s.a.address, s.m2)).toEqual({ name: "Gallery", price: "0", public: true });
    // Sorted here: PostgreSQL's linguistic collation orders mixed-case addresses otherwise than bytes.
    const readers = await database.sql.all<{ reader: string }>("SELECT reader FROM directory_grants WHERE owner = $1 AND mid = $2", [s.a.address, s.m1]);
    expect(readers.map((r) => r.reader).sort()).toEqual([s.r1.address, s.r2.address, s.r3.address].sort());
    expect(state.purchases).toEqual(beforeFork.purchases);
    // The search index followed: the lost names are gone, the old ones are back.
    const mids = (word: string) => textMatches(database.sql, word);
    expect(await mids("vanish")).toEqual([]);
    expect(await mids("renamed")).not.toContain(s.m1);
    expect(await mids("books")).toContain(s.m1);
    expect(await mids("reopened")).not.toContain(s.m2);
  }, SLOW);
});
