/**
 * Every setting of Stowage in one typed place.
 *
 * A setting comes from a command-line flag, else from its environment variable, else from its
 * default. The catalog below is data: `--help`, the README table and the parser all read it.
 *
 * @example
 *   const config = parseConfig(["--port", "9000"], process.env)
 *   config.port // 9000
 */
import { resolve } from "node:path";
import { parseOptions } from "./cli/args.ts";
import { ConfigError } from "./config-error.ts";
import { parseSiteOrigin, sameOrigin } from "./gateway/site.ts";

export type Env = Record<string, string | undefined>;

/** The process environment; read here and nowhere else. */
export const processEnv: Env = process.env;

export { ConfigError };

/** Who reads a setting: the server and its operator commands, or the user commands. */
export type Scope = "server" | "client";

type Kind = "port" | "int" | "bytes" | "duration" | "string" | "url" | "postgresUrl" | "list" | "address" | "addressList" | "key" | "hostPort" | "siteOrigin";

interface Setting<K extends Kind = Kind> {
  kind: K;
  env: string;
  /** Flag of `stowage serve`; secrets have none, so they never show in a process list. */
  flag?: string;
  /** "client": a setting of the user commands (put, get, …), not of the server. */
  scope?: Scope;
  default?: string;
  /** An empty environment value is this setting's value (off), not "unset, take the default". */
  emptyIsValue?: boolean;
  /** The only values allowed, when the setting is one of a few words. */
  choices?: readonly string[];
  /** 0 is refused (an interval of 0 ms: a poll that would loop on the chain's RPC). */
  positive?: true;
  help: string;
}

const setting = <const S extends Setting>(s: S) => s;

/** The catalog. Order is the order of `--help` and of the README table. */
export const settings = {
  port: setting({ kind: "port", env: "STOWAGE_PORT", flag: "--port", default: "8080", help: "HTTP port (0 picks a free one)" }),
  host: setting({ kind: "string", env: "STOWAGE_HOST", flag: "--host", default: "0.0.0.0", help: "Address to listen on" }),
  dataDir: setting({ kind: "string", env: "STOWAGE_DATA_DIR", flag: "--data-dir", default: "./data", help: "Data directory (database, files, chain, secrets)" }),
  publicUrl: setting({ kind: "url", env: "STOWAGE_PUBLIC_URL", flag: "--public-url", help: "Address clients are told to use for downloads (default http://HOST:PORT)" }),
  logLevel: setting({ kind: "string", env: "STOWAGE_LOG_LEVEL", flag: "--log-level", default: "info", choices: ["debug", "info", "warn", "error"], help: "debug | info | warn | error" }),
  shutdownTimeout: setting({ kind: "duration", env: "STOWAGE_SHUTDOWN_TIMEOUT", flag: "--shutdown-timeout", default: "8s", help: "How long SIGTERM waits for in-flight requests" }),
  maxBody: setting({ kind: "bytes", env: "STOWAGE_MAX_BODY", flag: "--max-body", default: "10GiB", help: "Largest upload body" }),
  minBodyRate: setting({ kind: "bytes", env: "STOWAGE_MIN_BODY_RATE", flag: "--min-body-rate", default: "1KiB", help: "Slowest request body accepted, in bytes per second over each 10 s the server waits for it (both ports): a slower one is cut, as a body silent for 10 s is; uploads at any real rate may take hours. 0 = no minimum" }),
  corsOrigins: setting({ kind: "list", env: "STOWAGE_CORS_ORIGINS", flag: "--cors-origins", default: "", help: "Comma-separated origins allowed by CORS (empty: none)" }),
  metricsListen: setting({ kind: "hostPort", env: "STOWAGE_METRICS_LISTEN", flag: "--metrics-listen", default: "127.0.0.1:9464", emptyIsValue: true, help: "Where GET /metrics (Prometheus) listens, never on the public port; off (or empty) = none" }),
  trustProxy: setting({ kind: "int", env: "STOWAGE_TRUST_PROXY", flag: "--trust-proxy", default: "0", help: "Number of reverse proxies whose X-Forwarded-For is trusted" }),
  chainRpc: setting({ kind: "url", env: "STOWAGE_CHAIN_RPC", flag: "--chain-rpc", help: "EVM JSON-RPC URL (unset: embedded chain)" }),
  embeddedChain: setting({ kind: "string", env: "STOWAGE_EMBEDDED_CHAIN", flag: "--embedded-chain", default: "auto", choices: ["auto", "anvil", "evm"], help: "Engine of the embedded chain: anvil in a private network namespace, evm in-process, auto (anvil where the host allows namespaces)" }),
  chainId: setting({ kind: "int", env: "STOWAGE_CHAIN_ID", flag: "--chain-id", default: "985", help: "Chain id" }),
  chainConfirmations: setting({ kind: "int", env: "STOWAGE_CHAIN_CONFIRMATIONS", flag: "--chain-confirmations", help: "Blocks an event waits before it is indexed (default 0 embedded, 6 external)" }),
  chainPoll: setting({ kind: "duration", env: "STOWAGE_CHAIN_POLL", flag: "--chain-poll", positive: true, help: "How often a sent transaction's receipt is polled for (default 25ms embedded, 2s external; a chain with fast blocks wants less)" }),
  indexerPoll: setting({ kind: "duration", env: "STOWAGE_INDEXER_POLL", flag: "--indexer-poll", default: "2s", positive: true, help: "How often the event indexer polls the chain" }),
  rpcRate: setting({ kind: "int", env: "STOWAGE_RPC_RATE", flag: "--rpc-rate", default: "600", help: "Calls a minute one client (an IPv4 address, an IPv6 /64) may make to the public /rpc, each entry of a batch counting one; 0 = no limit" }),
  rpcMaxBatch: setting({ kind: "int", env: "STOWAGE_RPC_MAX_BATCH", flag: "--rpc-max-batch", default: "20", positive: true, help: "Entries of one JSON-RPC batch to /rpc at most" }),
  rpcGasCap: setting({ kind: "int", env: "STOWAGE_RPC_GAS_CAP", flag: "--rpc-gas-cap", default: "5000000", positive: true, help: "Gas one eth_call or eth_estimateGas through /rpc may use (never more than the chain's block gas limit); a larger gas is refused" }),
  rpcBatchGas: setting({ kind: "int", env: "STOWAGE_RPC_BATCH_GAS", flag: "--rpc-batch-gas", default: "30000000", positive: true, help: "Gas the eth_call and eth_estimateGas entries of one /rpc request may use together (never more than the chain's block gas limit); entries that name no gas share it" }),
  rpcTimeout: setting({ kind: "duration", env: "STOWAGE_RPC_TIMEOUT", flag: "--rpc-timeout", default: "5s", positive: true, help: "Wall-clock time the calls of one /rpc request have; a call still running then ends with a JSON-RPC error" }),
  rpcSimulations: setting({ kind: "int", env: "STOWAGE_RPC_SIMULATIONS", flag: "--rpc-simulations", default: "1", positive: true, help: "eth_call and eth_estimateGas entries of /rpc running at once, all clients together (with the in-process EVM, each runs in a thread of its own)" }),
  rpcLogBlocks: setting({ kind: "int", env: "STOWAGE_RPC_LOG_BLOCKS", flag: "--rpc-log-blocks", default: "10000", positive: true, help: "Blocks one eth_getLogs through /rpc may span; a wider range is refused with a JSON-RPC error" }),
  rpcMaxLogs: setting({ kind: "int", env: "STOWAGE_RPC_MAX_LOGS", flag: "--rpc-max-logs", default: "10000", positive: true, help: "Logs the eth_getLogs entries of one /rpc request may return together; an entry that would pass it is refused with a JSON-RPC error" }),
  proxyAddress: setting({ kind: "address", env: "STOWAGE_PROXY_ADDRESS", flag: "--proxy-address", help: "Proxy contract (external chain)" }),
  didRegistryAddress: setting({ kind: "address", env: "STOWAGE_DID_REGISTRY_ADDRESS", flag: "--did-registry-address", help: "DID registry contract (external chain)" }),
  directoryAddress: setting({ kind: "address", env: "STOWAGE_DIRECTORY_ADDRESS", flag: "--directory-address", help: "Directory contract (external chain)" }),
  contractsBlock: setting({ kind: "int", env: "STOWAGE_CONTRACTS_BLOCK", flag: "--contracts-block", default: "0", help: "Block the configured contracts were deployed at: event indexing starts there" }),
  jwtKey: setting({ kind: "key", env: "STOWAGE_JWT_KEY", help: "HMAC key of the account API's tokens, 0x + 64 hex digits; every gateway of a cluster sets the same (default: generated in data/secrets)" }),
  secretsKey: setting({ kind: "key", env: "STOWAGE_SECRETS_KEY", help: "AES-256 key that encrypts stored secrets (S3 access-key secrets), 0x + 64 hex digits; every gateway of a cluster sets the same (default: generated in data/secrets)" }),
  ageIdentity: setting({ kind: "string", env: "STOWAGE_AGE_IDENTITY", help: "This gateway's own age key (AGE-SECRET-KEY-1…): sellers of encrypted files escrow each file's key to it, so that it can hand the key to buyers; every gateway of a cluster sets the same (default: generated in data/secrets)" }),
  operatorKey: setting({ kind: "key", env: "STOWAGE_OPERATOR_KEY", help: "Operator private key (default: generated in data/secrets)" }),
  adminKey: setting({ kind: "key", env: "STOWAGE_ADMIN_KEY", help: "Admin private key for the CLI (default: generated in data/secrets)" }),
  dfsScrubEvery: setting({ kind: "duration", env: "STOWAGE_DFS_SCRUB_EVERY", flag: "--dfs-scrub-every", default: "7d", help: "Local blob store: every dfs chunk is read and hashed again at least this often, to find chunks the disk damaged (chunks never checked are hashed at start); 0 = only at start" }),
  ipfsListen: setting({ kind: "list", env: "STOWAGE_IPFS_LISTEN", flag: "--ipfs-listen", default: "/ip4/0.0.0.0/tcp/4001", help: "libp2p listen multiaddrs, comma-separated" }),
  pinTimeout: setting({ kind: "duration", env: "STOWAGE_PIN_TIMEOUT", flag: "--pin-timeout", default: "10m", positive: true, help: "How long a remote pin (Pinning Service API, /psa) may take to fetch its DAG before it is marked failed" }),
  pinQueue: setting({ kind: "int", env: "STOWAGE_PIN_QUEUE", flag: "--pin-queue", default: "100", positive: true, help: "Remote pins one account may have queued or pinning at once; more are refused with 429" }),
  pinOrigins: setting({ kind: "string", env: "STOWAGE_PIN_ORIGINS", flag: "--pin-origins", default: "public", choices: ["public", "any"], help: "public: a pin's origins on loopback or private addresses are not dialled (the gateway does not probe its own network for a client); any: every origin is" }),
  ipfsPeers: setting({ kind: "list", env: "STOWAGE_IPFS_PEERS", flag: "--ipfs-peers", default: "", help: "Other gateways' libp2p multiaddrs, each ending in /p2p/<peer id>, kept dialled (a cluster's gateways list each other)" }),
  s3ApiPort: setting({ kind: "port", env: "STOWAGE_S3_API_PORT", flag: "--s3-api-port", default: "9000", help: "Port of the S3-compatible API for aws-cli, rclone and S3 SDKs (0: off)" }),
  s3Endpoint: setting({ kind: "url", env: "STOWAGE_S3_ENDPOINT", flag: "--s3-endpoint", help: "S3-compatible object store for dfs chunks and ipfs blocks, such as http://rgw.internal:7480 (unset: files in the data dir)" }),
  s3Bucket: setting({ kind: "string", env: "STOWAGE_S3_BUCKET", flag: "--s3-bucket", help: "Bucket in the object store (required with STOWAGE_S3_ENDPOINT)" }),
  s3Region: setting({ kind: "string", env: "STOWAGE_S3_REGION", flag: "--s3-region", default: "us-east-1", help: "Region the object store's requests are signed for" }),
  s3Prefix: setting({ kind: "string", env: "STOWAGE_S3_PREFIX", flag: "--s3-prefix", default: "", help: "Put before every object key, such as stowage/ (one bucket or prefix per deployment)" }),
  s3AccessKeyId: setting({ kind: "string", env: "STOWAGE_S3_ACCESS_KEY_ID", help: "Access key id for the object store" }),
  s3SecretAccessKey: setting({ kind: "string", env: "STOWAGE_S3_SECRET_ACCESS_KEY", help: "Secret access key for the object store" }),
  databaseUrl: setting({ kind: "postgresUrl", env: "STOWAGE_DATABASE_URL", help: "PostgreSQL shared by many gateways, such as postgres://stowage:PASSWORD@db.internal:5432/stowage (unset: SQLite in the data dir)" }),
  databasePool: setting({ kind: "int", env: "STOWAGE_DATABASE_POOL", flag: "--database-pool", default: "10", positive: true, help: "Connections this gateway opens to PostgreSQL at most (with STOWAGE_DATABASE_URL); an upload waiting for its account's row lock holds one. Every gateway's pool counts against the server's max_connections" }),
  smtpUrl: setting({ kind: "url", env: "STOWAGE_SMTP_URL", help: "SMTP URL for mail (unset: dev mailbox in data/mail)" }),
  mailFrom: setting({ kind: "string", env: "STOWAGE_MAIL_FROM", flag: "--mail-from", default: "Stowage <no-reply@localhost>", help: "Sender of login codes" }),
  allowedOrigins: setting({ kind: "list", env: "STOWAGE_ALLOWED_ORIGINS", flag: "--allowed-origins", default: "http://localhost:8080", help: "Origins allowed in EVM sign-in and session-grant messages (the wallet checks them against the page that asks)" }),
  messengerBotToken: setting({ kind: "string", env: "STOWAGE_MESSENGER_BOT_TOKEN", help: "Messenger bot token for init data checks" }),
  messengerMaxAge: setting({ kind: "duration", env: "STOWAGE_MESSENGER_MAX_AGE", flag: "--messenger-max-age", default: "1d", help: "Oldest messenger init data accepted" }),
  browserJwksUrl: setting({ kind: "url", env: "STOWAGE_BROWSER_JWKS_URL", flag: "--browser-jwks-url", help: "JWKS of the browser wallet provider" }),
  browserIssuer: setting({ kind: "string", env: "STOWAGE_BROWSER_ISSUER", flag: "--browser-issuer", help: "Expected issuer of browser wallet tokens" }),
  browserAudience: setting({ kind: "string", env: "STOWAGE_BROWSER_AUDIENCE", flag: "--browser-audience", help: "Expected audience of browser wallet tokens" }),
  adminAddresses: setting({ kind: "addressList", env: "ADMIN_ADDRESSES", flag: "--admin-addresses", default: "", help: "Comma-separated addresses whose accounts are admin" }),
  accessTokenTtl: setting({ kind: "duration", env: "STOWAGE_ACCESS_TOKEN_TTL", flag: "--access-token-ttl", default: "15m", help: "Access token lifetime" }),
  refreshTokenTtl: setting({ kind: "duration", env: "STOWAGE_REFRESH_TOKEN_TTL", flag: "--refresh-token-ttl", default: "30d", help: "Refresh token lifetime" }),
  sessionMaxAge: setting({ kind: "duration", env: "STOWAGE_SESSION_MAX_AGE", flag: "--session-max-age", default: "90d", positive: true, help: "Longest a login session lasts from its login, however often it is refreshed; then its user logs in again" }),
  passwordHashes: setting({ kind: "int", env: "STOWAGE_PASSWORD_HASHES", flag: "--password-hashes", default: "0", help: "Password hashes (argon2id, 64 MiB each) this gateway runs at once; a few more wait, any beyond answer 503; 0 = one per CPU core" }),
  renewalDays: setting({ kind: "int", env: "STOWAGE_RENEWAL_DAYS", flag: "--renewal-days", default: "30", help: "Days that must pass between two liveness-check renewals (points records)" }),
  publicEgress: setting({ kind: "bytes", env: "STOWAGE_PUBLIC_EGRESS", flag: "--public-egress", default: "1GiB", help: "Bytes of an owner's public ipfs content the trustless gateway (/ipfs/<cid> as a raw block or CAR) serves per UTC day, paid by the operator; 0 = off" }),
  publicEgressPerClient: setting({ kind: "bytes", env: "STOWAGE_PUBLIC_EGRESS_PER_CLIENT", flag: "--public-egress-per-client", default: "1GiB", help: "Bytes of public ipfs content one client address (IPv6: its /64) may fetch per hour from this gateway; 0 = no limit" }),
  gatewayOrigin: setting({ kind: "siteOrigin", env: "STOWAGE_GATEWAY_ORIGIN", flag: "--gateway-origin", help: "Separate origin that serves public ipfs content as sites, such as https://{cid}.ipfs.gw.example (a subdomain gateway: one origin per CID) or https://gw.example; browsers opening /ipfs/<cid> here are sent there. Unset: files are served here, never run" }),
  denylist: setting({ kind: "list", env: "STOWAGE_DENYLIST", flag: "--denylist", default: "", help: "Compact denylist files (IPIP-383), comma-separated: their content answers 410 and is refused on upload; read again when they change" }),
  rateLimits: setting({ kind: "string", env: "STOWAGE_RATE_LIMITS", flag: "--rate-limits", default: "on", choices: ["on", "off"], help: "on | off: rate limits of the login, code and access-key (POST /v2/keys) endpoints" }),
  gateway: setting({ scope: "client", kind: "url", env: "STOWAGE_GATEWAY", flag: "--gateway", default: "http://localhost:8080", help: "Gateway the user commands (login, put, get, …) talk to" }),
  userKey: setting({ scope: "client", kind: "key", env: "STOWAGE_USER_KEY", help: "The user's private key for the user commands (or their --key-file PATH)" }),
  encrypt: setting({ scope: "client", kind: "string", env: "STOWAGE_ENCRYPT", default: "off", choices: ["on", "off"], help: "on: \`stowage put\` encrypts every file on this computer (age) unless --plain; off: only with --encrypt" }),
} as const;

export type SettingName = keyof typeof settings;

type ValueOf<K extends Kind> = K extends "port" | "int" | "bytes" | "duration"
  ? number
  : K extends "list" | "addressList"
    ? string[]
    : K extends "address" | "key"
      ? `0x${string}`
      : string;

type Catalog = typeof settings;
type HasDefault<S> = S extends { default: string } ? true : false;

export type Config = {
  readonly [N in SettingName]: HasDefault<Catalog[N]> extends true
    ? ValueOf<Catalog[N]["kind"]>
    : ValueOf<Catalog[N]["kind"]> | undefined;
} & { readonly publicUrl: string };

const UNITS: Record<string, number> = { "": 1, b: 1, k: 1e3, kb: 1e3, m: 1e6, mb: 1e6, g: 1e9, gb: 1e9, t: 1e12, tb: 1e12, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40 };
const SECONDS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 };

/** Parsers by kind; durations are returned in milliseconds. */
const parsers: { [K in Kind]: (raw: string) => ValueOf<K> } = {
  port: (raw) => {
    const n = parseInteger(raw);
    if (n > 65535) throw new ConfigError("must be a port number 0-65535");
    return n;
  },
  int: parseInteger,
  bytes: parseBytes,
  duration: (raw) => {
    const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$/.exec(raw.trim());
    if (!m) throw new ConfigError("must be a duration such as 500ms, 30s, 15m, 12h or 30d");
    return Math.round(Number(m[1]) * (SECONDS[m[2] ?? "s"] ?? 1) * 1000);
  },
  string: (raw) => raw,
  url: (raw) => {
    try {
      return new URL(raw).toString().replace(/\/$/, "");
    } catch {
      throw new ConfigError("must be an absolute URL");
    }
  },
  // Holds a password: never echoed back in an error (see parseConfig).
  postgresUrl: (raw) => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new ConfigError("must be a postgres:// URL");
    }
    if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") throw new ConfigError("must be a postgres:// URL");
    return raw;
  },
  list: splitList,
  // Empty turns the listener off.
  hostPort: (raw) => {
    const value = raw.trim();
    if (value === "" || value === "off") return "";
    const m = /^(\[[0-9a-fA-F:.]+\]|[^:\s[\]]+):(\d{1,5})$/.exec(value);
    if (!m || Number(m[2]) > 65535) throw new ConfigError("must be HOST:PORT, such as 127.0.0.1:9464 (port 0 picks a free one), or off (or empty)");
    return value;
  },
  address: (raw) => {
    if (!/^0x[0-9a-fA-F]{40}$/.test(raw)) throw new ConfigError("must be a 0x-prefixed 20-byte hex address");
    return raw as `0x${string}`;
  },
  addressList: (raw) => splitList(raw).map((a) => a.toLowerCase()),
  siteOrigin: (raw) => {
    try {
      return parseSiteOrigin(raw).text;
    } catch (err) {
      throw new ConfigError((err as Error).message);
    }
  },
  key: (raw) => {
    if (!/^0x[0-9a-fA-F]{64}$/.test(raw)) throw new ConfigError("must be a 0x-prefixed 32-byte hex key");
    return raw as `0x${string}`;
  },
};

/** A byte count with an optional unit: 1048576, 512MiB, 10GiB, 1.5GB. */
export function parseBytes(raw: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(raw.trim());
  const unit = UNITS[(m?.[2] ?? "").toLowerCase()];
  if (!m || unit === undefined) throw new ConfigError("must be a size such as 1048576, 512MiB or 10GiB");
  return Math.floor(Number(m[1]) * unit);
}

function parseInteger(raw: string): number {
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError("must be a non-negative integer");
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new ConfigError("is too large");
  return n;
}

function splitList(raw: string): string[] {
  return raw.split(",").map((s) => s.trim()).filter(Boolean);
}

const scopeOf = (s: Setting): Scope => s.scope ?? "server";

const flagsOf = (scope: Scope) =>
  new Map<string, SettingName>(
    (Object.entries(settings) as [SettingName, Setting][]).flatMap(([name, s]) => (s.flag && scopeOf(s) === scope ? [[s.flag, name]] : [])),
  );

/** The settings given as flags (`--name value` or `--name=value`), by setting name; anything else is an error. */
export function parseFlags(argv: readonly string[], scope: Scope = "server"): Map<SettingName, string> {
  const byFlag = flagsOf(scope);
  const { flags, positionals } = parseOptions(argv, { flags: [...byFlag.keys()] });
  if (positionals.length > 0) throw new ConfigError(`unknown option ${positionals[0]}`);
  return new Map([...flags].map(([flag, value]) => [byFlag.get(flag) as SettingName, value]));
}

/** Builds the config from flags (first) and the environment (second). Throws ConfigError. */
export function parseConfig(argv: readonly string[], env: Env = processEnv, scope: Scope = "server"): Config {
  const flags = parseFlags(argv, scope);
  const values: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(settings) as [SettingName, Setting][]) {
    const raw = flags.get(name) ?? (s.emptyIsValue ? env[s.env] : nonEmpty(env[s.env])) ?? s.default;
    if (raw === undefined) continue;
    try {
      if (s.choices && !s.choices.includes(raw)) throw new ConfigError(`must be one of ${s.choices.join(", ")}`);
      values[name] = parsers[s.kind](raw);
      if (s.positive && values[name] === 0) throw new ConfigError("must be more than 0");
    } catch (err) {
      // The other side's settings never stop this one: a bad STOWAGE_USER_KEY does not stop a server.
      if (scopeOf(s) !== scope) continue;
      const where = flags.has(name) ? s.flag : s.env;
      throw new ConfigError(`${where}: ${(err as Error).message} (got ${JSON.stringify(s.kind === "key" || s.kind === "postgresUrl" ? "…" : raw)})`);
    }
  }
  if (scope === "server") checkS3(values);
  values.dataDir = resolve(values.dataDir as string);
  values.publicUrl ??= `http://${values.host === "0.0.0.0" ? "localhost" : values.host}:${values.port}`;
  // Sites on the console's own origin would run with the console's storage: the very thing the separate origin prevents.
  if (typeof values.gatewayOrigin === "string" && sameOrigin(parseSiteOrigin(values.gatewayOrigin), values.publicUrl as string)) {
    throw new ConfigError("STOWAGE_GATEWAY_ORIGIN: must be another origin than STOWAGE_PUBLIC_URL: sites there would run beside the console");
  }
  return values as Config;
}

const S3_NEEDS = ["s3Bucket", "s3AccessKeyId", "s3SecretAccessKey"] as const;

/** An object store is all or nothing: half its settings would silently keep content on local disk
 * (no endpoint) or fail at the first upload (no bucket or keys). */
function checkS3(values: Record<string, unknown>): void {
  if (values.s3Endpoint !== undefined) {
    for (const n of S3_NEEDS) if (values[n] === undefined) throw new ConfigError(`${settings[n].env}: must be set when STOWAGE_S3_ENDPOINT is`);
  } else {
    for (const n of S3_NEEDS) if (values[n] !== undefined) throw new ConfigError(`STOWAGE_S3_ENDPOINT: must be set when ${settings[n].env} is (or unset ${settings[n].env} to keep content in the data dir)`);
  }
  // The prefix begins blob keys (src/blob/store.ts): the same characters, and no leading slash.
  const prefix = values.s3Prefix as string;
  if (!/^(?:[A-Za-z0-9._=-]+\/)*[A-Za-z0-9._=-]*$/.test(prefix) || prefix.split("/").some((s) => s === "." || s === "..")) throw new ConfigError(`STOWAGE_S3_PREFIX: must be letters, digits, . _ = - and / between them, such as stowage/ (got ${JSON.stringify(prefix)})`);
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === "" ? undefined : v;
}

/** Lines for `--help` and the README: flag, variable, default, meaning. */
export function describeSettings(scope?: Scope): string[] {
  return (Object.values(settings) as Setting[]).filter((s) => scope === undefined || scopeOf(s) === scope).map((s) => {
    const flag = s.flag ? `${s.flag} ` : "";
    const def = s.default !== undefined ? ` [default: ${s.default === "" ? "empty" : s.default}]` : "";
    return `  ${`${flag}(${s.env})`.padEnd(52)} ${s.help}${def}`;
  });
}
