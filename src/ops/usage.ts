/**
 * `stowage admin usage`: per account, what it stores on each back-end, the traffic it moved, what
 * it bought and was granted (the Proxy contract's events, as the indexer recorded them), and its
 * S3 and IPFS activity as far as the gateway keeps any: S3 access keys and multipart uploads in
 * progress, files pinned on ipfs, Pinning Service API tokens, bytes of its public content served
 * by the trustless gateway. The same totals, without any account's name, are the Prometheus
 * gauges of `usageTotals`.
 *
 * Accounts are keyed by address: the catalog names them by DID (`did:ethr:0x3d9:<address>`), the
 * quota and the chain by address, and `didAddressKey` joins the two. Each capability's rows are
 * read through its own functions (one owner per table).
 *
 * `since` (epoch ms; 0 = all time) bounds what has a time: purchases and grants (block time),
 * files stored or replaced, access keys made, traffic periods begun, public bytes served (per day).
 * What an account stores and its current traffic period are as they are now.
 */
import { getAddress, isAddress } from "viem";
import type { Queryable } from "../db/sql.ts";
import type { UsageTotals } from "../metrics/index.ts";
import { didAddressKey } from "../identity/did.ts";
import { voucherCounters } from "../authorities/vouchers.ts";
import { accountsStoring, fileCounts, storedByAccount, storedSince } from "../storage/audit.ts";
import { quotaActivity, quotaEventTotals } from "../quota/events.ts";
import { trafficByAccount } from "../quota/usage.ts";
import { keysByAccount } from "../keys/usage.ts";
import { openUploads } from "../s3api/audit.ts";
import { publicEgressByOwner } from "../gateway/usage.ts";

interface Pool {
  count: number;
  bytes: number;
}

/** Purchases or grants: uint64 amounts from the chain, whose sums pass a JS number's exact range. */
interface Amount {
  count: number;
  /** Decimal. */
  bytes: string;
}

export interface AccountUsage {
  /** EIP-55 address. */
  account: string;
  /** Its DID as the catalog has it, when it stores files or holds keys. */
  did: string | null;
  stored: { dfs: Pool; ipfs: Pool; bytes: number };
  /** Files (still there) stored or replaced since `since`. */
  storedSince: { dfs: Pool; ipfs: Pool };
  traffic: {
    /** Chain time (ms) its current period began, and the bytes moved in it (what the quota counts). */
    periodStart: number | null;
    periodBytes: number;
    /** Bytes moved in periods begun since `since`. */
    sinceBytes: number;
    /** All-time bytes moved under its traffic vouchers at this gateway's seller (D6). */
    voucherBytes: number;
  };
  purchases: { space: Amount; traffic: Amount; spentWei: string };
  grants: { space: Amount; traffic: Amount };
  /** `keys`: S3 access keys that work now (scope s3; not the Pinning Service's tokens). */
  s3: { keys: number; keysMade: number; uploads: number; parts: number; partBytes: number };
  /** `pinTokens`: Pinning Service API tokens that work now. */
  ipfs: { pins: number; pinTokens: number; publicBytes: number };
}

export interface UsageReport {
  since: string | null;
  generatedAt: string;
  accounts: AccountUsage[];
  totals: Omit<AccountUsage, "account" | "did">;
}

const none = (): Pool => ({ count: 0, bytes: 0 });
const noAmount = (): Amount => ({ count: 0, bytes: "0" });

function blank(account: string): AccountUsage {
  return {
    account,
    did: null,
    stored: { dfs: none(), ipfs: none(), bytes: 0 },
    storedSince: { dfs: none(), ipfs: none() },
    traffic: { periodStart: null, periodBytes: 0, sinceBytes: 0, voucherBytes: 0 },
    purchases: { space: noAmount(), traffic: noAmount(), spentWei: "0" },
    grants: { space: noAmount(), traffic: noAmount() },
    s3: { keys: 0, keysMade: 0, uploads: 0, parts: 0, partBytes: 0 },
    ipfs: { pins: 0, pinTokens: 0, publicBytes: 0 },
  };
}

/** An address key's EIP-55 form, or the key itself when it is no address. */
const display = (key: string) => (isAddress(key, { strict: false }) ? getAddress(key) : key);

export async function usageReport(q: Queryable, opts: { since?: number; now?: number } = {}): Promise<UsageReport> {
  const since = opts.since ?? 0;
  const now = opts.now ?? Date.now();
  const accounts = new Map<string, AccountUsage>();
  const of = (raw: string) => {
    const key = didAddressKey(raw);
    let a = accounts.get(key);
    if (!a) accounts.set(key, (a = blank(display(key))));
    return a;
  };
  const withDid = (did: string) => {
    const a = of(did);
    a.did ??= did;
    return a;
  };

  for (const r of await storedByAccount(q)) {
    const a = withDid(r.did);
    a.stored[r.backend] = { count: r.files, bytes: r.bytes };
    a.stored.bytes += r.bytes;
    if (r.backend === "ipfs") a.ipfs.pins = r.files;
  }
  for (const r of await storedSince(q, since)) withDid(r.did).storedSince[r.backend] = { count: r.files, bytes: r.bytes };
  for (const r of await trafficByAccount(q, Math.floor(since / 1000))) {
    const a = of(r.account);
    a.traffic.periodStart = r.periodStart * 1000;
    a.traffic.periodBytes = r.bytes;
    a.traffic.sinceBytes = r.sinceBytes;
  }
  for (const r of await voucherCounters(q)) of(r.payer).traffic.voucherBytes = r.used;
  const activity = await quotaActivity(q, since);
  for (const r of activity.rows) {
    const a = of(r.account);
    (r.kind === "purchase" ? a.purchases : a.grants)[r.pool] = { count: r.events, bytes: r.bytes.toString() };
  }
  for (const [account, wei] of activity.spent) of(account).purchases.spentWei = wei.toString();
  for (const r of await keysByAccount(q, now, since)) {
    const a = withDid(r.did);
    a.s3.keys = r.live;
    a.s3.keysMade = r.made;
    a.ipfs.pinTokens = r.pinTokens;
  }
  for (const r of await openUploads(q, now)) {
    const a = withDid(r.did);
    a.s3.uploads = r.uploads;
    a.s3.parts = r.parts;
    a.s3.partBytes = r.bytes;
  }
  for (const r of await publicEgressByOwner(q, since)) of(r.owner).ipfs.publicBytes = r.bytes;

  const list = [...accounts.values()].sort((x, y) => (x.account < y.account ? -1 : x.account > y.account ? 1 : 0));
  const totals = blank("");
  let spent = 0n;
  for (const a of list) {
    for (const b of ["dfs", "ipfs"] as const) {
      addPool(totals.stored[b], a.stored[b]);
      addPool(totals.storedSince[b], a.storedSince[b]);
    }
    totals.stored.bytes += a.stored.bytes;
    totals.traffic.periodBytes += a.traffic.periodBytes;
    totals.traffic.sinceBytes += a.traffic.sinceBytes;
    totals.traffic.voucherBytes += a.traffic.voucherBytes;
    for (const p of ["space", "traffic"] as const) {
      addAmount(totals.purchases[p], a.purchases[p]);
      addAmount(totals.grants[p], a.grants[p]);
    }
    spent += BigInt(a.purchases.spentWei);
    for (const k of ["keys", "keysMade", "uploads", "parts", "partBytes"] as const) totals.s3[k] += a.s3[k];
    totals.ipfs.pins += a.ipfs.pins;
    totals.ipfs.pinTokens += a.ipfs.pinTokens;
    totals.ipfs.publicBytes += a.ipfs.publicBytes;
  }
  totals.purchases.spentWei = spent.toString();
  const { account: _a, did: _d, ...rest } = totals;
  return { since: since > 0 ? new Date(since).toISOString() : null, generatedAt: new Date(now).toISOString(), accounts: list, totals: rest };
}

function addPool(into: Pool, p: Pool) {
  into.count += p.count;
  into.bytes += p.bytes;
}

function addAmount(into: Amount, a: Amount) {
  into.count += a.count;
  into.bytes = (BigInt(into.bytes) + BigInt(a.bytes)).toString();
}

/** The columns of `--csv`, one row per account. */
export const CSV_COLUMNS = [
  "account",
  "did",
  "dfs_files",
  "dfs_bytes",
  "ipfs_files",
  "ipfs_bytes",
  "stored_bytes",
  "dfs_files_since",
  "dfs_bytes_since",
  "ipfs_files_since",
  "ipfs_bytes_since",
  "traffic_period_start",
  "traffic_period_bytes",
  "traffic_since_bytes",
  "traffic_voucher_bytes",
  "space_purchases",
  "space_purchased_bytes",
  "traffic_purchases",
  "traffic_purchased_bytes",
  "spent_wei",
  "space_grants",
  "space_granted_bytes",
  "traffic_grants",
  "traffic_granted_bytes",
  "s3_keys",
  "s3_keys_made",
  "s3_uploads",
  "s3_parts",
  "s3_part_bytes",
  "ipfs_pins",
  "ipfs_public_bytes",
  "ipfs_pin_tokens",
] as const;

export function csvRow(a: AccountUsage): string[] {
  return [
    a.account,
    a.did ?? "",
    ...[a.stored.dfs.count, a.stored.dfs.bytes, a.stored.ipfs.count, a.stored.ipfs.bytes, a.stored.bytes],
    ...[a.storedSince.dfs.count, a.storedSince.dfs.bytes, a.storedSince.ipfs.count, a.storedSince.ipfs.bytes],
    a.traffic.periodStart === null ? "" : new Date(a.traffic.periodStart).toISOString(),
    ...[a.traffic.periodBytes, a.traffic.sinceBytes, a.traffic.voucherBytes],
    ...[a.purchases.space.count, a.purchases.space.bytes, a.purchases.traffic.count, a.purchases.traffic.bytes],
    a.purchases.spentWei,
    ...[a.grants.space.count, a.grants.space.bytes, a.grants.traffic.count, a.grants.traffic.bytes],
    ...[a.s3.keys, a.s3.keysMade, a.s3.uploads, a.s3.parts, a.s3.partBytes, a.ipfs.pins, a.ipfs.publicBytes, a.ipfs.pinTokens],
  ].map(String);
}

/** RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled. */
export const csvLine = (fields: readonly string[]) => fields.map((f) => (/[",\r\n]/.test(f) ? `"${f.replace(/"/g, '""')}"` : f)).join(",");


/** What the Prometheus gauges show (their shape is the metrics'), read in a few aggregate queries. */
export async function usageTotals(q: Queryable, now = Date.now()): Promise<UsageTotals> {
  const files = await fileCounts(q);
  const accounts = await accountsStoring(q);
  const traffic = (await trafficByAccount(q, 0)).reduce((n, r) => n + r.bytes, 0);
  const keys = await keysByAccount(q, now, now);
  const s3Keys = keys.reduce((n, r) => n + r.live, 0);
  const pinTokens = keys.reduce((n, r) => n + r.pinTokens, 0);
  return {
    stored: (["dfs", "ipfs"] as const).map((b) => ({ backend: b, files: files[b].files, bytes: files[b].bytes })),
    accounts,
    trafficPeriodBytes: traffic,
    quota: await quotaEventTotals(q),
    s3Keys,
    pinTokens,
  };
}
