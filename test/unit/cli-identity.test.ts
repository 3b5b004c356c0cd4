/**
 * `stowage keygen` and `stowage whoami`, offline: the README's first line sets STOWAGE_USER_KEY from
 * keygen's stdout, so it must hold the key alone; a key file is made private from its first byte
 * and never written over; whoami gives the address that key signs as.
 */
import { expect, test } from "bun:test";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { privateKeyToAccount } from "viem/accounts";
import { userCommands } from "../../src/cli/user/index.ts";
import type { Io } from "../../src/cli/user/common.ts";
import { tempDir } from "../support/tmp.ts";

async function stowage(args: string[], env: Record<string, string> = {}) {
  const out: string[] = [];
  const log: string[] = [];
  const io: Io = { out: (l) => out.push(l), log: (l) => log.push(l), stderrTty: false };
  const [name, ...rest] = args as [string, ...string[]];
  const command = userCommands(env, io)[name];
  if (!command) throw new Error(`no command ${name}`);
  try {
    return { code: await command.run(rest), out: out.join("\n"), log: log.join("\n"), error: "" };
  } catch (err) {
    return { code: 1, out: out.join("\n"), log: log.join("\n"), error: (err as Error).message };
  }
}

test("keygen prints a new key alone on stdout (its address on stderr), and whoami gives that key's address", async () => {
  const made = await stowage(["keygen"]);
  expect(made.code).toBe(0);
  expect(made.out).toMatch(/^0x[0-9a-f]{64}$/);
  const { address } = privateKeyToAccount(made.out as `0x${string}`);
  expect(made.log).toContain(address);
  expect((await stowage(["keygen"])).out).not.toBe(made.out);

  expect(await stowage(["whoami"], { STOWAGE_USER_KEY: made.out })).toMatchObject({ code: 0, out: address });
  expect(JSON.parse((await stowage(["whoami", "--json"], { STOWAGE_USER_KEY: made.out })).out)).toEqual({ address });
  expect((await stowage(["whoami"])).error).toContain("no key: set STOWAGE_USER_KEY");
  expect(JSON.parse((await stowage(["keygen", "--json"])).out)).toMatchObject({ key: expect.stringMatching(/^0x[0-9a-f]{64}$/), address: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/) });
});

test("keygen --out writes a new file of mode 600 that --key-file takes, and never writes over a file", async () => {
  const dir = tempDir("keygen");
  const path = join(dir, "key.hex");
  const made = await stowage(["keygen", "--out", path]);
  expect(made.code).toBe(0);
  expect(statSync(path).mode & 0o777).toBe(0o600);
  const key = readFileSync(path, "utf8").trim() as `0x${string}`;
  expect(made.out).toBe(privateKeyToAccount(key).address);
  expect(await stowage(["whoami", "--key-file", path])).toMatchObject({ code: 0, out: made.out });

  const again = await stowage(["keygen", "--out", path]);
  expect(again.error).toBe(`${path} exists: keygen writes only a new file`);
  expect(readFileSync(path, "utf8").trim()).toBe(key);
  const other = join(dir, "notes.txt");
  writeFileSync(other, "mine\n");
  expect((await stowage(["keygen", "--out", other])).error).toContain("exists");
  expect(readFileSync(other, "utf8")).toBe("mine\n");
});
