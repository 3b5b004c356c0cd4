/**
 * `waitUntilSearchable`: a search right after `publish` misses the entry until the gateway's
 * indexer has read the event, so the SDK (and `stowage publish --wait`, the README's example) waits
 * for the search to show it. The indexer here polls only when told (`sync`), so "not yet" is real.
 * The gateway is served over HTTP too, for the command, which uses the global fetch as in a shell.
 */
import { afterAll, expect, test } from "bun:test";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { userCommands } from "../../src/cli/user/index.ts";
import type { Io } from "../../src/cli/user/common.ts";
import { until } from "../support/until.ts";
import { directoryGateway } from "./support.ts";

let searches = 0;
let handle: (r: Request) => Promise<Response> = async () => new Response("starting", { status: 503 });
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: (r) => {
    if (new URL(r.url).pathname === "/challenge") searches++;
    return handle(r);
  },
});
afterAll(() => server.stop(true));
const gateway = `http://127.0.0.1:${server.port}`;
const dg = await directoryGateway({ env: { STOWAGE_PUBLIC_URL: gateway } });
handle = (r) => dg.app.handle(r);

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

test("stowage publish --wait returns once the gateway's search shows the entry, not when the transaction is mined", async () => {
  const key = generatePrivateKey();
  await dg.gw.chain.anvil.fund(privateKeyToAccount(key).address, 10n ** 21n);
  const a = await dg.user(privateKeyToAccount(key));
  const file = await a.store.upload("dfs", new TextEncoder().encode("an almanac of the tides\n"), { name: "almanac.txt" });
  const out: string[] = [];
  const log: string[] = [];
  const io: Io = { out: (l) => out.push(l), log: (l) => log.push(l), stderrTty: false };
  const publish = userCommands({ STOWAGE_USER_KEY: key, STOWAGE_GATEWAY: gateway }, io).publish;
  if (!publish) throw new Error("no publish command");

  let settled = false;
  const run = publish.run([file.Cid, "--keyword", "almanac", "--wait"]).finally(() => (settled = true));
  // Mined (its hash printed), and the command has searched twice since without finding it: it waits.
  await until("the transaction hash", () => out.length, (n) => n === 1, 30_000);
  const after = searches;
  await until("two searches", () => searches, (n) => n >= after + 2, 30_000);
  expect(settled).toBe(false);
  expect(out[0]).toMatch(/^0x[0-9a-f]{64}$/);

  await dg.sync();
  expect(await run).toBe(0);
  expect(log.at(-1)).toBe("the gateway's search shows it now");
  expect((await a.dir.search("almanac")).map((h) => h.Mid)).toEqual([file.Cid]);
}, 60_000);
