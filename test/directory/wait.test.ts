/**
 * `waitUntilSearchable`: a search right after `publish` misses the entry until the gateway's
 * indexer has read the event, so the SDK (and `stowage publish --wait`, the README's example) waits
 * for the search to show it. The indexer here polls only when told (`sync`), so "not yet" is real.
 */
import { expect, test } from "bun:test";
import { directoryGateway } from "./support.ts";

const dg = await directoryGateway();

test("waits until the gateway's search shows the new entry, and gives up with a clear error when it never does", async () => {
  const [a, b] = await Promise.all([dg.user(), dg.user()]);
  const file = await a.store.upload("dfs", new TextEncoder().encode("tide tables of the north sea\n"), { name: "tides.txt" });
  await a.dir.publish({ cid: file.Cid, name: "Tide tables", size: file.Size, price: 700n, keywords: ["tides"] });

  // Not indexed yet: the search does not show it, and a short wait says so.
  expect(await a.dir.search("tides")).toEqual([]);
  await expect(a.dir.waitUntilSearchable(file.Cid, { timeoutMs: 300, intervalMs: 50 })).rejects.toThrow(/is not in .*'s search after 300 ms: is its chain indexer running\?/);

  // The indexer's next pass, while a wait is under way: the wait ends with the hit.
  const waiting = a.dir.waitUntilSearchable(file.Cid, { intervalMs: 20 });
  await dg.sync();
  const hit = await waiting;
  expect(hit).toEqual({ Mid: file.Cid, Name: "Tide tables", Size: file.Size, Public: false, Price: 700, keywords: ["tides"], Owner: a.address });
  expect(await a.dir.search("tides")).toEqual([hit]);

  // Another account waits for a's entry by naming its owner (and may search by a query); its own
  // entry under that Cid does not exist, so a wait for it times out.
  expect(await b.dir.waitUntilSearchable(file.Cid, { owner: a.address, query: "tide" })).toEqual(hit);
  await expect(b.dir.waitUntilSearchable(file.Cid, { timeoutMs: 100, intervalMs: 20 })).rejects.toThrow("is not in");
}, 60_000);
