/**
 * Private files (D20) through the compiled binary, as a user with a shell lives them: a server
 * on an empty data dir, currency and quota from `stowage admin`, then separate runs of
 * `dist/stowage` with only the key in the environment: `put --encrypt` to ipfs, `get` that
 * decrypts by itself (byte-exact), `get --raw` opened by Debian's `age -d -i` with the key
 * `stowage age-key` prints, a grantee who decrypts after `stowage grant`, and a stranger's clear
 * error. The in-process twin (test/encryption/cli.test.ts) covers more cases; this one proves the
 * built binary carries all of it (age, libsodium's WASM, the share routes).
 */
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { ageCli, ensureAgeCli } from "../support/age-cli.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";

setDefaultTimeout(120_000);

const POLL_MS = 200;
/** The server's indexer applies a grant at its next poll: ten polls and some slack. */
const WAIT_MS = 10 * POLL_MS + 5000;
const dir = tempDir("e2e-encryption-cli");
const dataDir = join(dir, "data");
let server: RunningBinary | undefined;
afterAll(async () => {
  await server?.stop();
});

const sha256 = (b: Uint8Array) => new Bun.CryptoHasher("sha256").update(b).digest("hex");

test("put --encrypt to ipfs; get decrypts; get --raw opens with age -d -i and age-key's key; a grantee decrypts; a stranger is told why not", async () => {
  await ensureAgeCli();
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], { STOWAGE_INDEXER_POLL: `${POLL_MS}ms` });
  const gateway = server.url;
  const admin = async (...args: string[]) => {
    const r = await runBinary(["admin", ...args, "--data-dir", dataDir]);
    expect(r.code, `stowage admin ${args.join(" ")}: ${r.stderr}`).toBe(0);
  };
  const [owner, reader, stranger] = [generatePrivateKey(), generatePrivateKey(), generatePrivateKey()];
  const address = (key: `0x${string}`) => privateKeyToAccount(key).address;
  const did = (key: `0x${string}`) => `did:ethr:0x3d9:${address(key)}`;
  // Gas for the owner (uploads, publish, grant) and the reader (it publishes its recipient);
  // space for the owner, traffic for all three, so the stranger is refused for want of a grant only.
  await admin("fund", address(owner), "1");
  await admin("fund", address(reader), "1");
  await admin("grant", "--did", did(owner), "--space", "16MiB");
  for (const k of [owner, reader, stranger]) await admin("grant", "--did", did(k), "--traffic", "32MiB");

  // The environment the README's "Private files" section has a user set: the key and the gateway;
  // and a temporary directory of the test's own, where `put --encrypt` seals a file before sending it.
  const tmp = join(dir, "tmp");
  mkdirSync(tmp);
  const run = (key: string, ...args: string[]) => runBinary(args, { STOWAGE_USER_KEY: key, STOWAGE_GATEWAY: gateway, TMPDIR: tmp });
  const ok = async (key: string, ...args: string[]) => {
    const r = await run(key, ...args);
    expect(r.code, `stowage ${args.join(" ")}: ${r.stderr}`).toBe(0);
    return r;
  };

  // Several STREAM chunks and a partial last one.
  const content = new Uint8Array(randomBytes(2 * 1024 * 1024 + 4321));
  const file = join(dir, "diary.bin");
  writeFileSync(file, content);
  const put = await ok(owner, "put", file, "--to", "ipfs", "--encrypt", "--json");
  const entry = JSON.parse(put.stdout) as { Cid: string; Size: number; UserDefined: { encryption: string } };
  expect(entry.UserDefined.encryption).toBe("age");
  expect(entry.Size).toBeGreaterThan(content.length);
  expect(readdirSync(tmp)).toEqual([]);

  // Over quota (16 MiB of space, 2 used): refused after sealing, and the sealed copy is gone too.
  const big = join(dir, "big.bin");
  writeFileSync(big, new Uint8Array(15 * 1024 * 1024));
  const over = await run(owner, "put", big, "--encrypt");
  expect(over.code).toBe(1);
  expect(over.stderr).toMatch(/space|quota/i);
  expect(readdirSync(tmp)).toEqual([]);

  const plainOut = join(dir, "plain.out");
  await ok(owner, "get", entry.Cid, "--from", "ipfs", "--out", plainOut);
  expect(sha256(readFileSync(plainOut))).toBe(sha256(content));

  // What the gateway stores is an age file that Debian's age opens with the key age-key prints.
  const rawOut = join(dir, "raw.out");
  await ok(owner, "get", entry.Cid, "--from", "ipfs", "--out", rawOut, "--raw");
  const raw = readFileSync(rawOut);
  expect(raw.length).toBe(entry.Size);
  expect(raw.subarray(0, 21).toString()).toBe("age-encryption.org/v1");
  expect(sha256(raw)).not.toBe(sha256(content));
  const key = (await ok(owner, "age-key")).stdout.trim();
  expect(key).toMatch(/^AGE-SECRET-KEY-1[0-9A-Z]+$/);
  const keyFile = join(dir, "key.txt");
  writeFileSync(keyFile, `${key}\n`, { mode: 0o600 });
  expect(sha256(await ageCli(["-d", "-i", keyFile], raw))).toBe(sha256(content));

  // A grantee: publishes its recipient once, is granted (on chain + the share), then decrypts.
  await ok(owner, "publish", entry.Cid);
  // Publishing prints the public recipient, never the secret key.
  const published = await ok(reader, "age-key", "--publish");
  expect(published.stdout.trim()).toMatch(/^age1[0-9a-z]+$/);
  expect(published.stdout + published.stderr).not.toContain("AGE-SECRET-KEY");
  const granted = await ok(owner, "grant", entry.Cid, address(reader));
  expect(granted.stderr).toContain("shared the file key");
  const readerOut = join(dir, "reader.out");
  // The gateway learns of the grant at its indexer's next poll.
  const got = await until("the grantee's get", () => run(reader, "get", entry.Cid, "--from", "ipfs", "--out", readerOut), (r) => r.code === 0 || !r.stderr.includes("403"), WAIT_MS, POLL_MS);
  expect(got.code, got.stderr).toBe(0);
  expect(sha256(readFileSync(readerOut))).toBe(sha256(content));

  // A stranger: one clear line, exit 1, nothing written.
  const strangerOut = join(dir, "stranger.out");
  const refused = await run(stranger, "get", entry.Cid, "--from", "ipfs", "--out", strangerOut);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain("403 AccessDenied");
  expect(refused.stderr).toContain("may not read this file");
  expect(refused.stderr.trim().split("\n").length).toBeLessThanOrEqual(2);
  expect(!existsSync(strangerOut) || statSync(strangerOut).size === 0).toBe(true);
  // Publishing takes gas, which the stranger has no currency for: said so, with how to get some.
  const unfunded = await run(stranger, "age-key", "--publish");
  expect(unfunded.code).toBe(1);
  expect(unfunded.stderr).toContain("stowage age-key: your account has no currency to pay for gas");
  expect(unfunded.stderr).toContain("`stowage admin fund ADDRESS AMOUNT_ETH`");

  // A revoke's JSON has every field its help lists; rekeyedTo is null without --rekey.
  const revoked = JSON.parse((await ok(owner, "revoke", entry.Cid, address(reader), "--json")).stdout) as Record<string, unknown>;
  expect(revoked).toEqual({ mid: entry.Cid, reader: address(reader), tx: expect.stringMatching(/^0x[0-9a-f]{64}$/), unshared: true, rekeyedTo: null });
});
