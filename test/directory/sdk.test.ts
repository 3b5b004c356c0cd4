/**
 * The directory SDK against a real chain and a whole gateway: every operation is a contract call
 * through the gateway's public RPC, and each one's effect shows in GET /challenge and in who may
 * download (vouchers through the storage routes) once the indexer has passed.
 */
import { describe, expect, test } from "bun:test";
import { parseGwei } from "viem";
import { createIndexer } from "../../src/chain/indexer.ts";
import { silentLogger } from "../../src/log.ts";
import { directoryGateway } from "./support.ts";

const dg = await directoryGateway();
const balance = (address: `0x${string}`) => dg.gw.chain.anvil.publicClient.getBalance({ address });
const bytes = (text: string) => new TextEncoder().encode(text);
const publicFlag = async (u: Awaited<ReturnType<typeof dg.user>>, cid: string) => (await u.store.list("dfs")).Object.find((f) => f.Cid === cid)?.Public;

describe("directory SDK", () => {
  test("publish, grant, revoke, buy, update, unpublish: each shows in search and in download permission", async () => {
    const [a, b, c] = await Promise.all([dg.user(), dg.user(), dg.user()]);
    const content = bytes("the atlas of unknown places\n".repeat(200));
    const file = await a.store.upload("dfs", content, { name: "atlas.pdf" });
    const read = (u: typeof a) => dg.downloadStatus(u, "dfs", file.Cid, file.Size);

    await dg.sync();
    expect(await b.dir.search("atlas")).toEqual([]);
    expect(await read(b)).toBe(403);

    // publish: priced, private
    await a.dir.publish({ cid: file.Cid, name: "Atlas of unknown places", size: file.Size, price: 1500n, keywords: ["maps", "geography"] });
    await dg.sync();
    const entry = { Mid: file.Cid, Name: "Atlas of unknown places", Size: file.Size, Public: false, Price: 1500, keywords: ["maps", "geography"], Owner: a.address };
    expect(await b.dir.search("maps")).toEqual([entry]);
    expect(await b.dir.search("atlas unknown")).toEqual([entry]);
    expect(await read(b)).toBe(403);
    expect(await read(c)).toBe(403);
    expect(await read(a)).toBe(200);
    expect(await publicFlag(a, file.Cid)).toBe(false);

    // grantRead: C may read, B still may not; the gateway follows its index, not the chain
    await a.dir.grantRead(file.Cid, c.address);
    expect(await c.dir.canRead(a.address, file.Cid)).toBe(true);
    expect(await read(c)).toBe(403);
    await dg.sync();
    const res = await c.store.download("dfs", file.Cid, { size: file.Size });
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(content);
    expect(await read(b)).toBe(403);

    // revokeRead takes it away
    await a.dir.revokeRead(file.Cid, c.address);
    await dg.sync();
    expect(await read(c)).toBe(403);

    // buyRead pays the owner exactly the price and opens reads for the buyer only
    const before = await balance(a.address);
    await b.dir.buyRead(a.address, file.Cid);
    expect((await balance(a.address)) - before).toBe(parseGwei("1500"));
    await dg.sync();
    expect(await read(b)).toBe(200);
    expect(await read(c)).toBe(403);
    await expect(b.dir.buyRead(a.address, file.Cid)).rejects.toThrow("AlreadyReadable");

    // update: any field; the old words no longer find it, the new ones do; public opens it to all
    await a.dir.update(file.Cid, { name: "World atlas", isPublic: true, keywords: ["cartography"] });
    await dg.sync();
    expect(await c.dir.search("maps")).toEqual([]);
    expect(await c.dir.search("cartography")).toEqual([{ ...entry, Name: "World atlas", Public: true, keywords: ["cartography"] }]);
    expect(await read(c)).toBe(200);
    expect(await publicFlag(a, file.Cid)).toBe(true);
    await a.dir.update(file.Cid, { price: 7 });
    await dg.sync();
    expect((await c.dir.search("world"))[0]).toMatchObject({ Name: "World atlas", Price: 7, Public: true });

    // unpublish: gone from search, and every grant and purchase with it; the owner still reads
    await a.dir.unpublish(file.Cid);
    await dg.sync();
    expect(await c.dir.search("world")).toEqual([]);
    expect(await read(b)).toBe(403);
    expect(await read(c)).toBe(403);
    expect(await read(a)).toBe(200);
    expect(await publicFlag(a, file.Cid)).toBe(false);

    // a re-publish starts clean: the old purchase does not come back
    await a.dir.publish({ cid: file.Cid, name: "Atlas, second edition", size: file.Size, price: 1 });
    await dg.sync();
    expect((await b.dir.search("edition")).map((r) => r.Name)).toEqual(["Atlas, second edition"]);
    expect(await read(b)).toBe(403);
  });

  test("publishing someone else's Cid as public opens nothing: the entry's owner must store it", async () => {
    const [owner, mallory, stranger] = await Promise.all([dg.user(), dg.user(), dg.user()]);
    const diary = bytes(`private diary ${crypto.randomUUID()}\n`);
    const file = await owner.store.upload("dfs", diary, { name: "diary.txt" });
    await mallory.dir.publish({ cid: file.Cid, name: "Free diary", size: file.Size, isPublic: true, keywords: ["diary"] });
    await dg.sync();
    expect(await dg.downloadStatus(mallory, "dfs", file.Cid, file.Size)).toBe(403);
    expect(await dg.downloadStatus(stranger, "dfs", file.Cid, file.Size)).toBe(403);
    expect(await stranger.dir.search("diary")).toEqual([]);
    expect(await publicFlag(owner, file.Cid)).toBe(false);
    // Only once Mallory stores the very bytes herself does her entry stand for anything.
    await mallory.store.upload("dfs", diary, { name: "mine.txt" });
    expect((await stranger.dir.search("diary")).map((r) => r.Owner)).toEqual([mallory.address]);
    expect(await dg.downloadStatus(stranger, "dfs", file.Cid, file.Size)).toBe(200);
  });

  test("an entry opens only the back-end on which its owner stores the Cid", async () => {
    const [owner, reader] = await Promise.all([dg.user(), dg.user()]);
    const content = bytes(`only on dfs ${crypto.randomUUID()}\n`);
    const file = await owner.store.upload("dfs", content, { name: "dfs-only.txt" });
    const copy = await reader.store.upload("ipfs", bytes("something else"), { name: "other.txt" });
    expect(copy.Cid).not.toBe(file.Cid);
    await owner.dir.publish({ cid: file.Cid, name: "dfs only", size: file.Size, isPublic: true });
    await dg.sync();
    expect(await dg.downloadStatus(reader, "dfs", file.Cid, file.Size)).toBe(200);
    expect(await dg.downloadStatus(reader, "ipfs", file.Cid, file.Size)).toBe(403);
  });

  test("SDK checks: size and price bounds, maxPrice, updates of a missing entry", async () => {
    const [a, b] = await Promise.all([dg.user(), dg.user()]);
    const file = await a.store.upload("dfs", bytes(`bounds ${crypto.randomUUID()}`), { name: "b.txt" });
    expect(() => a.dir.publish({ cid: file.Cid, name: "x", size: -1 })).toThrow(RangeError);
    expect(() => a.dir.publish({ cid: file.Cid, name: "x", size: 1, price: 2n ** 64n })).toThrow(RangeError);
    await expect(a.dir.update(file.Cid, { name: "y" })).rejects.toThrow("nothing published");
    await a.dir.publish({ cid: file.Cid, name: "priced", size: file.Size, price: 10 });
    await expect(b.dir.buyRead(a.address, file.Cid, { maxPrice: 9 })).rejects.toThrow("above maxPrice");
    await expect(a.dir.publish({ cid: file.Cid, name: "again", size: 1 })).rejects.toThrow("EntryExists");
    expect(await b.dir.entry(a.address, file.Cid)).toEqual({ name: "priced", size: BigInt(file.Size), price: 10n, isPublic: false, keywords: [] });
  });

  test("a running indexer makes a published file searchable by itself, with no pass asked for", async () => {
    const pollMs = 200;
    // Stands in for the server's indexer (same database, same consumer); the other tests sync by hand.
    const live = createIndexer({ sql: dg.sql, publicClient: dg.gw.chain.anvil.publicClient, confirmations: 0, log: silentLogger, pollMs });
    live.add(dg.directory.consumer);
    live.start();
    try {
      const a = await dg.user();
      const file = await a.store.upload("dfs", bytes(`fresh ${crypto.randomUUID()}`), { name: "fresh.txt" });
      await a.dir.publish({ cid: file.Cid, name: "Freshly published", size: file.Size, isPublic: true });
      const published = await dg.gw.chain.anvil.publicClient.getBlockNumber({ cacheTime: 0 });
      // Only the loop's own polls move the cursor here (nothing pokes it or syncs by hand); a loop
      // that stopped polling leaves it behind until the test's timeout fails the test.
      while (((await live.cursor(dg.directory.consumer.name)) ?? -1) < published) await Bun.sleep(pollMs / 4);
      expect((await a.dir.search("freshly")).map((r) => r.Mid)).toEqual([file.Cid]);
    } finally {
      await live.stop();
    }
  });
});

test("a reader through someone's entry gets that owner's file name, never another owner's private one", async () => {
  const [alice, bob, carol] = await Promise.all([dg.user(), dg.user(), dg.user()]);
  const content = bytes(`the same bytes ${Math.random()}\n`.repeat(100));
  await alice.store.upload("dfs", content, { name: "salary-2025.xlsx" }); // private, first
  const shared = await bob.store.upload("dfs", content, { name: "public-notes.txt" });
  await bob.dir.publish({ cid: shared.Cid, name: "Notes", size: shared.Size, price: 0n, isPublic: true, keywords: [] });
  await dg.sync();
  const res = await carol.store.download("dfs", shared.Cid, { size: shared.Size });
  const disposition = res.headers.get("content-disposition") ?? "";
  expect(disposition).toContain("public-notes.txt");
  expect(disposition).not.toContain("salary");
  expect(new Uint8Array(await res.arrayBuffer())).toEqual(content);
});
