/**
 * `stowage keys create|list|revoke` (D18) as a user runs them: separate runs of the compiled
 * binary against a server on an empty data dir, the key in the environment. The server made its
 * secrets key in data/secrets (0600), and the database holds the access key's secret sealed,
 * never as printed.
 */
import { afterAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { statSync } from "node:fs";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { tempDir } from "../support/tmp.ts";

const dir = tempDir("e2e-keys-cli");
const dataDir = join(dir, "data");
let server: RunningBinary | undefined;
afterAll(async () => {
  await server?.stop();
});

test("keys create, list and revoke from a shell, and the errors a user meets", async () => {
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir]);
  const key = generatePrivateKey();
  const address = privateKeyToAccount(key).address;
  const user = (...args: string[]) => runBinary(["keys", ...args, "--gateway", (server as RunningBinary).url], { STOWAGE_USER_KEY: key });
  const ok = async (...args: string[]) => {
    const r = await user(...args);
    expect(r.code, `stowage keys ${args.join(" ")}: ${r.stderr}`).toBe(0);
    return r;
  };

  const help = await runBinary(["keys", "--help"]);
  expect(help.code).toBe(0);
  expect(help.stdout).toContain("stowage keys create [--scope s3|pins] [--access rw|ro] [--bucket dfs|ipfs|*] [--expires WHEN]");

  const before = Math.floor(Date.now() / 1000);
  const created = await ok("create", "--access", "ro", "--bucket", "dfs", "--expires", "2h", "--json");
  const minted = JSON.parse(created.stdout) as { accessKeyId: string; secretAccessKey: string; scope: string; bucket: string; expiresAt: number };
  expect(minted).toMatchObject({ scope: "ro", bucket: "dfs" });
  expect(minted.accessKeyId).toMatch(/^STW[A-Z2-7]{17}$/);
  expect(minted.expiresAt - before).toBeGreaterThanOrEqual(7200);
  expect(minted.expiresAt - before).toBeLessThan(7200 + 60);

  const plain = await ok("create");
  const lines = plain.stdout.trim().split("\n");
  expect(lines[0]).toMatch(/^access key id {6}STW[A-Z2-7]{17}$/);
  expect(lines[1]).toMatch(/^secret access key {2}[A-Za-z0-9_-]{40}$/);
  expect(lines[2]).toBe("scope              s3, rw on dfs and ipfs, expires never");
  expect(plain.stderr).toContain("shown this once");
  const second = lines[0]?.split(/\s+/).pop() as string;
  const pins = (await ok("create", "--scope", "pins")).stdout.trim().split("\n");
  expect(pins[1]).toBe("scope    pins on ipfs, expires never");
  const tokenId = pins[0]?.split(/\s+/).pop()?.split(".")[0] as string;

  // SCOPE and ACCESS as --scope and --access say them: s3 or pins; rw or ro (none for a token).
  const listed = (await ok("list")).stdout.trim().split("\n");
  expect(listed[0]).toMatch(/^ACCESS KEY ID +SCOPE +ACCESS +BUCKET +EXPIRES +CREATED +SIGNER$/);
  expect(listed).toHaveLength(4);
  expect(listed.join("\n")).not.toContain(minted.secretAccessKey);
  expect(listed[1]).toMatch(new RegExp(`^${minted.accessKeyId} +s3 +ro +dfs +\\d{4}-\\d\\d-\\d\\dT[\\d:]{8}Z +\\d{4}-\\d\\d-\\d\\dT[\\d:]{8}Z +${address.toLowerCase()}$`));
  expect(listed[2]).toMatch(new RegExp(`^${second} +s3 +rw +\\* +never `));
  expect(listed[3]).toMatch(new RegExp(`^${tokenId} +pins +- +ipfs +never `));

  // The secrets key the server made, private; the secret in the database sealed.
  expect(statSync(join(dataDir, "secrets", "secrets.key")).mode & 0o777).toBe(0o600);
  const db = new Database(join(dataDir, "stowage.db"), { readonly: true });
  const row = db.query("SELECT secret_enc AS sealed FROM access_keys WHERE access_key_id = ?").get(minted.accessKeyId) as { sealed: string };
  db.close();
  expect(row.sealed.startsWith("v1.")).toBe(true);
  expect(row.sealed).not.toContain(minted.secretAccessKey);

  expect((await ok("revoke", minted.accessKeyId)).stdout.trim()).toBe(`revoked ${minted.accessKeyId}`);
  const after = JSON.parse((await ok("list", "--json")).stdout) as { accessKeyId: string }[];
  expect(after.map((k) => k.accessKeyId)).toEqual([second, tokenId]);

  // Revoked twice, or never ours: the gateway's 404 in one line, exit 1.
  const again = await user("revoke", minted.accessKeyId);
  expect(again.code).toBe(1);
  expect(again.stderr).toContain("the gateway answered 404 NOT_FOUND: This account has no such access key");

  // Bad usage: exit 2, nothing asked of the gateway.
  for (const args of [["create", "--access", "admin"], ["create", "--bucket", "s3"], ["create", "--expires", "yesterday"], ["create", "--expires", "1000"], ["revoke"], ["rotate"], []]) {
    const r = await user(...args);
    expect({ args, code: r.code }).toEqual({ args, code: 2 });
  }
  expect(JSON.parse((await ok("list", "--json")).stdout)).toHaveLength(2);
}, 60_000); // a server start and 15 runs of the binary: over bun's default 5 s when the cores are busy
