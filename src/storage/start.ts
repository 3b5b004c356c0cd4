/**
 * Starts the storage part of the server: the `dfs` store and the embedded IPFS node under the
 * data dir, the DID resolver over the chain's registry, and the storage service.
 */
import { join } from "node:path";
import type { AccountServices } from "../accounts/index.ts";
import type { ChainContext } from "../chain/types.ts";
import type { Config } from "../config.ts";
import type { Db } from "../db/open.ts";
import { storageDomain } from "../identity/eip712.ts";
import { ethrResolver } from "../identity/resolver.ts";
import type { Logger } from "../log.ts";
import type { Backend, BackendKind } from "./backend.ts";
import { openDfs } from "./dfs/index.ts";
import { openIpfs } from "./ipfs/index.ts";
import { createStorage, type StorageDeps } from "./service.ts";

/** The storage service over open back-ends, wired as the server wires it; `extra` overrides. */
export function storageOver(
  { config, db, log, chain, accounts, backends }: { config: Config; db: Db; log: Logger; chain: ChainContext; accounts: Pick<AccountServices, "tokens" | "users">; backends: Partial<Record<BackendKind, Backend>> },
  extra: Partial<StorageDeps> = {},
) {
  return createStorage({
    db,
    log,
    chainId: config.chainId,
    maxBody: config.maxBody,
    backends,
    tokens: accounts.tokens,
    users: accounts.users,
    resolver: extra.resolver ?? ethrResolver({ publicClient: chain.publicClient, registry: chain.contracts.didRegistry }),
    domain: storageDomain(config.chainId, chain.contracts.proxy),
    seller: chain.operator.account.address,
    rateLimits: config.rateLimits !== "off",
    ...extra,
  });
}

export async function startStorage(deps: { config: Config; db: Db; log: Logger; chain: ChainContext; accounts: AccountServices; extra?: Partial<StorageDeps> }) {
  const { config, db, log, chain, accounts } = deps;
  const backends: Partial<Record<BackendKind, Backend>> = {};
  const stop = async () => {
    for (const b of Object.values(backends)) await b.stop();
  };
  try {
    backends.dfs = await openDfs({ dir: join(config.dataDir, "dfs"), db, log });
    const ipfs = await openIpfs({ dir: join(config.dataDir, "ipfs"), listen: config.ipfsListen, db, log });
    backends.ipfs = ipfs;
    log.info("ipfs node ready", { peerId: ipfs.peerId, addresses: ipfs.multiaddrs() });
  } catch (err) {
    await stop();
    throw err;
  }
  const storage = storageOver({ config, db, log, chain, accounts, backends }, deps.extra);
  const health = Object.fromEntries(Object.entries(backends).map(([kind, b]) => [kind, () => b.health()]));
  return { storage, backends, health, stop };
}
