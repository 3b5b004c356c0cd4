/**
 * The user commands around the directory and the back-ends, run as a shell runs them but in
 * process, against a whole gateway (anvil, dfs, Helia, the directory's indexer) served over HTTP:
 * `get CID` finding the back-end by itself (and naming both when neither lets the user read),
 * `withdraw`, `unpublish`, `buy-read`, and `put -` / `put DIR`. The indexer polls only when told
 * (`sync`), so "not yet" and "now" are real.
 */
import { expect, test } from "bun:test";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { formatEther, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { userCommands } from "../../src/cli/user/index.ts";
import type { Io } from "../../src/cli/user/common.ts";
import { serveOverHttp } from "../support/serve.ts";
import { tempDir } from "../support/tmp.ts";
import { directoryGateway } from "./support.ts";

// Served by the server's own listener; the app is built once its URL is known.
const server = await serveOverHttp();
const gateway = server.url;
const dg = await directoryGateway({ env: { STOWAGE_PUBLIC_URL: gateway } });
server.handle = (r) => dg.app.handle(r);
const dir = tempDir("directory-cli");

async function newUser() {
  const key = generatePrivateKey();
  await dg.gw.chain.anvil.fund(privateKeyToAccount(key).address, 10n ** 20n);
  return { key, ...(await dg.user(privateKeyToAccount(key))) };
}

async function stowage(key: string, args: string[], stdin?: Uint8Array) {
  const out: string[] = [];
  const log: string[] = [];
  const io: Io = { out: (l) => out.push(l), log: (l) => log.push(l), stderrTty: false, ...(stdin ? { stdin: () => new Blob([stdin as Uint8Array<ArrayBuffer>]).stream() } : {}) };
  const [name, ...rest] = args as [string, ...string[]];
  const command = userCommands({ STOWAGE_USER_KEY: key, STOWAGE_GATEWAY: gateway }, io)[name];
  if (!command) throw new Error(`no command ${name}`);
  try {
    return { code: await command.run(rest), out, log, error: "" };
  } catch (err) {
    return { code: 1, out, log, error: (err as Error).message };
  }
}

test("get without --from reads where the file is; buy-read, unpublish; a refusal names both back-ends", async () => {
  const [a, b] = await Promise.all([newUser(), newUser()]);
  const content = new TextEncoder().encode("charts of the outer banks\n");
  // On ipfs only: a get that assumed dfs would be refused.
  const file = await a.store.upload("ipfs", content, { name: "charts.txt" });
  const mine = await stowage(a.key, ["get", file.Cid, "--out", join(dir, "a.txt")]);
  expect(mine.error).toBe("");
  expect(readFileSync(join(dir, "a.txt"))).toEqual(Buffer.from(content));

  // b stores no copy and has no read: both back-ends tried, both named, the server's own words.
  const refused = await stowage(b.key, ["get", file.Cid, "--out", join(dir, "b.txt")]);
  expect(refused.code).toBe(1);
  expect(refused.error).toMatch(new RegExp(`^cannot read ${file.Cid}: you store no file with this Cid, and neither dfs nor ipfs lets you read it \\(tried both: the gateway answered 403 AccessDenied: Permission denied\\b`));

  // Published at a price; b buys it (refusing a price above --max-price), then reads it from ipfs.
  const pub = await stowage(a.key, ["publish", file.Cid, "--price", "1000", "--json"]);
  expect(pub.error).toBe("");
  expect(JSON.parse(pub.out.join("\n"))).toMatchObject({ mid: file.Cid, name: "charts.txt", priceGwei: "1000", public: false, tx: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
  const tooDear = await stowage(b.key, ["buy-read", a.address, file.Cid, "--max-price", "999"]);
  expect(tooDear.error).toBe("the price is 1000 gwei, above --max-price 999: nothing bought");
  const before = await dg.gw.chain.anvil.publicClient.getBalance({ address: a.address });
  const bought = await stowage(b.key, ["buy-read", a.address.toLowerCase(), file.Cid, "--max-price", "1000", "--json"]);
  expect(bought.error).toBe("");
  expect(JSON.parse(bought.out.join("\n"))).toMatchObject({ owner: a.address, mid: file.Cid, priceGwei: "1000" });
  expect(await dg.gw.chain.anvil.publicClient.getBalance({ address: a.address })).toBe(before + 1000n * 10n ** 9n);
  await dg.sync();
  const read = await stowage(b.key, ["get", file.Cid, "--out", join(dir, "b.txt")]);
  expect(read.error).toBe("");
  expect(readFileSync(join(dir, "b.txt"))).toEqual(Buffer.from(content));

  // Unpublished, the purchase goes with the entry: b is refused again; a twice is told plainly.
  expect((await stowage(b.key, ["unpublish", file.Cid])).error).toBe(`you have published nothing under ${file.Cid} (see \`stowage search\`)`);
  const gone = await stowage(a.key, ["unpublish", file.Cid, "--json"]);
  expect(gone.error).toBe("");
  expect(JSON.parse(gone.out.join("\n"))).toMatchObject({ mid: file.Cid, tx: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
  await dg.sync();
  expect(await a.dir.entry(a.address, file.Cid)).toBeUndefined();
  expect((await stowage(b.key, ["get", file.Cid, "--out", join(dir, "c.txt")])).error).toMatch(/neither dfs nor ipfs lets you read it/);
  expect((await stowage(b.key, ["buy-read", a.address, file.Cid])).error).toBe(`${a.address} has published nothing under ${file.Cid} (see \`stowage search\`)`);
  expect((await stowage(b.key, ["buy-read", "0x12", file.Cid])).error).toBe('OWNER must be a 0x address (got "0x12")');
}, 90_000);

test("withdraw takes currency out of the deposit; more than it holds is refused and nothing moves", async () => {
  const a = await newUser();
  await a.dir.gateway.deposit(parseEther("0.01"));
  const w = await stowage(a.key, ["withdraw", "0.004", "--json"]);
  expect(w.error).toBe("");
  expect(JSON.parse(w.out.join("\n"))).toMatchObject({ withdrawnWei: parseEther("0.004").toString(), depositWei: parseEther("0.006").toString() });
  expect((await a.dir.gateway.records()).space.deposit).toBe(parseEther("0.006"));
  const tooMuch = await stowage(a.key, ["withdraw", "0.007"]);
  expect(tooMuch.error).toBe(`your deposit is ${formatEther(parseEther("0.006"))} ETH, less than 0.007: nothing withdrawn (see \`stowage quota\`)`);
  expect((await a.dir.gateway.records()).space.deposit).toBe(parseEther("0.006"));
  expect((await stowage(a.key, ["withdraw", "0"])).error).toContain("AMOUNT_ETH must be a positive number of ETH");
}, 60_000);

test("put - reads stdin under --name; put DIR uploads the tree under relative names and stops at the first failure", async () => {
  const a = await newUser();
  const piped = new TextEncoder().encode("from a pipe\n");
  expect((await stowage(a.key, ["put", "-"], piped)).error).toBe("put - reads stdin, which has no name: add --name NAME");
  const fromStdin = await stowage(a.key, ["put", "-", "--name", "piped.txt", "--json"], piped);
  expect(fromStdin.error).toBe("");
  const entry = JSON.parse(fromStdin.out.join("\n")) as { Name: string; Size: number; Cid: string };
  expect(entry).toMatchObject({ Name: "piped.txt", Size: piped.byteLength });
  expect(new Uint8Array(await (await a.store.download("dfs", entry.Cid)).arrayBuffer())).toEqual(piped);

  const tree = join(dir, "logbook");
  mkdirSync(join(tree, "2024", "june"), { recursive: true });
  writeFileSync(join(tree, "index.txt"), "index\n");
  writeFileSync(join(tree, "2024", "june", "day1.txt"), "calm\n");
  writeFileSync(join(tree, "2024", "may.txt"), "squalls\n");
  const put = await stowage(a.key, ["put", tree, "--to", "ipfs"]);
  expect(put.error).toBe("");
  // The gateway's upload route keeps a name's last part (its S3 API keeps whole keys).
  expect(put.out.map((l) => l.split("  ").pop())).toEqual(["day1.txt", "may.txt", "index.txt"]);
  expect(put.log).toContain("put 3 files, 19 B, to ipfs");
  expect((await a.store.list("ipfs")).Object.map((e) => e.Name).sort()).toEqual(["day1.txt", "index.txt", "may.txt"]);
  const quiet = await stowage(a.key, ["put", tree, "--quiet"]);
  expect(quiet.out).toHaveLength(3);
  for (const cid of quiet.out) expect(cid).toMatch(/^baf/);

  // Two files that would be stored under one name are refused before anything is sent.
  writeFileSync(join(tree, "2024", "index.txt"), "again\n");
  const clash = await stowage(a.key, ["put", tree, "--to", "dfs"]);
  expect(clash.error).toBe("logbook/2024/index.txt and logbook/index.txt would both be stored as index.txt (the gateway's upload keeps a name's last part, so one would replace the other): put them separately with --name");
  expect((await a.store.list("dfs")).Object.map((e) => e.Name).sort()).toEqual(["day1.txt", "index.txt", "may.txt", "piped.txt"]);

  // The first failure ends the run with the file it stopped at; those before it stay, none after.
  const b = await newUser();
  const failing = join(dir, "failing");
  mkdirSync(join(failing, "c"), { recursive: true });
  writeFileSync(join(failing, "a.txt"), "a\n");
  writeFileSync(join(failing, "b.txt"), "b\n");
  writeFileSync(join(failing, "c", "\u0001"), "no name left once control characters go\n");
  writeFileSync(join(failing, "d.txt"), "d\n");
  const bad = await stowage(b.key, ["put", failing, "--json"]);
  expect(bad.code).toBe(1);
  expect(bad.error).toMatch(/^put stopped at .*failing\/c\/\u0001 \(file 3 of 4\); the 2 put before it stay stored: the gateway answered 400 /);
  expect((await b.store.list("dfs")).Object.map((e) => e.Name).sort()).toEqual(["a.txt", "b.txt"]);
  expect((await stowage(b.key, ["put", join(dir, "nothing-here")])).error).toBe(`cannot read ${join(dir, "nothing-here")}: no such file`);
}, 90_000);
