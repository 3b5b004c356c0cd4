/**
 * Starts the storage part of the server: the blob store (D15: local files or S3) with its one
 * deletion guard, the `dfs` store on it, the embedded IPFS node, the DID resolver over the
 * chain's registry, and the storage service. The orphan sweeps of both back-ends run as one
 * cluster singleton (sweeps.ts), not at each back-end's open: with many gateways on one database
 * and one blob store, one gateway sweeps at a time.
 */
import { join } from "node:path";
import { claimDeployment, openBlobStore, type BlobStore } from "../blob/index.ts";
import { createBlobGuard, type BlobGuard } from "../blob/guard.ts";
import type { AccountServices } from "../accounts/index.ts";
import type { ChainContext } from "../chain/types.ts";
import type { Config } from "../config.ts";
import { installationId } from "../db/installation.ts";
import type { Sql } from "../db/sql.ts";
import { storageDomain } from "../identity/eip712.ts";
import { ethrResolver } from "../identity/resolver.ts";
import type { Logger } from "../log.ts";
import type { Backend, BackendKind } from "./backend.ts";
import { openDfs } from "./dfs/index.ts";
import { blockKey, openIpfs, rootsOfBlock, type Servable } from "./ipfs/index.ts";
import type { Denylist } from "../denylist/index.ts";
import { parsePeerAddrs } from "./ipfs/peers.ts";
import { clusterSweeps, type Sweepable } from "./sweeps.ts";
import { createStorage, type StorageDeps } from "./service.ts";

/** The storage service over open back-ends, wired as the server wires it; `extra` overrides. */
export function storageOver(
  { config, sql, log, chain, accounts, backends }: { config: Config; sql: Sql; log: Logger; chain: ChainContext; accounts: Pick<AccountServices, "tokens" | "users" | "limiter">; backends: Partial<Record<BackendKind, Backend>> },
  extra: Partial<StorageDeps> = {},
) {
  return createStorage({
    sql,
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
    loginLimiter: accounts.limiter,
    ...extra,
  });
}

export interface Blobs {
  store: BlobStore;
  /** The one guard of this server over `store`, shared by both back-ends (D15). */
  guard: BlobGuard;
}

/**
 * Opens the configured blob store and claims it for this deployment (its installation id, made
 * once in app_state) before anything sweeps it: a store another deployment claimed is refused.
 */
export async function openBlobs({ config, sql, log }: { config: Config; sql: Sql; log: Logger }): Promise<Blobs> {
  const store = await openBlobStore(config);
  await claimDeployment(store, await installationId(sql));
  return { store, guard: createBlobGuard({ sql, store, log }) };
}

/** The denylist's say on a block bitswap would send (D25): refused when blocked itself, or when
 * only blocked content contains it. */
export const servableBlocks =
  (sql: Sql, denylist: Pick<Denylist, "servable">): Servable =>
  (cid) =>
    denylist.servable(cid, "bitswap", (limit) => rootsOfBlock(sql, blockKey(cid), limit));

/** Opens the back-ends over the blob store and starts their cluster sweeps; the storage service
 * over them is compose()'s. With a denylist, the ipfs node sends no block it blocks to other peers. */
export async function startStorage(deps: { config: Config; sql: Sql; log: Logger; gatewayId: string; denylist?: Pick<Denylist, "servable"> }) {
  const { config, log } = deps;
  const backends: Partial<Record<BackendKind, Backend>> = {};
  let sweeps: ReturnType<typeof clusterSweeps> | undefined;
  const stop = async () => {
    await sweeps?.stop();
    for (const b of Object.values(backends)) await b.stop();
    await blobs.guard.close();
  };
  // A bad STOWAGE_IPFS_PEERS stops the start before anything opens.
  const peers = parsePeerAddrs(config.ipfsPeers);
  const blobs = await openBlobs({ config, sql: deps.sql, log });
  log.info("blob store ready", { kind: blobs.store.kind });
  try {
    const dfs = await openDfs({ sql: deps.sql, log, guard: blobs.guard, legacyDir: join(config.dataDir, "dfs"), sweepAtOpen: false, scrubEveryMs: config.dfsScrubEvery });
    backends.dfs = dfs;
    const servable = deps.denylist && servableBlocks(deps.sql, deps.denylist);
    const ipfs = await openIpfs({ dir: join(config.dataDir, "ipfs"), listen: config.ipfsListen, sql: deps.sql, log, guard: blobs.guard, peers, servable, sweepAtOpen: false });
    backends.ipfs = ipfs;
    log.info("ipfs node ready", { peerId: ipfs.peerId, addresses: ipfs.multiaddrs() });
    // dfs calls the chunks a pass kept for pins `heldChunks`; ipfs reports `held` as it is.
    const dfsSweeps: Sweepable = { kind: "dfs", sweep: async (o) => ({ held: (await dfs.sweep(o)).heldChunks }) };
    sweeps = clusterSweeps({ sql: deps.sql, holder: deps.gatewayId, backends: [dfsSweeps, ipfs], log });
    sweeps.start();
  } catch (err) {
    await stop();
    throw err;
  }
  const health = { blobs: () => ({ kind: blobs.store.kind }), ...Object.fromEntries(Object.entries(backends).map(([kind, b]) => [kind, () => b.health()])) };
  return { backends, blobs, health, stop };
}
