/**
 * `stowage put -` spools stdin (plaintext) into a private temporary folder; a Ctrl-C (SIGINT) or
 * SIGTERM ends the command without running its `finally`, so the folder is removed by the signal
 * handler of src/cli/user/temp.ts — nothing of the user's data stays in the temp folder.
 */
import { expect, test } from "bun:test";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";

const MAIN = join(import.meta.dir, "..", "..", "src", "main.ts");

test.each([
  ["SIGINT", 130],
  ["SIGTERM", 143],
] as const)("%s during put - removes the stdin spool and exits %d", async (signal, code) => {
  const tmp = tempDir("cli-temp");
  const proc = Bun.spawn([process.execPath, MAIN, "put", "-", "--name", "secret.txt"], {
    env: { HOME: tmp, TMPDIR: tmp, STOWAGE_USER_KEY: `0x${"11".repeat(32)}`, STOWAGE_GATEWAY: "http://127.0.0.1:9" },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  proc.stdin.write("the plaintext of a secret\n");
  await proc.stdin.flush();
  // The spool exists, private, with the bytes so far; stdin stays open, so the command waits.
  const spool = () => readdirSync(tmp).filter((n) => n.startsWith("stowage-put-"));
  const ready = () => spool().length === 1 && existsSync(join(tmp, spool()[0] as string, "stdin")) && statSync(join(tmp, spool()[0] as string, "stdin")).size > 0;
  await until("the stdin spool", ready, Boolean, 15_000);
  expect(statSync(join(tmp, spool()[0] as string)).mode & 0o777).toBe(0o700);
  proc.kill(signal);
  expect(await proc.exited).toBe(code);
  expect(spool()).toEqual([]);
}, 30_000);
