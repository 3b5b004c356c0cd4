/**
 * The encryption commands as a user runs them (D20), each a fresh command run with only the key
 * in its environment, against a gateway served over real HTTP: `put --encrypt` (and
 * STOWAGE_ENCRYPT=on), `get` that decrypts by itself, `get --raw` opened by Debian's `age -d -i`
 * with the key `stowage age-key` prints, `grant` letting a reader decrypt, a stranger's clear
 * error, and `revoke`.
 */
import { beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { userCommands } from "../../src/cli/user/index.ts";
import type { Io } from "../../src/cli/user/common.ts";
import { ageCli, ensureAgeCli } from "../support/age-cli.ts";
import { serveOverHttp } from "../support/serve.ts";
import { tempDir } from "../support/tmp.ts";
import { encryptionGateway } from "./support.ts";

setDefaultTimeout(60_000);

// The gateway's app behind a real listener: the commands use the global fetch, as in a shell.
// Served by the server's own listener; the app is built once its URL is known.
const server = await serveOverHttp();
const gateway = server.url;
const env = await encryptionGateway({ env: { STOWAGE_PUBLIC_URL: gateway } });
server.handle = (r) => env.app.handle(r);

const dir = tempDir("enc-cli");
const sha256 = (b: Uint8Array) => new Bun.CryptoHasher("sha256").update(b).digest("hex");

/** One command run: its exit code and what it printed. Failures come back as their message. */
async function stowage(key: string, args: string[], extraEnv: Record<string, string> = {}) {
  const out: string[] = [];
  const log: string[] = [];
  const io: Io = { out: (l) => out.push(l), log: (l) => log.push(l), stderrTty: false };
  const [name, ...rest] = args as [string, ...string[]];
  const command = userCommands({ STOWAGE_USER_KEY: key, STOWAGE_GATEWAY: gateway, ...extraEnv }, io)[name];
  if (!command) throw new Error(`no command ${name}`);
  try {
    return { code: await command.run(rest), out: out.join("\n"), log: log.join("\n"), error: "" };
  } catch (err) {
    return { code: 1, out: out.join("\n"), log: log.join("\n"), error: (err as Error).message };
  }
}

const ownerKey = generatePrivateKey();
const readerKey = generatePrivateKey();
const strangerKey = generatePrivateKey();
const reader = privateKeyToAccount(readerKey).address;
const content = crypto.getRandomValues(new Uint8Array(300_001));
const file = join(dir, "diary.txt");
let cid = "";

beforeAll(async () => {
  for (const k of [ownerKey, readerKey, strangerKey]) await env.gw.chain.anvil.fund(privateKeyToAccount(k).address, 10n ** 21n);
  writeFileSync(file, content);
});

test("put --encrypt stores ciphertext; get decrypts by itself, byte-exact; --raw opens with age -d -i and age-key's key", async () => {
  const put = await stowage(ownerKey, ["put", file, "--to", "ipfs", "--encrypt", "--json"]);
  expect(put.error).toBe("");
  const entry = JSON.parse(put.out) as { Cid: string; Size: number; UserDefined: { encryption: string } };
  expect(entry.UserDefined.encryption).toBe("age");
  cid = entry.Cid;

  const plainOut = join(dir, "plain.out");
  expect((await stowage(ownerKey, ["get", cid, "--from", "ipfs", "--out", plainOut])).error).toBe("");
  expect(sha256(readFileSync(plainOut))).toBe(sha256(content));

  const rawOut = join(dir, "raw.out");
  expect((await stowage(ownerKey, ["get", cid, "--from", "ipfs", "--out", rawOut, "--raw"])).error).toBe("");
  const raw = readFileSync(rawOut);
  expect(raw.length).toBe(entry.Size);
  expect(raw.subarray(0, 21).toString()).toBe("age-encryption.org/v1");

  const key = await stowage(ownerKey, ["age-key"]);
  expect(key.out).toMatch(/^AGE-SECRET-KEY-1[0-9A-Z]+$/);
  const keyFile = join(dir, "key.txt");
  writeFileSync(keyFile, `${key.out}\n`, { mode: 0o600 });
  await ensureAgeCli();
  expect(sha256(await ageCli(["-d", "-i", keyFile], raw))).toBe(sha256(content));
  const recipient = (await stowage(ownerKey, ["age-key", "--recipient"])).out;
  expect(recipient).toMatch(/^age1[0-9a-z]+$/);
  expect(JSON.parse((await stowage(ownerKey, ["age-key", "--json"])).out)).toMatchObject({ recipient, identity: expect.stringMatching(/^AGE-SECRET-KEY-1/) });

  // A range of ciphertext cannot be decrypted alone: said, not garbage.
  const ranged = await stowage(ownerKey, ["get", cid, "--from", "ipfs", "--range", "0-99", "--out", join(dir, "r.out")]);
  expect(ranged.error).toContain("cannot be decrypted alone");
});

test("put --encrypt seals once into a private 0600 temporary file, uploads that, and removes it after success and failure", async () => {
  // The temporary directory is this test's own (os.tmpdir() follows TMPDIR), so what is in it is ours.
  const tmp = join(dir, "tmp");
  mkdirSync(tmp);
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = tmp;
  const seen: { files: string[]; mode: number; size: number }[] = [];
  let refuse = false;
  const real = server.handle;
  // What lies in TMPDIR while the gateway receives the upload; `refuse` makes the gateway's
  // answer a refusal (in the spec's shape) once it has read the body, as a full quota would.
  server.handle = async (r) => {
    if (r.method !== "POST" || !/^\/(dfs|ipfs)\/$/.test(new URL(r.url).pathname)) return real(r);
    const dirs = readdirSync(tmp);
    const files = dirs.flatMap((d) => readdirSync(join(tmp, d)).map((f) => join(tmp, d, f)));
    seen.push({ files: dirs.map((d) => `${d}/${readdirSync(join(tmp, d)).join(",")}`), mode: files[0] ? statSync(files[0]).mode & 0o777 : -1, size: files[0] ? statSync(files[0]).size : -1 });
    if (!refuse) return real(r);
    await r.arrayBuffer();
    return Response.json({ Code: "QuotaExceeded", Description: "not enough space" }, { status: 403 });
  };
  try {
    const bytes = crypto.getRandomValues(new Uint8Array(200_000));
    const path = join(dir, "sealed-once.bin");
    writeFileSync(path, bytes);
    const put = await stowage(ownerKey, ["put", path, "--encrypt", "--json"]);
    expect(put.error).toBe("");
    const entry = JSON.parse(put.out) as { Cid: string; Size: number; UserDefined: { encryption: string } };
    expect(entry.UserDefined.encryption).toBe("age");
    // One upload, of a sealed file of the stored size, private to its user; gone afterwards.
    expect(seen).toHaveLength(1);
    expect(seen[0]?.files).toEqual([expect.stringMatching(/^stowage-seal-\w+\/stowage-seal-\w+\.age$/)]);
    expect(seen[0]?.mode).toBe(0o600);
    expect(seen[0]?.size).toBe(entry.Size);
    expect(readdirSync(tmp)).toEqual([]);
    // What was stored is age's format: Debian's age opens it with age-key's key.
    const raw = join(dir, "sealed-once.raw");
    expect((await stowage(ownerKey, ["get", entry.Cid, "--out", raw, "--raw"])).error).toBe("");
    const keyFile = join(dir, "key-once.txt");
    writeFileSync(keyFile, `${(await stowage(ownerKey, ["age-key"])).out}\n`, { mode: 0o600 });
    await ensureAgeCli();
    expect(sha256(await ageCli(["-d", "-i", keyFile], readFileSync(raw)))).toBe(sha256(bytes));

    refuse = true;
    const failed = await stowage(ownerKey, ["put", path, "--name", "refused.bin", "--encrypt"]);
    expect(failed.code).toBe(1);
    expect(failed.error).toContain("not enough space");
    expect(seen).toHaveLength(2);
    expect(seen[1]?.size).toBe(entry.Size);
    expect(readdirSync(tmp)).toEqual([]);
  } finally {
    server.handle = real;
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
});

test("STOWAGE_ENCRYPT=on encrypts without the flag, and --plain overrides it", async () => {
  const small = join(dir, "small.txt");
  writeFileSync(small, "hello");
  const on = JSON.parse((await stowage(ownerKey, ["put", small, "--json"], { STOWAGE_ENCRYPT: "on" })).out);
  expect(on.UserDefined.encryption).toBe("age");
  const plain = JSON.parse((await stowage(ownerKey, ["put", small, "--name", "p.txt", "--json", "--plain"], { STOWAGE_ENCRYPT: "on" })).out);
  expect(plain.UserDefined.encryption).toBe("");
  expect((await stowage(ownerKey, ["put", small, "--encrypt", "--plain"])).error).toContain("contradict");
});

test("grant lets a reader decrypt; a stranger gets a clear error; revoke removes both", async () => {
  // The reader publishes its recipient once (as any encrypted upload would). A grant on a file
  // not yet published is refused before its key is shared with anyone.
  expect((await stowage(readerKey, ["age-key", "--publish", "--recipient"])).error).toBe("");
  const early = await stowage(ownerKey, ["grant", cid, reader]);
  expect([early.code, early.error, early.log]).toEqual([1, expect.stringContaining(`${cid} is not published`), expect.not.stringContaining("shared the file key")]);
  expect(early.error).toContain(`stowage publish ${cid}`);
  expect((await stowage(ownerKey, ["publish", cid])).error).toBe("");
  const granted = await stowage(ownerKey, ["grant", cid, reader, "--json"]);
  expect(granted.error).toBe("");
  expect(granted.log).toContain("shared the file key");
  expect(JSON.parse(granted.out)).toMatchObject({ mid: cid, reader, tx: expect.stringMatching(/^0x[0-9a-f]{64}$/), sharedTo: expect.stringMatching(/^age1/) });
  await env.sync();

  const readerOut = join(dir, "reader.out");
  expect((await stowage(readerKey, ["get", cid, "--from", "ipfs", "--out", readerOut])).error).toBe("");
  expect(sha256(readFileSync(readerOut))).toBe(sha256(content));

  const stranger = await stowage(strangerKey, ["get", cid, "--from", "ipfs", "--out", join(dir, "stranger.out")]);
  expect(stranger.code).toBe(1);
  expect(stranger.error).toContain("403");

  // Granting someone who never published a key is refused before anything is granted.
  const nobody = privateKeyToAccount(generatePrivateKey()).address;
  expect((await stowage(ownerKey, ["grant", cid, nobody])).error).toContain("has published no encryption key");

  const revoked = await stowage(ownerKey, ["revoke", cid, reader, "-j"]);
  expect(revoked.error).toBe("");
  expect(revoked.log).toContain("removed the share");
  expect(JSON.parse(revoked.out)).toMatchObject({ mid: cid, reader, tx: expect.stringMatching(/^0x[0-9a-f]{64}$/), unshared: true });
  await env.sync();
  const after = await stowage(readerKey, ["get", cid, "--from", "ipfs", "--out", join(dir, "after.out")]);
  expect(after.error).toContain("403");
});

test("publish --price of an encrypted file escrows its key; a buyer then decrypts", async () => {
  const priced = join(dir, "priced.bin");
  const bytes = crypto.getRandomValues(new Uint8Array(70_000));
  writeFileSync(priced, bytes);
  const entry = JSON.parse((await stowage(ownerKey, ["put", priced, "--encrypt", "--json"])).out) as { Cid: string };
  const published = await stowage(ownerKey, ["publish", entry.Cid, "--price", "1000"]);
  expect(published.error).toBe("");
  expect(published.log).toContain("escrowed the file key");
  await env.sync();
  const owner = privateKeyToAccount(ownerKey).address;
  const status = (await (await env.call("GET", `/v2/escrows/${owner}/${entry.Cid}`)).json()) as { data: unknown };
  expect(status.data).toMatchObject({ encrypted: true, escrowed: true });
  const buyer = await env.user();
  await buyer.enc.publish();
  await buyer.dir.buyRead(owner, entry.Cid);
  await env.sync();
  expect(sha256(await new Response((await buyer.enc.download("dfs", entry.Cid)).body).bytes())).toBe(sha256(bytes));
});

test("revoke --rekey: a new key and Cid, the entry moved; the revoked reader's old key opens nothing stored now", async () => {
  const path = join(dir, "rekey.bin");
  const bytes = crypto.getRandomValues(new Uint8Array(90_000));
  writeFileSync(path, bytes);
  const old = (JSON.parse((await stowage(ownerKey, ["put", path, "--encrypt", "--json"])).out) as { Cid: string }).Cid;
  expect((await stowage(ownerKey, ["publish", old, "--keyword", "rekey"])).error).toBe("");
  expect((await stowage(ownerKey, ["grant", old, reader])).error).toBe("");
  await env.sync();
  // What the reader keeps: its share of the old file key.
  const readerUser = await env.user(privateKeyToAccount(readerKey));
  const kept = (await (await env.call("GET", `/v2/shares/${privateKeyToAccount(ownerKey).address}/${old}`, { token: readerUser.store.accessToken })).json()) as { data: { header: string } };

  const revoked = await stowage(ownerKey, ["revoke", old, reader, "--rekey"]);
  expect(revoked.error).toBe("");
  const fresh = revoked.out.split("\n").at(-1) as string;
  expect(fresh).not.toBe(old);
  await env.sync();
  const owner = privateKeyToAccount(ownerKey).address;
  const ownerUser = await env.user(privateKeyToAccount(ownerKey));
  // The owner reads the new one; the old is no longer stored under that name, and the entry moved.
  expect(sha256(await new Response((await ownerUser.enc.download("dfs", fresh)).body).bytes())).toBe(sha256(bytes));
  expect((await ownerUser.store.list("dfs")).Object.some((e) => e.Cid === old)).toBe(false);
  expect(await ownerUser.dir.entry(owner, old)).toBeUndefined();
  expect((await ownerUser.dir.entry(owner, fresh))?.keywords).toEqual(["rekey"]);
  // The kept share does not open the new ciphertext.
  const raw = await new Response((await ownerUser.enc.download("dfs", fresh, { raw: true })).body).bytes();
  const { decryptWithHeader } = await import("../../src/sdk/age.ts");
  const attempt = new Response(decryptWithHeader([await readerUser.enc.identity()], new TextEncoder().encode(kept.data.header), new Blob([raw]).stream())).bytes();
  await expect(attempt).rejects.toThrow();
});

test("age-key, grant and revoke have --help", () => {
  const commands = userCommands({}, { out: () => {}, log: () => {}, stderrTty: false });
  expect(commands["age-key"]?.help()).toContain("age -d -i");
  expect(commands.grant?.help()).toContain("stowage grant MID ADDRESS");
  expect(commands.revoke?.help()).toContain("Future access only");
  expect(commands.revoke?.help()).toContain("--rekey");
  expect(commands.put?.help()).toContain("--encrypt");
});
