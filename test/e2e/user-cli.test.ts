/**
 * The user commands of the compiled binary, as someone with a key and a shell lives them: a
 * server on an empty data dir, currency and free quota from the operator's `stowage admin`, then
 * login, put (dfs and ipfs), ls, get (whole to a file, ranges to stdout), quota, deposit, buy and
 * rm, each a separate run of `dist/stowage` with the key in its environment; and the failures a
 * user meets: no key, a key file others can read, an unknown Cid or ID, too little deposit, no
 * gateway, bad usage.
 */
import { afterAll, expect, test } from "bun:test";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { BINARY, requireBinary, runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";

const dir = tempDir("e2e-user-cli");
const dataDir = join(dir, "data");
let server: RunningBinary | undefined;
afterAll(async () => {
  await server?.stop();
});

const MiB = 2 ** 20;

/** Like runBinary, but stdout as bytes (a download to stdout is binary). */
async function runBytes(args: string[], env: Record<string, string>) {
  await requireBinary();
  const proc = Bun.spawn([BINARY, ...args], { env: { HOME: "/tmp", ...env }, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).arrayBuffer(), new Response(proc.stderr).text(), proc.exited]);
  return { stdout: new Uint8Array(stdout), stderr, code };
}

test("login, put, ls, get, quota, deposit, buy, rm from a shell, and the errors a user meets", async () => {
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir]);
  const gateway = server.url;
  const admin = async (...args: string[]) => {
    const r = await runBinary(["admin", ...args, "--data-dir", dataDir]);
    expect(r.code, `stowage admin ${args.join(" ")}: ${r.stderr}`).toBe(0);
  };
  const key = generatePrivateKey();
  const account = privateKeyToAccount(key);
  const did = `did:ethr:0x3d9:${account.address}`;
  await admin("fund", account.address, "1");
  await admin("grant", "--did", did, "--space", "16MiB");
  await admin("grant", "--did", did, "--traffic", "32MiB");

  // Each command below is one process and one DID login: the gateway's default login limits
  // (20 a minute per DID, 30 per address) leave room for them, and are kept on here.
  const env = { STOWAGE_USER_KEY: key };
  const user = (...args: string[]) => runBinary([...args, "--gateway", gateway], env);
  const ok = async (...args: string[]) => {
    const r = await user(...args);
    expect(r.code, `stowage ${args.join(" ")}: ${r.stderr}`).toBe(0);
    return r;
  };

  const login = await ok("login");
  expect(login.stdout).toContain(did);
  expect(login.stdout).toMatch(/chain +985 /);

  // A multi-MiB file of random bytes, up to dfs (as JSON, with progress) and to ipfs (summary).
  const content = new Uint8Array(randomBytes(3 * MiB + 17));
  const path = join(dir, "sample.bin");
  writeFileSync(path, content);
  const putDfs = await ok("put", path, "--to", "dfs", "--name", "sample one.bin", "--json", "--progress");
  const entry = JSON.parse(putDfs.stdout) as { ID: number; Name: string; Size: number; Cid: string };
  expect(entry).toMatchObject({ Name: "sample one.bin", Size: content.length });
  expect(putDfs.stderr).toMatch(/put sample one\.bin: 3\.0 MiB in [\d.]+ s, [\d.]+ MiB\/s/);
  const putIpfs = await ok("put", path, "--to", "ipfs");
  const summary = /^ID (\d+) {2}Cid (\S+) {2}3\.0 MiB {2}ipfs {2}sample\.bin$/.exec(putIpfs.stdout.trim());
  expect(summary, putIpfs.stdout).not.toBeNull();
  expect(summary?.[2]).toBe(entry.Cid); // D9: the same bytes get the same Cid on both back-ends

  const ls = (await ok("ls")).stdout.trim().split("\n");
  expect(ls[0]).toMatch(/^ID +SIZE +NAME +CID +MODIFIED$/);
  expect(ls).toHaveLength(2);
  expect(ls[1]).toMatch(new RegExp(`^${entry.ID} +3\\.0 MiB +sample one\\.bin +${entry.Cid} +\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ$`));
  const ipfsList = JSON.parse((await ok("ls", "--from", "ipfs", "--json")).stdout) as { ID: number; Name: string }[];
  expect(ipfsList.map((e) => [e.ID, e.Name])).toEqual([[Number(summary?.[1]), "sample.bin"]]);

  // Back byte-exact, to files; ranges to stdout.
  await ok("get", entry.Cid, "--out", join(dir, "back-dfs.bin"));
  expect(new Uint8Array(readFileSync(join(dir, "back-dfs.bin")))).toEqual(content);
  await ok("get", entry.Cid, "--from", "ipfs", "--out", join(dir, "back-ipfs.bin"));
  expect(new Uint8Array(readFileSync(join(dir, "back-ipfs.bin")))).toEqual(content);
  // Piped in: `put -` under --name, back by Cid without naming the back-end.
  const piped = Bun.spawn([BINARY, "put", "-", "--name", "piped.bin", "--to", "ipfs", "-q", "--gateway", gateway], { env: { HOME: "/tmp", ...env }, stdin: Bun.file(path), stdout: "pipe", stderr: "pipe" });
  const [pipedCid, pipedErr, pipedCode] = await Promise.all([new Response(piped.stdout).text(), new Response(piped.stderr).text(), piped.exited]);
  expect(pipedCode, pipedErr).toBe(0);
  expect(pipedCid.trim()).toBe(entry.Cid);
  const range = await runBytes(["get", entry.Cid, "--range", `${MiB - 10}-${MiB + 9}`, "--gateway", gateway], env);
  expect(range.code, range.stderr).toBe(0);
  expect(range.stdout).toEqual(content.subarray(MiB - 10, MiB + 10));
  const tail = await runBytes(["get", entry.Cid, "--from", "ipfs", "--range", `${content.length - 5}-`, "--gateway", gateway], env);
  expect(tail.code, tail.stderr).toBe(0);
  expect(tail.stdout).toEqual(content.subarray(content.length - 5));

  // Quota, then a deposit and purchases paid from it.
  const before = JSON.parse((await ok("quota", "--json")).stdout) as { space: { SizeByte: number; Balance: number }; traffic: { SizeByte: number } };
  expect(before.space).toMatchObject({ SizeByte: 16 * MiB - 3 * content.length, Balance: 0 });
  const deposit = await ok("deposit", "0.01");
  expect(deposit.stdout.trim()).toMatch(/^0x[0-9a-f]{64}$/);
  expect((await ok("buy", "--space", "1MiB")).stdout.trim()).toMatch(/^0x[0-9a-f]{64}$/);
  expect((await ok("buy", "--traffic", "1MiB")).stdout.trim()).toMatch(/^0x[0-9a-f]{64}$/);
  const human = (await ok("quota")).stdout;
  expect(human).toMatch(/^space +\d+\.\d MiB left \(\d+ bytes; free bytes granted 16777216\), expires \d{4}-/m);
  expect(human).toMatch(/^deposit +\d+ gwei \(0\.00\d+ ETH\)$/m);
  const after = JSON.parse((await ok("quota", "--json")).stdout) as typeof before;
  expect(after.space.SizeByte).toBe(before.space.SizeByte + MiB);
  expect(after.traffic.SizeByte).toBe(before.traffic.SizeByte + MiB);
  // 0.01 ETH, less 1 MiB at 1 gwei/byte and 1 MiB at 0.1 gwei/byte.
  expect(Math.abs(after.space.Balance - (10_000_000 - 1_048_576 - 104_857.6))).toBeLessThan(1);
  const withdrawn = JSON.parse((await ok("withdraw", "0.001", "-j")).stdout) as { tx: string; depositWei: string };
  expect(withdrawn.tx).toMatch(/^0x[0-9a-f]{64}$/);
  expect(Math.abs(Number(withdrawn.depositWei) / 1e9 - (after.space.Balance - 1_000_000))).toBeLessThan(1);
  const tooMuch = await user("buy", "--traffic", "100GiB");
  expect(tooMuch.code).toBe(1);
  expect(tooMuch.stderr).toMatch(/stowage buy: the gateway answered 402 PaymentRequired: .*deposit/);

  // rm gives the dfs file up; the ipfs copy stays, and its ID is refused for what it is.
  const ipfsId = await user("rm", String(ipfsList[0]?.ID));
  expect(ipfsId.code).toBe(1);
  expect(ipfsId.stderr.trim()).toBe(`stowage rm: ${ipfsList[0]?.ID} is not the ID of one of your dfs files (see \`stowage ls\`); files on ipfs cannot be deleted`);
  expect((await ok("rm", String(entry.ID))).stdout.trim()).toBe(`removed ${entry.ID}`);
  expect(JSON.parse((await ok("ls", "--json")).stdout)).toEqual([]);

  // Errors. No key: bad configuration, exit 2, and says what to do.
  const noKey = await runBinary(["ls", "--gateway", gateway]);
  expect(noKey.code).toBe(2);
  expect(noKey.stderr).toContain("no key: set STOWAGE_USER_KEY");
  // A key file others can read is refused before it is used; one only its owner reads works.
  const other = generatePrivateKey();
  const keyFile = join(dir, "other.key");
  writeFileSync(keyFile, `${other}\n`);
  chmodSync(keyFile, 0o644);
  const loose = await runBinary(["login", "--key-file", keyFile, "--gateway", gateway]);
  expect(loose.code).toBe(2);
  expect(loose.stderr).toContain("is readable by others (mode 644)");
  // A folder in a file's --name would be dropped by the gateway: refused, nothing stored.
  const folded = await runBinary(["put", path, "--name", "docs/x.bin", "--gateway", gateway], env);
  expect([folded.code, folded.stderr]).toEqual([2, expect.stringContaining('give a name without "/"')]);
  expect(JSON.parse((await ok("ls", "--json")).stdout)).toEqual([]);
  chmodSync(keyFile, 0o600);
  const byFile = await runBinary(["login", "--key-file", keyFile, "--gateway", gateway]);
  expect(byFile.code, byFile.stderr).toBe(0);
  expect(byFile.stdout).toContain(privateKeyToAccount(other).address);
  // An unknown Cid: the server refuses a Cid the payer stores no copy of (403 before any lookup,
  // so an unknown Cid reveals nothing), and get, told no back-end, names both it tried, in the
  // gateway's own words; an unknown ID is the delete's 404, said as what it means.
  const unknownCid = await runBinary(["get", "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4", "--key-file", keyFile, "--gateway", gateway]);
  expect(unknownCid.code).toBe(1);
  expect(unknownCid.stderr).toContain("neither dfs nor ipfs lets you read it (tried both: the gateway answered 403 AccessDenied: Permission denied");
  const unknownId = await runBinary(["rm", "999999", "--key-file", keyFile, "--gateway", gateway]);
  expect(unknownId.code).toBe(1);
  expect(unknownId.stderr).toContain("999999 is not the ID of one of your dfs files");
  // No space: the gateway's hint names the command that buys it, not the API call.
  const noSpace = await runBinary(["put", path, "--key-file", keyFile, "--gateway", gateway]);
  expect(noSpace.code).toBe(1);
  expect(noSpace.stderr).toContain("402 PaymentRequired: no storage space: buy some (`stowage buy --space BYTES`) or ask for a grant");
  expect(noSpace.stderr).not.toContain("GET /");
  // No gateway there; and bad usage.
  const down = await runBinary(["quota", "--gateway", "http://127.0.0.1:9"], env);
  expect(down.code).toBe(1);
  expect(down.stderr).toContain("cannot reach the gateway at http://127.0.0.1:9");
  const usage = await user("put", path, "--to", "s3");
  expect(usage.code).toBe(2);
  expect(usage.stderr).toContain("--to must be dfs or ipfs");
  const help = await runBinary(["get", "--help"]);
  expect(help.code).toBe(0);
  expect(help.stdout).toContain("Usage: stowage get CID [--from dfs|ipfs] [--out PATH] [--range A-B]");
  const rmHelp = await runBinary(["rm", "--help"]);
  expect(rmHelp.stdout).toContain("Files on ipfs\ncannot be deleted: an ID that `stowage ls --from ipfs` shows is refused.");
  expect(rmHelp.stdout).not.toContain("518");
  for (const [command, usage] of [
    ["withdraw", "Usage: stowage withdraw AMOUNT_ETH [--json]"],
    ["unpublish", "Usage: stowage unpublish MID [--json]"],
    ["buy-read", "Usage: stowage buy-read OWNER MID [--max-price GWEI] [--json]"],
  ] as const) {
    const h = await runBinary([command, "--help"]);
    expect(h.code).toBe(0);
    expect(h.stdout).toContain(usage);
  }
}, 90_000);
