/**
 * The user commands other than the transfers: login, ls, rm, quota, deposit, buy, publish and
 * search. Each is a thin wrapper over one or two SDK calls; printing is the only thing added.
 */
import { formatEther, formatGwei, getAddress, isAddress, parseEther, type Address } from "viem";
import { ConfigError, parseBytes } from "../../config.ts";
import { connectDirectory } from "../../sdk/directory.ts";
import { StorageApiError, type FileEntry, type QuotaRecord } from "../../sdk/storage.ts";
import { CliError } from "../chain-access.ts";
import { encryptionWith, ownFile } from "./encryption.ts";
import { BACKENDS, backendOf, expectPositionals, formatBytes, formatTime, gatewayWith, json, loggedIn, reach, table, userAccount, type Invocation, type Io } from "./common.ts";

export async function login(inv: Invocation, io: Io): Promise<number> {
  expectPositionals(inv, []);
  const account = userAccount(inv);
  const store = await loggedIn(inv, account);
  const gw = await gatewayWith(inv);
  const balance = await gw.publicClient.getBalance({ address: account.address });
  const { chainId, rpcUrl, contracts, seller } = store.info;
  if (inv.flags.has("--json")) {
    io.out(json({ did: store.did, address: account.address, gateway: inv.gateway, chainId, rpcUrl, contracts, seller, balanceWei: balance }));
    return 0;
  }
  io.out(`did      ${store.did}`);
  io.out(`gateway  ${inv.gateway}`);
  io.out(`chain    ${chainId} (rpc ${rpcUrl}, proxy ${contracts.proxy})`);
  io.out(`seller   ${seller}`);
  io.out(`balance  ${formatEther(balance)} ETH (for deposits and gas)`);
  return 0;
}

export async function ls(inv: Invocation, io: Io): Promise<number> {
  expectPositionals(inv, []);
  const kind = backendOf(inv, "--from");
  const store = await loggedIn(inv, userAccount(inv));
  const entries: FileEntry[] = [];
  const PAGE = 1000;
  for (let after: number | undefined; ; ) {
    const page = (await store.list(kind, { limit: PAGE, ...(after !== undefined ? { after } : {}) })).Object;
    entries.push(...page);
    if (page.length < PAGE) break;
    after = page[page.length - 1]?.ID;
  }
  if (inv.flags.has("--json")) {
    io.out(json(entries));
    return 0;
  }
  if (!entries.length) {
    io.log(`no files on ${kind}`);
    return 0;
  }
  const rows = entries.map((e) => [String(e.ID), formatBytes(e.Size), e.Name, e.Cid, formatTime(new Date(e.ModTime))]);
  for (const line of table(["ID", "SIZE", "NAME", "CID", "MODIFIED"], rows)) io.out(line);
  return 0;
}

export async function rm(inv: Invocation, io: Io): Promise<number> {
  const [id] = expectPositionals(inv, ["ID"]) as [string];
  if (!/^\d{1,15}$/.test(id)) throw new ConfigError(`ID must be a file's number, as \`stowage ls\` shows it (got ${JSON.stringify(id)})`);
  const store = await loggedIn(inv, userAccount(inv));
  try {
    await store.delete(Number(id), "dfs");
  } catch (err) {
    // The gateway deletes dfs files only, so an ID of `ls --from ipfs` is one it does not find.
    if (err instanceof StorageApiError && err.status === 404) throw new CliError(`${id} is not the ID of one of your dfs files (see \`stowage ls\`); files on ipfs cannot be deleted`);
    throw err;
  }
  io.out(inv.flags.has("--json") ? json({ removed: Number(id) }) : `removed ${id}`);
  return 0;
}

function describeRecord(r: QuotaRecord, now: number): string {
  const expiry = r.Expire === 0 ? "none bought or granted yet" : r.Expire * 1000 < now ? `expired ${formatTime(new Date(r.Expire * 1000))}` : `expires ${formatTime(new Date(r.Expire * 1000))}`;
  return `${formatBytes(r.SizeByte)} left (${r.SizeByte} bytes; free bytes granted ${r.FreeByte}), ${expiry}`;
}

export async function quota(inv: Invocation, io: Io): Promise<number> {
  expectPositionals(inv, []);
  const store = await loggedIn(inv, userAccount(inv));
  const [space, traffic] = await Promise.all([store.space(), store.traffic()]);
  if (inv.flags.has("--json")) {
    io.out(json({ space, traffic }));
    return 0;
  }
  const now = Date.now();
  io.out(`space    ${describeRecord(space, now)}`);
  io.out(`traffic  ${describeRecord(traffic, now)}`);
  io.out(`deposit  ${space.Balance} gwei (${formatEther(BigInt(space.Balance) * 10n ** 9n)} ETH)`);
  return 0;
}

export async function deposit(inv: Invocation, io: Io): Promise<number> {
  const [amount] = expectPositionals(inv, ["AMOUNT_ETH"]) as [string];
  const wei = ethAmount(amount);
  const account = userAccount(inv);
  const gw = await gatewayWith(inv, account);
  io.log(`depositing ${amount} ETH from ${account.address} …`);
  const tx = await gw.deposit(wei);
  const { space } = await gw.records();
  io.out(inv.flags.has("--json") ? json({ tx, depositedWei: wei, depositWei: space.deposit }) : tx);
  io.log(`deposit now ${formatGwei(space.deposit)} gwei (${formatEther(space.deposit)} ETH)`);
  return 0;
}

export async function buy(inv: Invocation, io: Io): Promise<number> {
  expectPositionals(inv, []);
  const kinds = (["space", "traffic"] as const).filter((k) => inv.flags.has(`--${k}`));
  if (!kinds.length) throw new ConfigError("buy needs --space BYTES, --traffic BYTES or both");
  const sizes = kinds.map((kind) => {
    let size: number;
    try {
      size = parseBytes(inv.flags.get(`--${kind}`) as string);
    } catch (err) {
      throw new ConfigError(`--${kind}: ${(err as Error).message}`);
    }
    if (size <= 0) throw new ConfigError(`--${kind} must be more than 0 bytes`);
    return { kind, size };
  });
  const account = userAccount(inv);
  const store = await loggedIn(inv, account);
  const prices = await (await gatewayWith(inv)).prices();
  const orders = sizes.map((o) => ({ ...o, cost: BigInt(o.size) * prices[o.kind] }));
  // Both in one run: refused as a whole when the deposit cannot pay both, rather than half bought.
  const total = orders.reduce((sum, o) => sum + o.cost, 0n);
  const balance = orders.length > 1 ? (await store.space()).Balance : Infinity;
  if (balance * 1e9 < Number(total)) throw new CliError(`your deposit, ${balance} gwei, is less than the ${formatGwei(total)} gwei both cost: nothing bought (see \`stowage deposit\`)`);
  const bought: { kind: string; size: number; costWei: bigint; tx: string; record: QuotaRecord }[] = [];
  for (const { kind, size, cost } of orders) {
    io.log(`buying ${formatBytes(size)} (${size} bytes) of ${kind} for ${formatGwei(cost)} gwei from the deposit …`);
    const { tx } = kind === "space" ? await store.buySpace({ size }) : await store.buyTraffic({ size });
    if (!inv.flags.has("--json")) io.out(tx);
    const record = kind === "space" ? await store.space() : await store.traffic();
    bought.push({ kind, size, costWei: cost, tx, record });
    io.log(`${kind}: ${describeRecord(record, Date.now())}; deposit ${record.Balance} gwei`);
  }
  if (inv.flags.has("--json")) io.out(json(bought));
  return 0;
}

export async function publish(inv: Invocation, io: Io): Promise<number> {
  const [cid] = expectPositionals(inv, ["CID"]) as [string];
  const keywords = inv.repeated.get("--keyword") ?? [];
  const priceText = inv.flags.get("--price") ?? "0";
  if (!/^\d+$/.test(priceText) || BigInt(priceText) >= 2n ** 64n) throw new ConfigError(`--price must be a whole number of gwei below 2^64 (got ${JSON.stringify(priceText)})`);
  const bytes = (s: string) => new TextEncoder().encode(s).byteLength;
  if (keywords.length > 16) throw new ConfigError("at most 16 --keyword");
  const long = keywords.find((k) => bytes(k) > 64 || !k.trim());
  if (long !== undefined) throw new ConfigError(`a --keyword must be 1 to 64 bytes (got ${JSON.stringify(long)})`);
  const account = userAccount(inv);
  const store = await loggedIn(inv, account);
  // The directory opens only a copy its owner stores at this gateway: find it, and its size.
  let file: FileEntry | undefined;
  for (const kind of BACKENDS) {
    file ??= (await store.list(kind)).Object.find((e) => e.Cid === cid);
  }
  if (!file) throw new CliError(`you store no file with Cid ${cid} at ${inv.gateway} (see \`stowage ls\`); put it first`);
  const name = inv.flags.get("--name") ?? file.Name;
  if (!name.trim() || bytes(name) > 256) throw new ConfigError("--name must be 1 to 256 bytes");
  // D20: a priced encrypted file is sold through the gateway, which needs its key (checked
  // against the stored file) to write each buyer's share; the SDK refuses to buy one without it.
  if (file.UserDefined.encryption === "age" && BigInt(priceText) > 0n) {
    const { keyId } = await (await encryptionWith(inv, store, account)).escrow(cid, (await ownFile(inv, store, cid)).kind);
    io.log(`escrowed the file key to the gateway (${keyId}): it shares it with each buyer, and can read the file`);
  }
  const dir = await reach(inv.gateway, () => connectDirectory(inv.gateway, { account }));
  io.log(`publishing ${cid} as ${JSON.stringify(name)} (${formatBytes(file.Size)}, ${priceText} gwei${inv.flags.has("--public") ? ", public" : ""}) …`);
  const tx = await dir.publish({ cid, name, size: file.Size, price: BigInt(priceText), isPublic: inv.flags.has("--public"), keywords });
  const result = { tx, mid: cid, name, size: file.Size, priceGwei: BigInt(priceText), public: inv.flags.has("--public"), keywords, searchable: inv.flags.has("--wait") };
  if (!inv.flags.has("--json")) io.out(tx);
  if (inv.flags.has("--wait")) {
    await dir.waitUntilSearchable(cid);
    io.log("the gateway's search shows it now");
  } else io.log("the gateway's search shows it after its next poll of the chain (--wait waits for that)");
  if (inv.flags.has("--json")) io.out(json(result));
  return 0;
}

export async function search(inv: Invocation, io: Io): Promise<number> {
  const [query] = expectPositionals(inv, ["QUERY"]) as [string];
  const num = (flag: string) => {
    const v = inv.flags.get(flag);
    if (v === undefined) return undefined;
    if (!/^\d+$/.test(v) || Number(v) < 1) throw new ConfigError(`${flag} must be a whole number from 1`);
    return Number(v);
  };
  const page = num("--page");
  const size = num("--size");
  // Searching is public: no key needed.
  const dir = await reach(inv.gateway, () => connectDirectory(inv.gateway));
  const hits = await dir.search(query, page, size);
  if (inv.flags.has("--json")) {
    io.out(json(hits));
    return 0;
  }
  if (!hits.length) {
    io.log(`nothing found for ${JSON.stringify(query)}`);
    return 0;
  }
  const rows = hits.map((h) => [h.Name, formatBytes(h.Size), h.Public ? "public" : `${h.Price} gwei`, h.keywords.join(","), h.Owner, h.Mid]);
  for (const line of table(["NAME", "SIZE", "PRICE", "KEYWORDS", "OWNER", "CID"], rows)) io.out(line);
  return 0;
}

/** AMOUNT_ETH as wei: a positive decimal of at most 18 places. */
function ethAmount(amount: string): bigint {
  if (!/^\d+(\.\d{1,18})?$/.test(amount) || parseEther(amount) === 0n) throw new ConfigError(`AMOUNT_ETH must be a positive number of ETH, such as 0.01 (got ${JSON.stringify(amount)})`);
  return parseEther(amount);
}

export async function withdraw(inv: Invocation, io: Io): Promise<number> {
  const [amount] = expectPositionals(inv, ["AMOUNT_ETH"]) as [string];
  const wei = ethAmount(amount);
  const account = userAccount(inv);
  const gw = await gatewayWith(inv, account);
  // Checked here to say it plainly; the contract refuses it too (with a bare revert).
  const before = (await gw.records()).space.deposit;
  if (wei > before) throw new CliError(`your deposit is ${formatEther(before)} ETH, less than ${amount}: nothing withdrawn (see \`stowage quota\`)`);
  io.log(`withdrawing ${amount} ETH of your deposit to ${account.address} …`);
  const tx = await gw.withdraw(wei);
  const after = (await gw.records()).space.deposit;
  if (inv.flags.has("--json")) {
    io.out(json({ tx, withdrawnWei: wei, depositWei: after }));
    return 0;
  }
  io.out(tx);
  io.log(`deposit now ${formatGwei(after)} gwei (${formatEther(after)} ETH)`);
  return 0;
}

export async function unpublish(inv: Invocation, io: Io): Promise<number> {
  const [cid] = expectPositionals(inv, ["MID"]) as [string];
  const account = userAccount(inv);
  const dir = await reach(inv.gateway, () => connectDirectory(inv.gateway, { account }));
  if (!(await dir.entry(account.address, cid))) throw new CliError(`you have published nothing under ${cid} (see \`stowage search\`)`);
  io.log(`unpublishing ${cid} (its grants and purchases go with it) …`);
  const tx = await dir.unpublish(cid);
  io.out(inv.flags.has("--json") ? json({ tx, mid: cid }) : tx);
  io.log("the gateway's search drops it after its next poll of the chain; the file itself stays stored");
  return 0;
}

export function addressOf(raw: string, what: string): Address {
  if (!isAddress(raw, { strict: false })) throw new ConfigError(`${what} must be a 0x address (got ${JSON.stringify(raw)})`);
  return getAddress(raw);
}

export async function buyRead(inv: Invocation, io: Io): Promise<number> {
  const [rawOwner, cid] = expectPositionals(inv, ["OWNER", "MID"]) as [string, string];
  const owner = addressOf(rawOwner, "OWNER");
  const maxText = inv.flags.get("--max-price");
  if (maxText !== undefined && (!/^\d+$/.test(maxText) || BigInt(maxText) >= 2n ** 64n)) throw new ConfigError(`--max-price must be a whole number of gwei below 2^64 (got ${JSON.stringify(maxText)})`);
  const account = userAccount(inv);
  const dir = await reach(inv.gateway, () => connectDirectory(inv.gateway, { account }));
  const entry = await dir.entry(owner, cid);
  if (!entry) throw new CliError(`${owner} has published nothing under ${cid} (see \`stowage search\`)`);
  if (maxText !== undefined && entry.price > BigInt(maxText)) throw new CliError(`the price is ${entry.price} gwei, above --max-price ${maxText}: nothing bought`);
  io.log(`buying read of ${JSON.stringify(entry.name)} (${cid}) from ${owner} for ${entry.price} gwei …`);
  const tx = await dir.buyRead(owner, cid, maxText !== undefined ? { maxPrice: BigInt(maxText) } : {});
  io.out(inv.flags.has("--json") ? json({ tx, owner, mid: cid, priceGwei: entry.price }) : tx);
  io.log(`the gateway lets you read it after its next poll of the chain: \`stowage get ${cid}\``);
  return 0;
}
