/**
 * A whole storage gateway for `app.handle()` tests, on real parts: anvil with our contracts, a
 * SQLite file, the dfs store and an embedded Helia node, with SDK clients for new users.
 */
import { afterAll } from "bun:test";
import { join } from "node:path";
import type { LocalAccount } from "viem";
import { storageDomain } from "../../src/identity/eip712.ts";
import { ethrResolver } from "../../src/identity/resolver.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { openDfs } from "../../src/storage/dfs/index.ts";
import { openIpfs } from "../../src/storage/ipfs/index.ts";
import { createStorage, type ReadGrant, type StorageDeps } from "../../src/storage/service.ts";
import type { Backend, BackendKind } from "../../src/storage/backend.ts";
import { appFetch, testApp } from "./app.ts";
import { testChain } from "./chain.ts";

export const BASE = "http://stowage.test";

export interface GatewayOptions {
  env?: Record<string, string>;
  /** How long DID lookups are cached (D2: at most 10 s). */
  resolverCacheMs?: number;
  ipfs?: boolean;
  readGrant?: ReadGrant;
  extra?: Partial<StorageDeps>;
}

export async function testGateway(opts: GatewayOptions = {}) {
  const chain = await testChain();
  const backends: Partial<Record<BackendKind, Backend>> = {};
  const resolver = ethrResolver({ publicClient: chain.context.publicClient, registry: chain.context.contracts.didRegistry, cacheMs: opts.resolverCacheMs ?? 10_000 });
  const made = testApp({
    chain: chain.context,
    env: { STOWAGE_PUBLIC_URL: BASE, ...opts.env },
    storage: ({ config, db, log, accounts }) =>
      createStorage({
        db,
        log,
        chainId: config.chainId,
        maxBody: config.maxBody,
        backends,
        tokens: accounts.tokens,
        users: accounts.users,
        resolver,
        domain: storageDomain(config.chainId, chain.context.contracts.proxy),
        seller: chain.operator.address,
        readGrant: opts.readGrant,
        ...opts.extra,
      }),
  });
  backends.dfs = await openDfs({ dir: join(made.dataDir, "dfs"), db: made.database.db, log: made.log });
  if (opts.ipfs !== false) backends.ipfs = await openIpfs({ dir: join(made.dataDir, "ipfs"), listen: ["/ip4/127.0.0.1/tcp/0"], db: made.database.db, log: made.log });
  afterAll(async () => {
    for (const b of Object.values(backends)) await b.stop();
  });
  const fetch = appFetch(made.app);

  /** A new user with an SDK client (not yet logged in unless `login`). */
  async function user(o: { account?: LocalAccount; did?: string; login?: boolean } = {}) {
    const account = o.account ?? (await chain.anvil.newAccount());
    const client = await connectStorage({ baseUrl: BASE, account, did: o.did, fetch });
    if (o.login !== false) await client.login();
    return { account, client };
  }

  return { ...made, chain, backends, resolver, fetch, user };
}
