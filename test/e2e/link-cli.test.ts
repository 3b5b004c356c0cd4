/**
 * `stowage link CID` as a user lives it: the compiled binary prints a URL, and curl — no key, no
 * token, nothing but the URL — reads the file with it once; the gateway refuses it after that, and
 * a link made with the same key reads no other file. Its --help, --json and the errors a user
 * meets. (Expiry by the gateway's clock: test/storage/voucher-binding.test.ts.)
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";

const dir = tempDir("e2e-link-cli");
const dataDir = join(dir, "data");
let server: RunningBinary | undefined;
afterAll(async () => {
  await server?.stop();
});

/** curl as anyone would run it: status, headers and body of one request. */
async function curl(args: string[], cwd = dir) {
  const proc = Bun.spawn(["curl", "-sS", "-w", "\n%{http_code}", ...args], { cwd, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect(code, err).toBe(0);
  const cut = out.lastIndexOf("\n");
  return { status: Number(out.slice(cut + 1)), body: out.slice(0, cut) };
}

test("link prints a URL that curl opens once; a second fetch is refused; it reads no other file", async () => {
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir]);
  const gateway = server.url;
  const admin = async (...args: string[]) => {
    const r = await runBinary(["admin", ...args, "--data-dir", dataDir]);
    expect(r.code, `stowage admin ${args.join(" ")}: ${r.stderr}`).toBe(0);
  };
  const key = generatePrivateKey();
  const account = privateKeyToAccount(key);
  await admin("fund", account.address, "1");
  await admin("grant", "--did", `did:ethr:0x3d9:${account.address}`, "--space", "8MiB");
  await admin("grant", "--did", `did:ethr:0x3d9:${account.address}`, "--traffic", "16MiB");
  const user = (...args: string[]) => runBinary([...args, "--gateway", gateway], { STOWAGE_USER_KEY: key });
  const ok = async (...args: string[]) => {
    const r = await user(...args);
    expect(r.code, `stowage ${args.join(" ")}: ${r.stderr}`).toBe(0);
    return r;
  };

  const help = await runBinary(["link", "--help"]);
  expect(help.code).toBe(0);
  expect(help.stdout).toContain("Usage: stowage link CID [--from dfs|ipfs] [--expires WHEN] [--json]");
  expect(help.stdout).toContain("default 24h");

  const content = new Uint8Array(randomBytes(300_000));
  const path = join(dir, "shared file.bin");
  writeFileSync(path, content);
  const cid = (await ok("put", path, "--quiet")).stdout.trim();
  const other = (await ok("put", join(import.meta.dir, "link-cli.test.ts"), "--quiet")).stdout.trim();
  const traffic = async () => (JSON.parse((await ok("quota", "--json")).stdout) as { traffic: { SizeByte: number } }).traffic.SizeByte;
  const before = await traffic();

  const made = await ok("link", cid);
  const url = made.stdout.trim();
  expect(url).toStartWith(`${gateway}/dfs/${cid}?size=`);
  expect(url.split("\n")).toHaveLength(1);
  expect(made.stderr).toMatch(/can read .+ once, until \d{4}-\d\d-\d\dT[\d:]{8}Z, on your traffic/);
  const expires = Number(new URL(url).searchParams.get("expires"));
  expect(expires - Math.floor(Date.now() / 1000)).toBeGreaterThan(24 * 3600 - 120);
  expect(expires - Math.floor(Date.now() / 1000)).toBeLessThanOrEqual(24 * 3600);

  // A HEAD (curl -I) tells its length and spends nothing; the GET then saves the file under its name.
  const head = await curl(["-I", url]);
  expect(head.status).toBe(200);
  expect(head.body).toMatch(/content-length: 300000/i);
  const downloads = join(dir, "downloads");
  mkdirSync(downloads);
  const saved = await curl(["-OJ", url], downloads);
  expect(saved.status).toBe(200);
  expect(new Uint8Array(readFileSync(join(downloads, "shared file.bin")))).toEqual(content);
  expect(await traffic()).toBe(before - content.length);

  // Spent: a second fetch is refused, and counts nothing.
  const again = await curl([url]);
  expect(again.status).toBe(402);
  expect(JSON.parse(again.body)).toMatchObject({ Code: "PaymentRequired", Description: expect.stringMatching(/already used/) });
  expect(await traffic()).toBe(before - content.length);

  // The same voucher on another file of the same user's: refused, nothing read.
  const elsewhere = await curl([url.replace(`/dfs/${cid}?`, `/dfs/${other}?`)]);
  expect(elsewhere.status).toBe(403);

  // --json, another expiry, the ipfs back-end named.
  await ok("put", path, "--to", "ipfs", "--quiet");
  const asJson = JSON.parse((await ok("link", cid, "--from", "ipfs", "--expires", "1h", "--json")).stdout) as Record<string, unknown>;
  expect(asJson).toMatchObject({ cid, backend: "ipfs", bytes: content.length, payer: account.address });
  expect((asJson.expires as number) - Math.floor(Date.now() / 1000)).toBeGreaterThan(3500);
  const viaIpfs = await curl(["-o", join(dir, "via-ipfs.bin"), asJson.url as string]);
  expect(viaIpfs.status).toBe(200);
  expect(new Uint8Array(readFileSync(join(dir, "via-ipfs.bin")))).toEqual(content);
  const forever = JSON.parse((await ok("link", other, "--expires", "0", "--json")).stdout) as { url: string; expires: number };
  expect(forever.expires).toBe(0);
  expect(new URL(forever.url).searchParams.has("expires")).toBe(false);

  // What a user gets wrong.
  const badExpiry = await user("link", cid, "--expires", "tomorrow");
  expect(badExpiry.code).toBe(2);
  expect(badExpiry.stderr).toContain("--expires must be 0 (none), unix seconds, or a duration");
  const notCid = await user("link", "photo.jpg");
  expect(notCid.code).toBe(2);
  expect(notCid.stderr).toContain("CID must be a file's Cid");
  const unknown = await user("link", "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  expect(unknown.code).toBe(1);
  expect(unknown.stderr).toContain("neither dfs nor ipfs lets you read it");
  const noKey = await runBinary(["link", cid, "--gateway", gateway]);
  expect(noKey.code).toBe(2);
}, 120_000);
