/**
 * Builds the whole HTTP app from its services. No socket here: tests call `app.handle()`, and
 * `server.ts` puts it behind the HTTP listener (`http/listen.ts`).
 *
 * @example
 *   const app = buildApp({ config, log, accounts, health: { database: () => sql.get("SELECT 1 AS one") } })
 *   const res = await app.handle(new Request("http://local/healthz"))
 */
import { Elysia } from "elysia";
import { openapi } from "@elysiajs/openapi";
import type { Config } from "./config.ts";
import type { Logger } from "./log.ts";
import { errorHandler } from "./http/error-handler.ts";
import { securitySchemes } from "./http/openapi.ts";
import { openapiAssets, openapiUi } from "./http/openapi-ui.ts";
import { healthRoutes, type HealthCheck } from "./http/health.ts";
import { version } from "./version.ts";
import { chainRoutes } from "./chain/routes.ts";
import { rpcLimits } from "./chain/public-rpc.ts";
import type { ChainContext } from "./chain/types.ts";
import { accountRoutes, type AccountServices } from "./accounts/index.ts";
import { bodyLimit } from "./http/body-limit.ts";
import { storageRoutes, type PathAnswer, type TrustlessAnswer } from "./storage/routes.ts";
import type { Storage } from "./storage/service.ts";
import type { Gateway } from "./gateway/service.ts";
import { pathAnswer, pathRoutes, siteRoutes, trustlessAnswer } from "./gateway/routes.ts";
import { directoryRoutes, type Directory } from "./directory/index.ts";
import { quotaRoutes, type Quota } from "./quota/index.ts";
import { keysRoutes, type Keys } from "./keys/index.ts";
import { encryptionRoutes, type Encryption } from "./encryption/index.ts";
import type { RouteLabels } from "./metrics/index.ts";
import { grantsRoutes, type Grants } from "./grants/index.ts";
import { consoleRoutes } from "./console/index.ts";
import { pinsBodyLimit, pinsErrorEdge, pinsRoutes, type Pins } from "./pins/index.ts";

export interface AppServices {
  config: Config;
  log: Logger;
  health: Record<string, HealthCheck>;
  /** Absent only in tests of parts that need no chain. */
  chain?: ChainContext;
  /** The account API (/v2): built by `createAccountServices`. */
  accounts: AccountServices;
  /** Absent only in tests of parts that need no storage. */
  storage?: Storage;
  /** The IPFS trustless and path gateways on /ipfs/<cid>[/path] (D17, D25); absent, /ipfs/<cid> is only the download. */
  gateway?: Gateway;
  /** The file directory's search (GET /challenge); absent in tests that need none. */
  directory?: Pick<Directory, "search">;
  /** Quota records, enforcement and purchases; absent in tests that need none. */
  quota?: Quota;
  /** S3 access keys (D18); absent in tests that need none. */
  keys?: Keys;
  /** Wrapped age identities and shares (D20); absent in tests that need none. */
  encryption?: Encryption;
  /** Console session keys (D19); absent in tests that need none. */
  grants?: Grants;
  /** The Pinning Service API at /psa (D25); absent in tests that need none. */
  pins?: Pins;
  /** Records the route pattern of each request for the metrics' `route` label; absent, none. */
  routes?: RouteLabels;
}

export const OPENAPI_PATH = "/openapi";

export function buildApp(services: AppServices) {
  // Elysia finds a request's path by looking for the first "/" from the 12th character of its URL
  // on, which assumes a host of at least four characters: behind `Host: api` (or `x`, `gw:80`) it
  // found no path, and every route answered 404. Not standard: the search starts after "http://",
  // the scheme of every URL the listener makes (src/http/listen.ts; TLS ends at a proxy before it).
  return new Elysia({ handler: { standardHostname: false } })
    .use(services.routes?.plugin ?? new Elysia())
    .use(errorHandler(services.log, services.pins ? [pinsErrorEdge] : []))
    // Before every other route: on the site origin (STOWAGE_GATEWAY_ORIGIN) only content answers.
    .use(services.gateway ? siteRoutes(services.gateway) : new Elysia())
    .use(services.pins ? pinsBodyLimit : new Elysia())
    .use(bodyLimit)
    .use(openapiAssets(OPENAPI_PATH))
    .use(
      openapi({
        path: OPENAPI_PATH,
        provider: "swagger-ui",
        swagger: openapiUi(OPENAPI_PATH),
        documentation: {
          info: { title: "Stowage", version, description: "Storage middleware (DID login, files on dfs and ipfs, quota) and account API (/v2)." },
          servers: [{ url: services.config.publicUrl }],
          components: { securitySchemes },
        },
      }),
    )
    .use(healthRoutes(services.health, version))
    .use(consoleRoutes({ publicUrl: services.config.publicUrl }))
    .use(accountRoutes(services.accounts))
    .use(services.keys ? keysRoutes({ keys: services.keys, tokens: services.accounts.tokens, chainId: services.config.chainId }) : new Elysia())
    .use(services.grants ? grantsRoutes({ grants: services.grants, tokens: services.accounts.tokens, chainId: services.config.chainId }) : new Elysia())
    .use(services.encryption ? encryptionRoutes({ encryption: services.encryption, tokens: services.accounts.tokens, chainId: services.config.chainId }) : new Elysia())
    .use(services.chain ? chainRoutes({ chain: services.chain, publicUrl: services.config.publicUrl, log: services.log, ageRecipient: services.encryption?.gatewayRecipient, limits: rpcLimits(services.config, services.chain.blockGasLimit) }) : new Elysia())
    .use(services.quota ? quotaRoutes({ ...services.quota, tokens: services.accounts.tokens, chainId: services.config.chainId }) : new Elysia())
    .use(services.directory ? directoryRoutes(services.directory) : new Elysia())
    .use(services.pins ? pinsRoutes(services.pins) : new Elysia())
    .use(services.gateway ? pathRoutes(services.gateway) : new Elysia())
    .use(
      services.storage
        ? storageRoutes(services.storage, { tokens: services.accounts.tokens, chainId: services.config.chainId }, services.gateway ? { trustless: trustless(services.gateway), path: paths(services.gateway) } : {})
        : new Elysia(),
    );
}

export type App = ReturnType<typeof buildApp>;

const trustless =
  (gateway: Gateway): TrustlessAnswer =>
  (request, type, cid, query) =>
    trustlessAnswer(gateway, request, type, cid, query);

const paths =
  (gateway: Gateway): PathAnswer =>
  (request, query) =>
    pathAnswer(gateway, request, query);
