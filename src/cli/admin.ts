/**
 * `stowage admin …` (D13): free quota grants, prices and (embedded chain only) funding, signed with
 * the admin key; each prints the transaction hash once it is mined with success. And the commands
 * that keep the gateway's data (backup, restore, check, usage: cli/ops.ts) and the operator's
 * denylist (block, unblock, blocked: cli/block.ts), which need the database, not the chain.
 *
 * @example
 *   stowage admin grant --did did:ethr:0x3d9:0xAb… --space 5GiB --days 30
 *   stowage admin prices --space 1000000000 --traffic 100000000
 *   stowage admin fund 0xAb… 10
 *   stowage admin backup /backups/stowage
 */
import { formatEther, parseEther, isAddress, getAddress, type Hash } from "viem";
import { ConfigError, parseBytes, parseConfig } from "../config.ts";
import { proxyAbi } from "../chain/artifacts/index.ts";
import { explainChainError } from "../chain/explain.ts";
import { parseDidOrAddress } from "../identity/did.ts";
import { parseArgs } from "./args.ts";
import { CliError, adminAccess } from "./chain-access.ts";
import { isOpsCommand, opsHelp, runOps } from "./ops.ts";
import { blockCommandHelp, blockHelp, isBlockCommand, runBlock } from "./block.ts";

type Access = Awaited<ReturnType<typeof adminAccess>>;
type Out = (line: string) => void;

const KIND = { space: 0, traffic: 1 } as const;

export const adminHelp = `Usage: stowage admin <grant | prices | fund | backup | restore | check | usage | block | unblock | blocked> [options]

  grant --did DID (--space BYTES | --traffic BYTES) [--days N]
        Grant free storage space or traffic to a DID (or address). BYTES takes units (5GiB).
        --days sets how long it is valid (default: the contract's validity, 3 years); it can
        only lengthen the record: one that already lasts longer keeps its later expiry.
  prices [--space WEI] [--traffic WEI]
        Show the unit prices (wei per byte); with an option, set them.
  fund ADDRESS AMOUNT_ETH
        Embedded chain only: send currency from the admin account to ADDRESS.
  backup DEST
        Back up the gateway (running or not) into the folder DEST; again: copies what is new.
  restore SRC --data-dir DIR
        Restore a backup into a new data dir, once every part is verified (--verify: only verify).
  check [--repair] [--fast]
        Check that the database and the blobs agree (any database, any blob store).
  usage [--since DATE] [--json | --csv]
        Per account: storage, traffic, purchases and grants, S3 and IPFS activity.
${blockHelp}
  stowage admin <command> --help tells more.

Common options:
  --data-dir DIR   the server's data dir (default ./data, or STOWAGE_DATA_DIR): holds the admin key,
                   the contract addresses and, for the embedded chain, where it runs.
The chain is STOWAGE_CHAIN_RPC when set, else the embedded chain of the running server.`;

/** What grant, prices and fund share: where the admin key and the chain come from. */
const chainOptions = `  --data-dir DIR    the server's data dir (default ./data, or STOWAGE_DATA_DIR): holds the admin
                    key, the contract addresses and, for the embedded chain, where it runs.

  The chain is STOWAGE_CHAIN_RPC when set, else the embedded chain of the running server.`;

const chainHelp = {
  grant: `Usage: stowage admin grant --did DID (--space BYTES | --traffic BYTES) [--days N] [--data-dir DIR]

  Grants free storage space or traffic to a DID (or a 0x address), with a contract call signed by
  the admin key. Prints the transaction hash once it is mined, then the account's record. The
  bytes add to what the account has; the record's expiry becomes N days from now unless it already
  lasts longer: a grant never shortens a record, so --days can only lengthen it (the output says
  when the earlier expiry stays).

  --did DID         who gets it: did:ethr:<chain>:0x…, or a 0x address
  --space BYTES     bytes of storage space; takes units (5GiB, 512MiB)
  --traffic BYTES   bytes of traffic; takes units
  --days N          how long the record lasts from now at least (default: the contract's
                    validity, 3 years unless the contract was set otherwise)
${chainOptions}`,
  prices: `Usage: stowage admin prices [--space WEI] [--traffic WEI] [--data-dir DIR]

  Without an option, prints the contract's unit prices, in wei per byte. With one or both, sets
  them (a contract call signed by the admin key) and prints the transaction hash once it is mined;
  a price not given keeps its value. Purchases made from then on pay the new prices.

  --space WEI       the price of a byte of storage space, a whole number of wei below 2^64
  --traffic WEI     the price of a byte of traffic, a whole number of wei below 2^64
${chainOptions}`,
  fund: `Usage: stowage admin fund ADDRESS AMOUNT_ETH [--data-dir DIR]

  Embedded chain only: sends AMOUNT_ETH (such as 10, or 0.5) of the chain's currency from the
  admin account to ADDRESS, for its deposits and gas. Prints the transaction hash once it is mined,
  then ADDRESS's balance. On a real chain, send currency with a wallet instead.

  ADDRESS           a 0x address (\`stowage whoami\` prints a user's)
  AMOUNT_ETH        a positive number of ETH, at most 18 decimals
${chainOptions}`,
} as const;

/** `stowage admin COMMAND --help`: that command's, or the list. */
export function adminHelpFor(sub: string | undefined): string {
  if (isOpsCommand(sub)) return opsHelp[sub];
  if (isBlockCommand(sub)) return blockCommandHelp[sub];
  return sub !== undefined && sub in chainHelp ? chainHelp[sub as keyof typeof chainHelp] : adminHelp;
}

async function confirm(access: Access, hash: Hash, out: Out) {
  const receipt = await access.publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new CliError(`transaction ${hash} reverted`);
  out(hash);
  return receipt;
}

async function grant(access: Access, flags: Map<string, string>, out: Out, log: Out) {
  const did = flags.get("--did");
  if (!did) throw new ConfigError("grant needs --did");
  const kinds = (["space", "traffic"] as const).filter((k) => flags.has(`--${k}`));
  if (kinds.length !== 1) throw new ConfigError("grant needs exactly one of --space BYTES or --traffic BYTES");
  const kind = kinds[0] as "space" | "traffic";
  const bytes = BigInt(parseFlag(flags, `--${kind}`, parseBytes));
  if (bytes <= 0n) throw new ConfigError(`--${kind} must be more than 0`);
  const days = flags.has("--days") ? parseFlag(flags, "--days", (v) => (/^\d+$/.test(v) && Number(v) > 0 ? Number(v) : fail("must be a whole number of days"))) : 0;
  const user = parseDidOrAddress(did, access.deployment.chainId);
  log(`granting ${bytes} bytes of free ${kind} to ${user.canonical}${days ? ` for ${days} days` : ""} …`);
  const { request } = await access.publicClient.simulateContract({
    account: access.admin,
    address: access.deployment.contracts.proxy,
    abi: proxyAbi,
    functionName: "grantFree",
    args: [user.address, KIND[kind], bytes, BigInt(days * 86400)],
  });
  const receipt = await confirm(access, await access.wallet.writeContract(request), out);
  const { proxy } = access.deployment.contracts;
  const [record, block, validity] = await Promise.all([
    access.publicClient.readContract({ address: proxy, abi: proxyAbi, functionName: kind === "space" ? "spaceRecord" : "trafficRecord", args: [user.address], blockNumber: receipt.blockNumber }),
    access.publicClient.getBlock({ blockNumber: receipt.blockNumber }),
    days ? undefined : access.publicClient.readContract({ address: proxy, abi: proxyAbi, functionName: "validity", blockNumber: receipt.blockNumber }),
  ]);
  // The contract keeps a record's later expiry: a grant asked for less leaves it where it was.
  const asked = block.timestamp + (validity ?? BigInt(days * 86400));
  const kept = record[4] > asked ? ` (the account's earlier record lasts longer than ${days ? `${days} days` : `the contract's validity, ${Number(validity) / 86400} days`})` : "";
  log(`${kind} of ${user.canonical}: free ${record[3]} bytes, purchased ${record[2]} bytes, expires ${new Date(Number(record[4]) * 1000).toISOString()}${kept}`);
}

async function prices(access: Access, flags: Map<string, string>, out: Out, log: Out) {
  const { proxy } = access.deployment.contracts;
  const read = async () => ({
    space: await access.publicClient.readContract({ address: proxy, abi: proxyAbi, functionName: "spacePrice" }),
    traffic: await access.publicClient.readContract({ address: proxy, abi: proxyAbi, functionName: "trafficPrice" }),
  });
  const current = await read();
  if (!flags.has("--space") && !flags.has("--traffic")) {
    out(`space ${current.space} wei/byte\ntraffic ${current.traffic} wei/byte`);
    return;
  }
  const wei = (v: string) => (/^\d+$/.test(v) && BigInt(v) < 2n ** 64n ? BigInt(v) : fail("must be a whole number of wei below 2^64"));
  const space = flags.has("--space") ? parseFlag(flags, "--space", wei) : current.space;
  const traffic = flags.has("--traffic") ? parseFlag(flags, "--traffic", wei) : current.traffic;
  log(`setting prices: space ${space} wei/byte, traffic ${traffic} wei/byte …`);
  const { request } = await access.publicClient.simulateContract({ account: access.admin, address: proxy, abi: proxyAbi, functionName: "setPrices", args: [space, traffic] });
  await confirm(access, await access.wallet.writeContract(request), out);
}

async function fund(access: Access, positionals: string[], out: Out, log: Out) {
  const [to, amount] = positionals;
  if (!to || !amount || positionals.length !== 2) throw new ConfigError("fund needs ADDRESS AMOUNT_ETH");
  if (!isAddress(to, { strict: false })) throw new ConfigError(`not an address: ${to}`);
  if (!/^\d+(\.\d{1,18})?$/.test(amount) || parseEther(amount) === 0n) throw new ConfigError(`AMOUNT_ETH must be a positive number: ${amount}`);
  if (!access.embedded) throw new CliError("fund works only on the embedded chain; on a real chain, send currency with a wallet");
  log(`sending ${amount} ETH to ${getAddress(to)} …`);
  await confirm(access, await access.wallet.sendTransaction({ to: getAddress(to), value: parseEther(amount) }), out);
  log(`balance of ${getAddress(to)}: ${formatEther(await access.publicClient.getBalance({ address: getAddress(to) }))} ETH`);
}

function fail(message: string): never {
  throw new ConfigError(message);
}

function parseFlag<T>(flags: Map<string, string>, name: string, parse: (v: string) => T): T {
  try {
    return parse(flags.get(name) as string);
  } catch (err) {
    throw new ConfigError(`${name}: ${(err as Error).message}`);
  }
}

const subcommands = {
  grant: { flags: ["--did", "--space", "--traffic", "--days"] },
  prices: { flags: ["--space", "--traffic"] },
  fund: { flags: [] },
} as const;

export async function runAdmin(argv: string[], env: Record<string, string | undefined>, out: Out = console.log, log: Out = (l) => console.error(l), tty = Boolean(process.stderr.isTTY)): Promise<number> {
  const [sub, ...rest] = argv;
  if (isOpsCommand(sub)) return runOps(sub, rest, env, { out, log, tty, status: (text) => void process.stderr.write(text) });
  if (isBlockCommand(sub)) return runBlock(sub, rest, env, out, log);
  if (!sub || !(sub in subcommands)) throw new ConfigError(sub ? `unknown admin command "${sub}"` : "admin needs a command: grant, prices, fund, backup, restore, check, usage, block, unblock or blocked");
  const spec = subcommands[sub as keyof typeof subcommands];
  const { flags, positionals } = parseArgs(rest, [...spec.flags, "--data-dir"]);
  if (sub !== "fund" && positionals.length) throw new ConfigError(`unexpected argument ${positionals[0]}`);
  const config = parseConfig(flags.has("--data-dir") ? ["--data-dir", flags.get("--data-dir") as string] : [], env);
  flags.delete("--data-dir");
  try {
    const access = await adminAccess(config);
    if (sub === "grant") await grant(access, flags, out, log);
    else if (sub === "prices") await prices(access, flags, out, log);
    else await fund(access, positionals, out, log);
    return 0;
  } catch (err) {
    if (err instanceof ConfigError || err instanceof CliError) throw err;
    throw new CliError(explainChainError(err));
  }
}
