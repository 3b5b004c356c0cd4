/**
 * What every user command shares: the common options (`--gateway`, `--key-file`, `--json`,
 * `--progress`), the user's key (STOWAGE_USER_KEY or a key file that only its owner can read),
 * connecting and logging in, and turning SDK, chain and network failures into one clear line.
 */
import { statSync, readFileSync } from "node:fs";
import { parseOptions } from "../args.ts";
import { BaseError, InsufficientFundsError } from "viem";
import { privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { ConfigError, parseConfig, type Env } from "../../config.ts";
import { explainChainError } from "../../chain/explain.ts";
import { AccountApiError } from "../../sdk/account.ts";
import { connectGateway } from "../../sdk/chain.ts";
import { connectStorage, StorageApiError, type StorageClient } from "../../sdk/storage.ts";
import { CliError } from "../chain-access.ts";

export type Out = (line: string) => void;

export interface Io {
  /** A line of the command's result (stdout). */
  out: Out;
  /** A line of commentary (stderr), never part of the result. */
  log: Out;
  /** Whether stderr is a terminal: progress shows by itself only then. */
  stderrTty: boolean;
  /** What `put -` reads (default: the process's stdin). */
  stdin?: () => ReadableStream<Uint8Array>;
}

export const defaultIo = (): Io => ({ out: (l) => console.log(l), log: (l) => console.error(l), stderrTty: Boolean(process.stderr.isTTY) });

/** The common options' help; `withKey` false for a command that needs no key (search). */
export const commonHelp = (withKey: boolean) =>
  [
    "Common options:",
    "  --gateway URL     the gateway (STOWAGE_GATEWAY; default http://localhost:8080)",
    ...(withKey
      ? [
          "  --key-file PATH   a file holding your 0x private key, readable by you alone (chmod 600);",
          "                    otherwise the key comes from STOWAGE_USER_KEY. Keys are never flags, so",
          "                    they never show in a process list.",
        ]
      : []),
    "Exit codes: 0 done, 1 failed (with the gateway's answer), 2 bad usage or configuration.",
  ].join("\n");

export const BACKENDS = ["dfs", "ipfs"] as const;
export type Backend = (typeof BACKENDS)[number];

export interface Spec {
  /** Options with a value, besides the common ones. */
  flags?: readonly string[];
  /** Options without a value. */
  switches?: readonly string[];
  /** Options that may repeat (`--keyword a --keyword b`); they have a value. */
  repeated?: readonly string[];
}

export interface Invocation {
  flags: Map<string, string>;
  repeated: Map<string, string[]>;
  positionals: string[];
  gateway: string;
  env: Env;
}

/** The short flags, one meaning each across all commands; a command takes those whose long form it has. */
export const SHORT: Readonly<Record<string, string>> = { "-o": "--out", "-j": "--json", "-q": "--quiet", "-n": "--name", "-t": "--to", "-f": "--from" };

/** The short flags a command takes, for its help. */
export function shortHelp(spec: Spec): string | undefined {
  const known = [...(spec.flags ?? []), ...(spec.switches ?? [])];
  const pairs = Object.entries(SHORT).filter(([, long]) => known.includes(long));
  return pairs.length ? `Short flags: ${pairs.map(([short, long]) => `${short} ${long}`).join(", ")}` : undefined;
}

/**
 * Parses a user command's arguments (node:util parseArgs, strict: an unknown option is an error)
 * and the gateway setting (flag over environment). "-" alone is a positional (`put -`).
 */
export function parseInvocation(argv: readonly string[], spec: Spec, env: Env): Invocation {
  const { flags, repeated, positionals } = parseOptions(argv, { ...spec, flags: [...(spec.flags ?? []), "--gateway", "--key-file"], short: SHORT });
  const config = parseConfig(flags.has("--gateway") ? ["--gateway", flags.get("--gateway") as string] : [], env, "client");
  return { flags, repeated, positionals, gateway: config.gateway, env };
}

export function backendOf(inv: Invocation, flag: "--to" | "--from"): Backend {
  const value = inv.flags.get(flag) ?? "dfs";
  if (!(BACKENDS as readonly string[]).includes(value)) throw new ConfigError(`${flag} must be dfs or ipfs (got ${JSON.stringify(value)})`);
  return value as Backend;
}

export function expectPositionals(inv: Invocation, names: readonly string[]): string[] {
  if (inv.positionals.length < names.length) throw new ConfigError(`missing ${names.slice(inv.positionals.length).join(" ")}`);
  if (inv.positionals.length > names.length) throw new ConfigError(`unexpected argument ${JSON.stringify(inv.positionals[names.length])}`);
  return inv.positionals;
}

const KEY = /^(0x)?[0-9a-fA-F]{64}$/;

/**
 * The user's key: `--key-file` when given (it wins, like any flag over the environment), else
 * STOWAGE_USER_KEY. A key file that its group or others may read is refused, as the server refuses
 * its own secrets: a key that others could have read is a key to replace.
 */
export function userAccount(inv: Invocation): PrivateKeyAccount {
  const file = inv.flags.get("--key-file");
  if (file !== undefined) {
    let mode: number;
    try {
      const st = statSync(file);
      if (!st.isFile()) throw new ConfigError(`--key-file ${file} is not a file`);
      mode = st.mode & 0o777;
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      throw new ConfigError(`--key-file ${file}: ${(err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (err as Error).message}`);
    }
    if (mode & 0o077) throw new ConfigError(`--key-file ${file} is readable by others (mode ${mode.toString(8)}): run chmod 600 on it, and replace the key if others may have read it`);
    const text = readFileSync(file, "utf8").trim();
    if (!KEY.test(text)) throw new ConfigError(`--key-file ${file} does not hold a 32-byte hex private key`);
    return privateKeyToAccount((text.startsWith("0x") ? text : `0x${text}`) as `0x${string}`);
  }
  // parseConfig has checked its form already (and never echoes a key in its message).
  const key = parseConfig([], inv.env, "client").userKey;
  if (!key) throw new ConfigError("no key: set STOWAGE_USER_KEY to your 0x private key, or pass --key-file PATH (a file only you can read)");
  return privateKeyToAccount(key);
}

/** Connects to the gateway's storage side with the user's key and logs in (EIP-712, D4). */
export async function loggedIn(inv: Invocation, account: PrivateKeyAccount, o: { fetch?: typeof fetch } = {}): Promise<StorageClient> {
  const store = await reach(inv.gateway, () => connectStorage({ baseUrl: inv.gateway, account, ...(o.fetch ? { fetch: o.fetch } : {}) }));
  await store.login();
  return store;
}

/** The chain side of the gateway (deposits, the directory), with the user's key. */
export async function gatewayWith(inv: Invocation, account?: PrivateKeyAccount) {
  return reach(inv.gateway, () => connectGateway(inv.gateway, account ? { account } : {}));
}

/** Runs the first call to a gateway; failing it means the URL is wrong or the server is down. */
export async function reach<T>(gateway: string, first: () => Promise<T>): Promise<T> {
  try {
    return await first();
  } catch (err) {
    if (isNetworkError(err)) throw new CliError(`cannot reach the gateway at ${gateway} (${(err as { code: string }).code}): is \`stowage serve\` running there? Set --gateway or STOWAGE_GATEWAY`);
    if (err instanceof SyntaxError) throw new CliError(`${gateway} is not a Stowage gateway: GET /chain did not answer JSON`);
    if (err instanceof Error && /^GET \/chain answered/.test(err.message)) throw new CliError(`${gateway} is not a Stowage gateway: ${err.message}`);
    throw err;
  }
}

function isNetworkError(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === "string" && /^(ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ConnectionRefused|ConnectionClosed|FailedToOpenSocket|UnableToConnect)$/.test(code);
}

/** For answers without a body (HEAD, 416). */
const STATUS_TEXT: Record<number, string> = {
  404: "not found",
  416: "the range lies outside the file",
};

const HINTS: Record<number, string> = {
  402: " (see `stowage quota`, `stowage deposit` and `stowage buy`)",
  401: " (is the key right, and the computer's clock?)",
  429: " (every command logs in, and the gateway limits logins a minute: try again shortly)",
};

/**
 * The gateway's words name the API call that helps (every client reads them); here, the command
 * that makes it. A voucher is signed afresh by each run of a command.
 */
const COMMANDS: readonly [string, string][] = [
  ["(GET /dfs/buyspace)", "(`stowage buy --space BYTES`)"],
  ["(GET /dfs/buytraffic)", "(`stowage buy --traffic BYTES`)"],
  ["sign a new one (GET /traffichash)", "run the command again (it signs a new one)"],
];
const inCommands = (text: string) => COMMANDS.reduce((t, [api, cli]) => t.replaceAll(api, cli), text);

/** How an account with no currency gets some: its address, and whoever can send to it. */
const GET_CURRENCY = "have some sent to your address (`stowage whoami` prints it) from a wallet, or, on a gateway's embedded chain, by its operator (`stowage admin fund ADDRESS AMOUNT_ETH`); `stowage login` shows your balance";

/** A call estimated for an account without currency: the chain allows it no gas at all (anvil:
 * "gas required exceeds allowance: 0", geth: "… allowance (0)"). */
const NO_GAS = /gas required exceeds allowance(?::\s*|\s*\()0\b/;

/** One line for any failure: the gateway's own words for an HTTP error, the revert reason of a
 * transaction, or why the gateway was not reached. */
export function explain(err: unknown, gateway: string): Error {
  if (err instanceof ConfigError || err instanceof CliError) return err;
  if (err instanceof StorageApiError) {
    const { Code, Description } = err.body;
    const what = [Code, Description ?? STATUS_TEXT[err.status]].filter(Boolean).join(": ");
    return new CliError(`the gateway answered ${err.status}${what ? ` ${inCommands(what)}` : ""}${HINTS[err.status] ?? ""}`);
  }
  if (err instanceof AccountApiError) return new CliError(`the gateway answered ${err.status} ${err.error}: ${inCommands(err.message)}${HINTS[err.status] ?? ""}`);
  if (err instanceof BaseError && NO_GAS.test(err.message)) return new CliError(`your account has no currency to pay for gas: ${GET_CURRENCY}`);
  if (err instanceof BaseError && err.walk((e) => e instanceof InsufficientFundsError)) return new CliError(`${explainChainError(err)}: ${GET_CURRENCY}`);
  if (err instanceof BaseError) return new CliError(explainChainError(err));
  if (isNetworkError(err)) return new CliError(`lost the gateway at ${gateway}: ${(err as Error).message}`);
  return new CliError(err instanceof Error ? err.message : String(err));
}

const UNIT_S: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 7 * 86400 };

/** `--expires`: 0 (none), unix seconds, or a duration from now such as 90d or 12h. */
export function parseExpiry(raw: string | undefined, nowS: number): number {
  if (raw === undefined || raw === "0") return 0;
  const d = /^(\d{1,6})(s|m|h|d|w)$/.exec(raw);
  if (d) return nowS + Number(d[1]) * (UNIT_S[d[2] as string] as number);
  if (/^\d{1,12}$/.test(raw)) {
    const at = Number(raw);
    if (at <= nowS) throw new ConfigError(`--expires ${raw} is in the past (unix seconds); use a duration such as 90d, or 0 for none`);
    return at;
  }
  throw new ConfigError(`--expires must be 0 (none), unix seconds, or a duration such as 3600s, 12h, 90d, 2w (got ${JSON.stringify(raw)})`);
}

// ---- formatting ----

/** Bytes for people; a bigint (a uint64 from the chain, or a sum of them) to one decimal too. */
export function formatBytes(n: number | bigint): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB"];
  let v = Number(n) / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

/** An ISO time to the second, in UTC. */
export const formatTime = (d: Date) => `${d.toISOString().slice(0, 19)}Z`;

/** Left-aligned columns, two spaces apart; the last column is not padded. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)];
}

export const json = (value: unknown) => JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v), 2);
