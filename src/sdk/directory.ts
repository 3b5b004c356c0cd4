/**
 * SDK: the file directory (D10). Publishing, updating, granting, revoking, buying and unpublishing
 * are Directory contract calls signed with the user's own key and sent through the gateway's
 * public RPC — there is no HTTP API for them (spec 4.1 rule 7). Searching is `GET /challenge`.
 * Every call is simulated first, so a revert comes back with its reason and nothing is sent; it
 * resolves with the transaction hash once the transaction is mined with success.
 *
 * @example
 *   const dir = await connectDirectory("https://gw.example", { account })
 *   const file = await store.upload("dfs", new Blob([bytes]))
 *   await dir.publish({ cid: file.Cid, name: file.Name, size: file.Size, price: 5_000n, keywords: ["maps"] })
 *   await dir.waitUntilSearchable(file.Cid)   // the gateway's index follows the chain within a poll
 *   const [hit] = await dir.search("atlas")
 *   await reader.buyRead(hit.Owner, hit.Mid)   // pays 5000 gwei to the owner
 */
import { parseGwei, type Address } from "viem";
import { directoryAbi } from "../chain/artifacts/index.ts";
import { connectGateway, type ConnectOptions } from "./chain.ts";
import { StorageApiError } from "./storage.ts";
import type { SearchResult } from "./wire.ts";

export type { SearchResult };

export interface EntryFields {
  name: string;
  /** Bytes. */
  size: bigint;
  /** Gwei to buy read permission; 0 with `isPublic: false` means only grants open it. */
  price: bigint;
  isPublic: boolean;
  keywords: string[];
}

export interface PublishInput {
  /** The Cid of a file the publisher stores at this gateway (the entry's Mid). */
  cid: string;
  name: string;
  size: number | bigint;
  /** Gwei (default 0). */
  price?: number | bigint;
  /** Free to read for anyone (default false). */
  isPublic?: boolean;
  keywords?: string[];
}

export type EntryChanges = Partial<Omit<PublishInput, "cid">>;

const UINT64_MAX = 2n ** 64n - 1n;
function uint64(name: string, v: number | bigint): bigint {
  const n = typeof v === "bigint" ? v : Number.isSafeInteger(v) ? BigInt(v) : -1n;
  if (n < 0n || n > UINT64_MAX) throw new RangeError(`${name} must be a whole number from 0 to 2^64-1`);
  return n;
}

const fieldsOf = (x: Omit<PublishInput, "cid">): readonly [string, bigint, bigint, boolean, string[]] => [
  x.name,
  uint64("size", x.size),
  uint64("price", x.price ?? 0),
  x.isPublic ?? false,
  x.keywords ?? [],
];

export async function connectDirectory(baseUrl: string, opts: ConnectOptions = {}) {
  const base = baseUrl.replace(/\/$/, "");
  const doFetch = opts.fetch ?? fetch;
  const gw = await connectGateway(base, opts);
  const { publicClient } = gw;
  const address = gw.info.contracts.directory;
  const me = () => gw.wallet().account;

  /** The entry as the contract holds it, or undefined when (owner, cid) is not published. */
  async function entry(owner: Address, cid: string): Promise<EntryFields | undefined> {
    if (!(await publicClient.readContract({ address, abi: directoryAbi, functionName: "exists", args: [owner, cid] }))) return undefined;
    const e = await publicClient.readContract({ address, abi: directoryAbi, functionName: "getEntry", args: [owner, cid] });
    return { name: e.name, size: e.size, price: e.price, isPublic: e.isPublic, keywords: [...e.keywords] };
  }

  /** GET /challenge: published files stored at this gateway, best match first; page from 1. */
  async function search(query: string, page?: number, size?: number): Promise<SearchResult[]> {
    const q = new URLSearchParams({ query, ...(page !== undefined ? { page: String(page) } : {}), ...(size !== undefined ? { size: String(size) } : {}) });
    const res = await doFetch(`${base}/challenge?${q}`);
    const body = (await res.json()) as unknown;
    if (!res.ok) throw new StorageApiError(res.status, body as StorageApiError["body"]);
    return body as SearchResult[];
  }

  return {
    gateway: gw,
    entry,

    /** Publishes a stored file under its Cid. */
    publish: (input: PublishInput) =>
      gw.confirm(publicClient.simulateContract({ account: me(), address, abi: directoryAbi, functionName: "publish", args: [input.cid, ...fieldsOf(input)] }).then(({ request }) => gw.wallet().writeContract(request))),

    /** Changes any of the entry's fields; the others keep their current values. */
    async update(cid: string, changes: EntryChanges) {
      const current = await entry(me().address, cid);
      if (!current) throw new Error(`nothing published under ${cid} by ${me().address}`);
      const merged = { ...current, ...Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== undefined)) } as Omit<PublishInput, "cid">;
      return gw.confirm(publicClient.simulateContract({ account: me(), address, abi: directoryAbi, functionName: "update", args: [cid, ...fieldsOf(merged)] }).then(({ request }) => gw.wallet().writeContract(request)));
    },

    grantRead: (cid: string, reader: Address) =>
      gw.confirm(publicClient.simulateContract({ account: me(), address, abi: directoryAbi, functionName: "grantRead", args: [cid, reader] }).then(({ request }) => gw.wallet().writeContract(request))),

    /** Withdraws a grant (a purchase stays: the reader paid for it). */
    revokeRead: (cid: string, reader: Address) =>
      gw.confirm(publicClient.simulateContract({ account: me(), address, abi: directoryAbi, functionName: "revokeRead", args: [cid, reader] }).then(({ request }) => gw.wallet().writeContract(request))),

    /** Buys read permission on `owner`'s entry for `cid`, paying its current price (× 1 gwei) to
     * the owner. `maxPrice` (gwei) refuses to pay more than the caller expects. */
    async buyRead(owner: Address, cid: string, o: { maxPrice?: number | bigint } = {}) {
      const current = await entry(owner, cid);
      if (!current) throw new Error(`${owner} has not published ${cid}`);
      if (o.maxPrice !== undefined && current.price > uint64("maxPrice", o.maxPrice)) throw new Error(`the price is ${current.price} gwei, above maxPrice ${o.maxPrice}`);
      // D20: an encrypted file is worth buying only if the gateway holds its key to share with the
      // buyer, checked against the file itself; otherwise the payment buys ciphertext.
      // The gateway answers only for published entries: a 404 means its view of the chain does not
      // show this one (yet), and then it cannot say whether the buyer could open what it buys.
      const escrow = await doFetch(`${base}/v2/escrows/${owner}/${cid}`);
      if (escrow.status === 404) throw new Error(`refusing to buy: this gateway does not list ${owner}'s ${cid} as published (its view of the chain may lag behind), so it cannot say whether you could open it: try again shortly`);
      if (!escrow.ok) throw new Error(`refusing to buy: the gateway could not say whether ${owner}'s ${cid} can be opened (HTTP ${escrow.status}): try again`);
      const { data } = (await escrow.json()) as { data?: { encrypted?: boolean; escrowed?: boolean } };
      if (data?.encrypted && !data.escrowed) throw new Error(`refusing to buy: ${owner}'s ${cid} is encrypted and its key is not escrowed (verified) at this gateway, so you could not decrypt it`);
      const value = parseGwei(current.price.toString());
      return gw.confirm(publicClient.simulateContract({ account: me(), address, abi: directoryAbi, functionName: "buyRead", args: [owner, cid], value }).then(({ request }) => gw.wallet().writeContract(request)));
    },

    /** Removes the entry with all its grants and purchases. */
    unpublish: (cid: string) => gw.confirm(publicClient.simulateContract({ account: me(), address, abi: directoryAbi, functionName: "unpublish", args: [cid] }).then(({ request }) => gw.wallet().writeContract(request))),

    /** What the contract says (the gateway's index follows within one poll). */
    canRead: (owner: Address, cid: string, reader: Address = me().address) =>
      publicClient.readContract({ address, abi: directoryAbi, functionName: "canRead", args: [owner, cid, reader] }),

    search,

    /**
     * Resolves with the entry's search hit once the gateway's search shows it: the gateway indexes
     * the chain's events on its next poll (STOWAGE_INDEXER_POLL, plus its confirmations), so a
     * search right after `publish` may not find it yet. Polls `query`'s first 100 results (default:
     * the newest entries, where a fresh one is); rejects after `timeoutMs`.
     */
    async waitUntilSearchable(cid: string, o: { owner?: Address; query?: string; timeoutMs?: number; intervalMs?: number } = {}): Promise<SearchResult> {
      const owner = (o.owner ?? me().address).toLowerCase();
      const deadline = Date.now() + (o.timeoutMs ?? 60_000);
      for (;;) {
        const hit = (await search(o.query ?? "", 1, 100)).find((h) => h.Mid === cid && h.Owner.toLowerCase() === owner);
        if (hit) return hit;
        if (Date.now() >= deadline) throw new Error(`${cid} of ${owner} is not in ${base}'s search after ${o.timeoutMs ?? 60_000} ms: is its chain indexer running?`);
        await new Promise((resolve) => setTimeout(resolve, o.intervalMs ?? 250));
      }
    },
  };
}

export type DirectoryClient = Awaited<ReturnType<typeof connectDirectory>>;
