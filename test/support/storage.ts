/**
 * A whole storage gateway for `app.handle()` tests, on real parts: anvil with our contracts, this
 * pass's database and blob store, the dfs store and an embedded Helia node, wired by the server's
 * own `compose` (directory and its indexer, keys, grants, encryption, quota when asked), with SDK
 * clients for new users.
 */
import { afterAll } from "bun:test";
import { join } from "node:path";
import type { Hex, LocalAccount } from "viem";
import { storageDomain, storageTypes, type RequestAction } from "../../src/identity/eip712.ts";
import { canonicalDid } from "../../src/identity/did.ts";
import { ethrResolver } from "../../src/identity/resolver.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { cidOfStream } from "../../src/sdk/cid.ts";
import { canonicalCid } from "../../src/cid/canonical.ts";
import { openDfs } from "../../src/storage/dfs/index.ts";
import { openIpfs, type Servable } from "../../src/storage/ipfs/index.ts";
import type { ReadGrant, StorageDeps } from "../../src/storage/service.ts";
import { openBlobs } from "../../src/storage/start.ts";
import type { Backend, BackendKind } from "../../src/storage/backend.ts";
import { compose, type ComposeOptions } from "../../src/compose.ts";
import { generateIdentity } from "../../src/sdk/age.ts";
import { appFetch, postJson, testApp } from "./app.ts";
import { testChain } from "./chain.ts";

export const BASE = "http://stowage.test";

/** What an upload's voucher (`uploadRequest`) leaves at least beyond its own file. */
const VOUCHER_ROOM = 1_000_000;

export interface Session {
  account: LocalAccount;
  did: string;
  token: Hex;
  accessToken: string;
  refreshToken: string;
}

export interface GatewayOptions {
  env?: Record<string, string>;
  /** How long DID lookups are cached; unset = the server's own default (D2: at most 10 s). */
  resolverCacheMs?: number;
  /** The resolver's clock, to show the cache's bound without waiting. */
  resolverNow?: () => number;
  ipfs?: boolean;
  readGrant?: ReadGrant;
  extra?: Partial<StorageDeps>;
  /** Enforce quota (D7) with the chain's records; off by default so storage tests need no grants. */
  quota?: boolean;
  /** Whether the ipfs node may send a block to other peers (the denylist's say, D25). */
  servable?: Servable;
  /** The denylist every door asks (storage, S3, the gateways), as the server wires it. */
  denylist?: ComposeOptions["denylist"];
}

export async function testGateway(opts: GatewayOptions = {}) {
  const chain = await testChain();
  /** Each read the resolver made of the DID registry, in order: what a request cost the chain. */
  const registryReads: RegistryRead[] = [];
  const backends: Partial<Record<BackendKind, Backend>> = {};
  const resolver = ethrResolver({ publicClient: countingReads(chain.context.publicClient, registryReads), registry: chain.context.contracts.didRegistry, cacheMs: opts.resolverCacheMs, now: opts.resolverNow });
  const chainId = chain.context.chain.id;
  const domain = storageDomain(chainId, chain.context.contracts.proxy);
  const seller = chain.operator.address;
  const base = testApp({
    chain: chain.context,
    env: { STOWAGE_PUBLIC_URL: BASE, ...opts.env },
    // As the server does: tokens act for a DID while their key may sign for it (D3, D21).
    accounts: { resolver },
  });
  const blobs = await openBlobs({ config: base.config, sql: base.database.sql, log: base.log });
  backends.dfs = await openDfs({ sql: base.database.sql, log: base.log, guard: blobs.guard, legacyDir: join(base.dataDir, "dfs") });
  if (opts.ipfs !== false) backends.ipfs = await openIpfs({ dir: join(base.dataDir, "ipfs"), listen: ["/ip4/127.0.0.1/tcp/0"], sql: base.database.sql, log: base.log, guard: blobs.guard, servable: opts.servable });
  afterAll(async () => {
    for (const b of Object.values(backends)) await b.stop();
  });
  const ageIdentity = generateIdentity();
  /** The server's wiring (src/compose.ts) over this gateway's parts: a gateway of the cluster. */
  const wire = () =>
    compose(
      { config: base.config, sql: base.database.sql, log: base.log, chain: chain.context, deployBlock: chain.deployBlock, secrets: base.secrets, accounts: base.accounts, backends, ageIdentity },
      {
        resolver,
        // No record cache in tests: each read sees the chain as it is (the server keeps answers ≤ 1 s).
        quota: opts.quota ? { maxAgeMs: 0 } : false,
        // The indexer runs when a test asks (syncOnce), not on a timer.
        pollMs: 60_000,
        health: { database: () => base.database.sql.get("SELECT 1 AS one") },
        denylist: opts.denylist,
        // Every test request comes from one address ("local"); limits have tests of their own.
        storage: { rateLimits: false, ...(opts.readGrant && { readGrant: opts.readGrant }), ...opts.extra },
      },
    );
  const composed = wire();
  afterAll(() => composed.indexer.stop());
  const made = { ...base, app: composed.app, storage: composed.storage, quota: composed.quota, keys: composed.keys, encryption: composed.encryption };
  const fetch = appFetch(made.app);

  /** A new user with an SDK client (not yet logged in unless `login`). */
  async function user(o: { account?: LocalAccount; did?: string; login?: boolean } = {}) {
    const account = o.account ?? (await chain.anvil.newAccount());
    const client = await connectStorage({ baseUrl: BASE, account, did: o.did, fetch });
    if (o.login !== false) await client.login();
    return { account, client };
  }

  /** Hand-signed messages (D4, D6, D22), for tests that build malformed or hostile requests. A
   * voucher names the file it moves (`cid`, canonical) and may expire (`expires`, unix seconds). */
  const sign = {
    login: (account: LocalAccount, m: { did: string; token: Hex; timestamp: number | bigint }) =>
      account.signTypedData({ domain, types: storageTypes, primaryType: "Login", message: { ...m, timestamp: BigInt(m.timestamp) } }),
    request: (account: LocalAccount, m: { did: string; token: Hex; requestID: number | bigint; action: RequestAction; payload: string }) =>
      account.signTypedData({ domain, types: storageTypes, primaryType: "Request", message: { ...m, requestID: BigInt(m.requestID) } }),
    voucher: (account: LocalAccount, size: number | bigint, cid: string, expires: number | bigint = 0) =>
      account.signTypedData({ domain, types: storageTypes, primaryType: "Voucher", message: { seller, size: BigInt(size), cid, expires: BigInt(expires) } }),
  };

  /** Logs `account` in by hand (JSON, with tokens): its session, for hand-built restricted calls. */
  async function session(account: LocalAccount, o: { did?: string; token?: Hex } = {}): Promise<Session> {
    const did = o.did ?? canonicalDid(account.address, chainId);
    const token = o.token ?? newToken();
    let last = 0;
    try {
      last = (await made.storage?.loginInfo(did))?.timestamp ?? 0;
    } catch {}
    // D4: a login must be newer than the DID's last one, and SDK logins may have used this second.
    const timestamp = Math.max(Math.floor(Date.now() / 1000), last + 1);
    const signature = await sign.login(account, { did, token, timestamp });
    const res = await made.app.handle(postJson("/login", { did, token, timestamp, signature }, { accept: "application/json" }));
    if (res.status !== 200) throw new Error(`login answered ${res.status}: ${await res.text()}`);
    const { data } = (await res.json()) as { data: { accessToken: string; refreshToken: string } };
    return { account, did, token, accessToken: data.accessToken, refreshToken: data.refreshToken };
  }

  /**
   * A signed upload (D5, D6) as a client would send it, fields before the file. `payload` is what
   * is signed (default: the bytes' SHA-256); the voucher names the bytes' Cid, sent in a `cid`
   * field when the payload is not that Cid (D22); `fields` replaces or (with undefined) drops
   * fields after signing; `fileFirst` puts the file part first.
   */
  async function uploadRequest(
    s: Session,
    o: { requestID: number; bytes: Uint8Array; name?: string; kind?: string; payload?: string; fields?: Record<string, string | undefined>; fileFirst?: boolean },
  ) {
    const payload = o.payload ?? new Bun.CryptoHasher("sha256").update(o.bytes).digest("hex");
    // As the gateway reads it: a payload that is a Cid names the file the voucher is for; else the
    // voucher is for the bytes' Cid, sent beside it.
    const signedCid = /^(0x)?[0-9a-fA-F]{64}$/.test(payload) ? undefined : canonicalOrUndefined(payload);
    const cid = signedCid ?? (await cidOfStream(new Blob([o.bytes as Uint8Array<ArrayBuffer>]).stream()));
    // Room for this file and 1 MB that others count meanwhile (requests built at once, sent in
    // parallel), and a size drawn from 2^40: each voucher is accepted once (D6), and a random
    // part of 0–1 MB alone sometimes left too little room or collided (a flaky 402).
    const size = ((await made.storage?.vouchers.usedBy(s.account.address)) ?? 0) + o.bytes.byteLength + VOUCHER_ROOM + Math.floor(Math.random() * 2 ** 40);
    const fields: Record<string, string | undefined> = {
      did: s.did,
      token: s.token,
      requestID: String(o.requestID),
      payload,
      signature: await sign.request(s.account, { did: s.did, token: s.token, requestID: o.requestID, action: "upload", payload }),
      size: String(size),
      sign: await sign.voucher(s.account, size, cid),
      ...(signedCid ? {} : { cid }),
      ...o.fields,
    };
    const form = new FormData();
    const file = () => form.append("file", new Blob([o.bytes]), o.name ?? "file.bin");
    if (o.fileFirst) file();
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) form.append(k, v);
    if (!o.fileFirst) file();
    return new Request(`${BASE}/${o.kind ?? "dfs"}/`, { method: "POST", headers: { authorization: `Bearer ${s.accessToken}` }, body: form });
  }

  /**
   * Another gateway over the same database, chain and blob store (D16), as a second process
   * would be: the same wiring again, so services and a quota meter (with its own gateway id) of
   * its own, nothing shared in memory with this one but the back-ends' handles.
   */
  function another() {
    const other = wire();
    return { app: other.app, storage: other.storage, quota: other.quota };
  }

  return { ...made, composed, ageIdentity, directory: composed.directory, indexer: composed.indexer, chain, backends, blobs, resolver, registryReads, fetch, user, domain, seller, sign, session, uploadRequest, another };
}

/** A contract read as the resolver asked it. */
export interface RegistryRead {
  functionName: string;
  args: readonly unknown[];
}

/** `client`, its contract reads logged in `into`: the resolver reads the chain only this way. */
function countingReads<C extends { readContract: (p: never) => unknown }>(client: C, into: RegistryRead[]): C {
  return new Proxy(client, {
    get(target, prop, receiver) {
      if (prop !== "readContract") return Reflect.get(target, prop, receiver);
      return (p: { functionName: string; args?: readonly unknown[] }) => {
        into.push({ functionName: p.functionName, args: p.args ?? [] });
        return (target.readContract as (p: unknown) => unknown)(p);
      };
    },
  });
}

function canonicalOrUndefined(text: string): string | undefined {
  try {
    return canonicalCid(text);
  } catch {
    return undefined;
  }
}

/** A user-generated login token (D4: 16–64 bytes of hex). */
export const newToken = (bytes = 32): Hex => `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex")}`;
