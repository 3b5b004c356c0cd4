/**
 * One gateway's services wired together, once: `stowage serve` (server.ts) and the test supports
 * both call `compose`, so a test's gateway is the server's wiring and not a copy of it. It takes
 * what is already open (the database, the chain, the back-ends, the blob store, the account
 * services) and makes the rest: quota, the directory and its indexer (not started), S3 access
 * keys, console session keys, the storage service asking the directory and the quota, the
 * encryption escrow, the trustless and path gateways, the S3 API's direct storage, the Pinning
 * Service API (its worker not started), and the HTTP app, each asking the denylist it is given.
 * Nothing here listens, starts a timer or opens a file.
 *
 * @example
 *   const gw = compose({ config, sql, log, chain, secrets, accounts, backends, store })
 *   gw.indexer.start(); listen({ fetch: (r) => gw.app.handle(r) })
 */
import { buildApp } from "./app.ts";
import type { AccountServices } from "./accounts/index.ts";
import type { BlobStore } from "./blob/index.ts";
import { createIndexer } from "./chain/indexer.ts";
import type { ChainContext } from "./chain/types.ts";
import type { Config } from "./config.ts";
import type { Sql } from "./db/sql.ts";
import { createDirectory } from "./directory/index.ts";
import { createEncryption } from "./encryption/index.ts";
import { createGateway } from "./gateway/service.ts";
import { parseSiteOrigin } from "./gateway/site.ts";
import type { Denylist } from "./denylist/index.ts";
import { createGrants } from "./grants/index.ts";
import type { HealthCheck } from "./http/health.ts";
import { storageDomain } from "./identity/eip712.ts";
import { ethrResolver, type DidResolver } from "./identity/resolver.ts";
import { createKeys } from "./keys/index.ts";
import type { Logger } from "./log.ts";
import type { Metrics, RouteLabels } from "./metrics/index.ts";
import { createQuota } from "./quota/index.ts";
import { quotaEventsConsumer } from "./quota/events.ts";
import { publishedRecipient } from "./sdk/key-agreement.ts";
import type { Backend, BackendKind } from "./storage/backend.ts";
import { createDirectStorage } from "./storage/direct.ts";
import { storedBytesSql } from "./storage/files.ts";
import { storedFiles } from "./storage/head.ts";
import type { StorageDeps } from "./storage/service.ts";
import { createSessions, openSession } from "./authorities/sessions.ts";
import { siweSignatureValid } from "./accounts/evm.ts";
import { storageOver } from "./storage/start.ts";
import type { Lease } from "./db/leases.ts";
import { createPins, type PinBackend } from "./pins/index.ts";

export interface ComposeParts {
  config: Config;
  sql: Sql;
  log: Logger;
  chain: ChainContext;
  /** The block our contracts were deployed at: where indexing starts. */
  deployBlock: bigint;
  secrets: { secretsKey: Uint8Array };
  accounts: AccountServices;
  /** The open back-ends; looked up on each call, so they may be opened after `compose` returns. */
  backends: Partial<Record<BackendKind, Backend>>;
  /** The blob store the ipfs blocks live in: the trustless gateway serves from it (none: no gateway). */
  store?: BlobStore;
  /** This gateway's age identity (`AGE-SECRET-KEY-1…`): encrypted entries escrow their keys to it. */
  ageIdentity: string;
}

export interface ComposeOptions {
  /** The DID resolver; by default the chain's registry with the server's cache. */
  resolver?: DidResolver;
  /** This gateway's id in the cluster (its quota holds carry it); by default a random one. */
  gatewayId?: string;
  /** Quota enforcement with the chain's records (on unless false); `maxAgeMs` is the records' cache. */
  quota?: false | { maxAgeMs?: number };
  /** The server's metrics: transfers, purchases and public reads are counted there. */
  metrics?: Pick<Metrics, "transferred" | "purchase">;
  routes?: RouteLabels;
  health?: Record<string, HealthCheck>;
  /** The indexer's lease (a cluster runs one indexer); none in one process. */
  fence?: () => Lease | undefined;
  /** The storage service's settings beyond the server's (tests turn limits off, or stand in hooks). */
  storage?: Partial<StorageDeps>;
  /** Rate limits of the storage API and the key service (the setting's; tests turn them off). */
  rateLimits?: boolean;
  /** The directory indexer's poll interval. */
  pollMs?: number;
  /** Content this gateway blocks (D25): downloads, S3, both gateways answer 410, uploads are refused. */
  denylist?: Pick<Denylist, "check" | "refuseUpload" | "servable" | "blocking">;
}

export function compose(parts: ComposeParts, opts: ComposeOptions = {}) {
  const { config, sql, log, chain, accounts, backends } = parts;
  const chainId = config.chainId;
  const domain = storageDomain(chainId, chain.contracts.proxy);
  const resolver = opts.resolver ?? ethrResolver({ publicClient: chain.publicClient, registry: chain.contracts.didRegistry });
  const rateLimits = opts.rateLimits ?? config.rateLimits !== "off";
  const quota = opts.quota === false ? undefined : createQuota({ sql, chain, log, storedBytes: storedBytesSql, gateway: opts.gatewayId, maxAgeMs: opts.quota?.maxAgeMs, onPurchase: opts.metrics?.purchase });
  const directory = createDirectory({ sql, chainId, address: chain.contracts.directory, fromBlock: parts.deployBlock, publicClient: chain.publicClient });
  const indexer = createIndexer({
    sql,
    publicClient: chain.publicClient,
    confirmations: config.chainConfirmations ?? (chain.embedded ? 0 : 6),
    pollMs: opts.pollMs ?? config.indexerPoll,
    log,
    fence: opts.fence,
  });
  // Capabilities that follow chain events add their consumers here.
  indexer.add(directory.consumer);
  indexer.add(quotaEventsConsumer({ address: chain.contracts.proxy, fromBlock: parts.deployBlock }));
  // S3 access keys (D18): minted by restricted requests signed in the storage domain, valid while their signer may sign for the DID.
  const keys = createKeys({ sql, secretsKey: parts.secrets.secretsKey, resolver, chainId, domain, rateLimits, log });
  // Console session keys (D19): storage accepts them for uploads, deletes and vouchers.
  const grants = createGrants({
    sql,
    resolver,
    chainId,
    allowedOrigins: config.allowedOrigins,
    verifySignature: (address, message, signature) => siweSignatureValid({ publicClient: chain.publicClient, log }, address, message, signature),
    // A registered grant opens its key's storage session: the key never signs a login.
    openSession: async (did, token) => void (await openSession(sql, did, token, Math.floor(Date.now() / 1000))),
  });
  const storage = storageOver(
    { config, sql, log, chain, accounts, backends },
    {
      resolver,
      sessionKeys: grants,
      readGrant: directory.readGrant,
      publicCids: directory.publicCids,
      publicSql: directory.publicSql,
      meter: quota?.meter,
      onTransfer: opts.metrics?.transferred,
      rateLimits,
      denylist: opts.denylist,
      ...opts.storage,
    },
  );
  const encryption = createEncryption({
    sql,
    // Replacing a stored age identity is a signed restricted request (D5, action "age"), as minting an S3 key is.
    sessions: createSessions({ sql, resolver, domain, chainId }),
    // D20: priced encrypted entries escrow their keys to this identity; buyers' shares come from it.
    escrow: {
      identity: parts.ageIdentity,
      storedFile: storedFiles({ sql, backends, chainId }),
      bought: directory.bought,
      published: directory.published,
      recipientOf: (reader) => publishedRecipient(chain.publicClient, chain.contracts.didRegistry, reader),
    },
  });
  const transferred = opts.metrics?.transferred;
  const gateway = parts.store
    ? createGateway({
        sql,
        store: parts.store,
        allowance: config.publicEgress,
        perClient: config.publicEgressPerClient,
        log,
        denylist: opts.denylist,
        // Sites run on their own origin (D23): browsers asking this one for a page are sent there.
        site: config.gatewayOrigin === undefined ? undefined : parseSiteOrigin(config.gatewayOrigin),
        onSent: transferred && ((n) => transferred("ipfs", "out", n)),
      })
    : undefined;
  // The S3 API's door to the same pipeline (D18): the account pays, no voucher.
  const direct = createDirectStorage({ sql, log, maxBody: config.maxBody, backends, meter: quota?.meter, denylist: opts.denylist, onTransfer: transferred, pipeline: storage.pipeline });
  // The Pinning Service API (D25): a pin is an upload through `direct`, its bytes from bitswap.
  const pins = createPins({
    sql,
    log,
    chainId,
    findToken: keys.findPins,
    storage: direct,
    ipfs: () => {
      const b = backends.ipfs;
      // The ipfs back-end that openIpfs made (an IpfsBackend); a Backend without its DAG entry pins nothing.
      return b && "putDag" in b ? (b as unknown as PinBackend) : undefined;
    },
    holder: opts.gatewayId ?? `pins/${crypto.randomUUID()}`,
    settings: { pinTimeout: config.pinTimeout, pinQueue: config.pinQueue, pinOrigins: config.pinOrigins === "any" ? "any" : "public" },
    // Blocked content is refused before any of its blocks is fetched (the file row's refusal is the write path's).
    refuse: opts.denylist && ((cid) => opts.denylist?.refuseUpload(cid, "pin")),
  });
  const app = buildApp({ config, log, chain, accounts, storage, gateway, directory, quota, keys, grants, encryption, pins, routes: opts.routes, health: opts.health ?? {} });
  return { resolver, domain, quota, directory, indexer, keys, grants, storage, encryption, gateway, direct, pins, app };
}

export type Composed = ReturnType<typeof compose>;
