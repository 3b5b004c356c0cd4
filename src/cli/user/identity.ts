/**
 * `stowage keygen` and `stowage whoami`: a newcomer needs a key before any other command, and its
 * address before anyone (an embedded chain's `stowage admin fund`, a faucet, a friend) can send it
 * currency. Both work offline: no gateway is asked.
 */
import { existsSync, writeFileSync } from "node:fs";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { ConfigError } from "../../config.ts";
import { CliError } from "../chain-access.ts";
import { expectPositionals, json, userAccount, type Invocation, type Io } from "./common.ts";

export async function keygen(inv: Invocation, io: Io): Promise<number> {
  expectPositionals(inv, []);
  const key = generatePrivateKey();
  const { address } = privateKeyToAccount(key);
  const out = inv.flags.get("--out");
  if (out === undefined) {
    // stdout holds the key alone, so `export STOWAGE_USER_KEY=$(stowage keygen)` takes it as it is.
    io.out(inv.flags.has("--json") ? json({ key, address }) : key);
    io.log(`address ${address} (keep the key secret: it is your account)`);
    return 0;
  }
  if (!out) throw new ConfigError("--out needs a path");
  // Never over an existing file: that may be someone's only copy of a key.
  if (existsSync(out)) throw new CliError(`${out} exists: keygen writes only a new file`);
  // 0600 from the start: `--key-file` refuses a key file others may read.
  writeFileSync(out, `${key}\n`, { mode: 0o600, flag: "wx" });
  io.out(inv.flags.has("--json") ? json({ keyFile: out, address }) : address);
  io.log(`wrote the key to ${out} (mode 600): use it with --key-file ${out}`);
  return 0;
}

export async function whoami(inv: Invocation, io: Io): Promise<number> {
  expectPositionals(inv, []);
  const { address } = userAccount(inv);
  io.out(inv.flags.has("--json") ? json({ address }) : address);
  return 0;
}
