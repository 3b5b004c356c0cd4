/**
 * `stowage serve`: prepares the data directory, starts every component, listens, and on stop
 * drains in-flight requests before closing the components in reverse order.
 */
import type { Config } from "./config.ts";
import type { Logger } from "./log.ts";
import { acquireLock } from "./datadir/lock.ts";
import { loadSecrets } from "./datadir/secrets.ts";
import { makePrivate } from "./datadir/private.ts";
import { openStore } from "./db/connect.ts";
import { installationId } from "./db/installation.ts";
import { gatewayId } from "./datadir/gateway-id.ts";
import { createHandler } from "./http/handler.ts";
import { storageError } from "./http/errors.ts";
import { listen, type Listener } from "./http/listen.ts";
import { startChain } from "./chain/start.ts";
import { createAccountServices } from "./accounts/index.ts";
import { ethrResolver } from "./identity/resolver.ts";
import { startS3Api } from "./s3api/index.ts";
import { findAccessKey } from "./keys/index.ts";
import { gatewayIdentity } from "./encryption/index.ts";
import { indexerLag } from "./chain/indexer.ts";
import { compose } from "./compose.ts";
import { startStorage } from "./storage/start.ts";
import { createMetrics, readAtMostEvery, routeLabels, serveMetrics } from "./metrics/index.ts";
import { aborted, singleton } from "./db/leases.ts";
import { checkPorts } from "./ports.ts";
import { ConfigError } from "./config.ts";
import { createDenylist, DenylistFileError, type Denylist } from "./denylist/index.ts";
import { usageTotals } from "./ops/usage.ts";

export interface RunningServer {
  /** The address it listens on, with the real port when 0 was asked for. */
  url: string;
  /** The S3 API's address, when it is on. */
  s3Url?: string;
  stop(): Promise<void>;
}

/** How often expired quota holds are cleared. */
const HOLDS_CLEAR_MS = 10 * 60_000;

/** Multipart framing around a file: allowed on top of STOWAGE_MAX_BODY so a max-size file fits. */
const FRAMING_SLACK = 1024 * 1024;

export async function startServer(config: Config, log: Logger): Promise<RunningServer> {
  // Before anything starts: a busy port is a bad setting, found in milliseconds, all at once.
  await checkPorts(config);
  makePrivate(config.dataDir, log); // umask 077 too: all that follows writes private files
  const cleanup: (() => unknown)[] = [];
  const closeAll = async () => {
    for (const close of cleanup.splice(0).reverse()) {
      try {
        await close();
      } catch (err) {
        log.error("shutdown step failed", { err: (err as Error).message });
      }
    }
  };
  try {
    const lock = acquireLock(config.dataDir);
    cleanup.push(() => lock.release());
    const secrets = loadSecrets(config.dataDir, config);
    // SQLite in the data dir, or the cluster's PostgreSQL (STOWAGE_DATABASE_URL, D16).
    const database = await openStore(config, log);
    cleanup.push(() => database.close());

    const installation = await installationId(database.sql);
    // This gateway's name in the cluster's leases (the indexer, the sweeps): one per data dir.
    const gateway = gatewayId(config.dataDir);
    log.info("gateway", { id: gateway, installation });
    const metrics = createMetrics();
    const chain = await startChain(config, secrets, log, metrics.rpc);
    cleanup.push(() => chain.stop());
    const resolver = ethrResolver({ publicClient: chain.context.publicClient, registry: chain.context.contracts.didRegistry });
    const accounts = createAccountServices({
      config,
      sql: database.sql,
      log,
      secrets,
      publicClient: chain.context.publicClient,
      // Tokens act for a DID while the key that signed in may sign for it (D21): asked at every use and refresh.
      resolver,
    });
    // The denylist (D25) before anything serves: its files and the operator's blocks, checked on
    // every read (bitswap's included) and every upload.
    const denylist = await openDenylist(config, database.sql, log, metrics.blocked);
    cleanup.push(() => denylist.stop());
    // The back-ends first (each opens its store, the sweeps run as one cluster singleton); the
    // services over them are wired once the public URL is known.
    const stored = await startStorage({ config, sql: database.sql, gatewayId: gateway, log, denylist });
    cleanup.push(() => stored.stop());
    // Bind first: with --port 0 the real port is known only now, and the public URL names it.
    let handle = async (_: Request) => storageError.unavailable("starting").toResponse();
    const routes = routeLabels();
    const server = await listen({
      hostname: config.host,
      port: config.port,
      maxRequestBodySize: config.maxBody + FRAMING_SLACK,
      minBodyRate: config.minBodyRate,
      fetch: createHandler({
        handle: (r) => handle(r),
        log,
        corsOrigins: config.corsOrigins,
        trustProxy: config.trustProxy,
        observe: (request, status, seconds) => metrics.request(request.method, routes.of(request), status, seconds),
      }),
      error(err) {
        log.error("server error", { err: err.message });
        return storageError.internal().toResponse();
      },
    });
    cleanup.push(() => server.stop(true));
    const effective: Config = config.port === 0 ? { ...config, publicUrl: config.publicUrl.replace(/:0$/, `:${server.port}`) } : config;
    const gw = compose(
      { config: effective, sql: database.sql, log, chain: chain.context, deployBlock: BigInt(chain.deployment.block), secrets, accounts, backends: stored.backends, store: stored.blobs.store, ageIdentity: gatewayIdentity(config.ageIdentity, secrets.ageKey) },
      {
        resolver,
        gatewayId: gateway,
        metrics,
        routes,
        denylist,
        // One indexer in the cluster (D16): its cursor writes are fenced by the "indexer" lease's epoch.
        fence: () => indexing.held(),
        health: {
          ...stored.health,
          chain: () => chain.health(),
          database: async () => {
            if (database.sql.failure) throw database.sql.failure;
            await database.sql.get("SELECT 1 AS one");
            return { dialect: database.dialect, installation };
          },
        },
      },
    );
    const quota = gw.quota as NonNullable<typeof gw.quota>;
    // This gateway's own holds are its previous process's, which died with its transfers (a
    // kill -9): cleared before anything is served, they no longer keep accounts full until they
    // expire. Of the others only expired holds: live ones may be another gateway's (D16). Expired
    // ones count against no pool, but a dead gateway's rows would stay: every gateway clears them
    // now and then (one idempotent DELETE, so no lease is needed).
    const own = await quota.meter.clearOwn();
    if (own > 0) log.info("cleared the quota holds of this gateway's previous process", { holds: own });
    await quota.meter.clearStale();
    const holds = setInterval(() => void quota.meter.clearStale().catch((err) => log.warn("clearing expired quota holds failed", { err: (err as Error).message })), HOLDS_CLEAR_MS);
    holds.unref();
    cleanup.push(() => clearInterval(holds));
    // The indexer runs on the gateway holding the "indexer" lease.
    const indexing = singleton(
      database.sql,
      "indexer",
      gateway,
      async ({ signal }) => {
        gw.indexer.start();
        await aborted(signal);
        await gw.indexer.stop();
      },
      { log },
    );
    indexing.start();
    cleanup.push(() => indexing.stop());
    // Pins in flight are rows: this gateway works those it claims, under their own leases (D25).
    gw.pins.worker.start();
    cleanup.push(() => gw.pins.worker.stop());
    metrics.gauges({
      reservations: quota.meter.live,
      indexerLag: () => indexerLag(database.sql, chain.context.publicClient),
      peers: async () => Number((await stored.backends.ipfs?.health())?.connections ?? 0),
      usage: readAtMostEvery(() => usageTotals(database.sql)),
      pins: readAtMostEvery(() => gw.pins.counts()),
      denylist: () => denylist.size,
    });
    if (config.metricsListen !== "") {
      // Its own listener, never the public port (D19); a busy address stops the start by name.
      const served = listenMetrics(config.metricsListen, metrics.registry);
      cleanup.push(() => served.stop());
      log.info("metrics listening", { url: `${served.url}/metrics` });
    }
    handle = (r) => gw.app.handle(r);
    const url = `http://${config.host}:${server.port}`;
    // The S3-compatible API (D18) on its own port: the same storage, its access keys' lookup.
    let s3Url: string | undefined;
    if (config.s3ApiPort !== 0) {
      const s3 = await startS3Api({
        hostname: config.host,
        port: config.s3ApiPort,
        maxBody: config.maxBody,
        minBodyRate: config.minBodyRate,
        log,
        sql: database.sql,
        chainId: config.chainId,
        direct: gw.direct,
        findAccessKey: (id) => findAccessKey({ sql: database.sql, secretsKey: secrets.secretsKey, resolver, chainId: config.chainId }, id),
      });
      cleanup.push(() => s3.stop());
      s3Url = s3.url;
    }
    return {
      url,
      s3Url,
      async stop() {
        await drain(server, config.shutdownTimeout, log);
        await closeAll();
      },
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/** The denylist of STOWAGE_DENYLIST and the operator's blocks; a file it cannot read stops the start, named. */
async function openDenylist(config: Config, sql: Parameters<typeof createDenylist>[0]["sql"], log: Logger, onBlocked: (door: string) => void): Promise<Denylist> {
  try {
    return await createDenylist({ sql, log, files: config.denylist, onBlocked });
  } catch (err) {
    if (err instanceof DenylistFileError) throw new ConfigError(`STOWAGE_DENYLIST: ${err.message}`);
    throw err;
  }
}

/** Stops accepting, waits for in-flight requests up to the limit, then cuts what is left. */
async function drain(server: Listener, limitMs: number, log: Logger) {
  let timer: Timer | undefined;
  const cut = new Promise<"cut">((ok) => {
    timer = setTimeout(() => ok("cut"), limitMs);
  });
  const outcome = await Promise.race([server.stop(false).then(() => "drained" as const), cut]);
  clearTimeout(timer);
  if (outcome === "cut") {
    log.warn("shutdown: cutting connections still open", { pending: server.pendingRequests });
    await server.stop(true);
  }
}

function listenMetrics(address: string, registry: Parameters<typeof serveMetrics>[1]) {
  try {
    return serveMetrics(address, registry);
  } catch (err) {
    throw new Error(`STOWAGE_METRICS_LISTEN ${address}: ${(err as Error).message}`);
  }
}
