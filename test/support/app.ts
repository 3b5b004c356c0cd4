/** An app over a real SQLite file in a temp dir, for `app.handle()` tests. */
import { afterAll } from "bun:test";
import { buildApp } from "../../src/app.ts";
import { parseConfig } from "../../src/config.ts";
import { testDatabase } from "./db.ts";
import { silentLogger, type Logger } from "../../src/log.ts";
import { tempDir } from "./tmp.ts";
import { blobEnv, setsBlobs } from "./blobs.ts";
import { StorageApiError } from "../../src/sdk/storage.ts";
import type { ChainContext } from "../../src/chain/types.ts";
import { createAccountServices, type AccountDeps, type AccountServices } from "../../src/accounts/index.ts";
import type { DidResolver } from "../../src/identity/resolver.ts";
import type { Config } from "../../src/config.ts";
import type { Sql } from "../../src/db/sql.ts";
import type { Storage } from "../../src/storage/service.ts";
import type { Quota } from "../../src/quota/index.ts";
import type { Keys } from "../../src/keys/index.ts";
import { createEncryption } from "../../src/encryption/index.ts";

/** `accounts` overrides parts of the account services: a clock, a mailer, a chain client, limits. */
export interface TestAppOptions {
  env?: Record<string, string>;
  log?: Logger;
  chain?: ChainContext;
  /** Without a `resolver`, the DID registry of a chain where nothing changed (`selfOwned`). */
  accounts?: Partial<AccountDeps>;
  /** Builds the storage service over this app's database and account services. */
  storage?: (ctx: { config: Config; sql: Sql; log: Logger; accounts: AccountServices; dataDir: string; quota?: Quota }) => Storage;
  /** Builds metering and payments over this app's database. */
  quota?: (ctx: { sql: Sql; log: Logger }) => Quota;
  /** Builds the S3 access keys service (D18) over this app's database and secrets key. */
  keys?: (ctx: { sql: Sql; secretsKey: Uint8Array }) => Keys;
}

/**
 * A DID registry in which no identity has changed: each address owns its own DID and nobody else
 * signs for it. For account tests without our contracts on a chain; storage tests ask the real
 * registry (support/storage.ts).
 */
export const selfOwned: DidResolver = { canSign: async (did, signer) => did.address.toLowerCase() === signer.toLowerCase() };

export function testApp(opts: TestAppOptions = {}) {
  const dataDir = tempDir("app");
  // On the S3 pass (STOWAGE_TEST_BLOBS=s3, blobs.ts) the app is configured for the shared RGW.
  const config = parseConfig([], { STOWAGE_DATA_DIR: dataDir, ...(setsBlobs(opts.env) ? {} : blobEnv(dataDir)), ...opts.env });
  // A SQLite file in the data dir, or PostgreSQL on the STOWAGE_TEST_DB=postgres pass (db.ts).
  const database = testDatabase(dataDir);
  afterAll(() => database.close());
  const log = opts.log ?? silentLogger;
  const secrets = { jwtKey: crypto.getRandomValues(new Uint8Array(32)), secretsKey: crypto.getRandomValues(new Uint8Array(32)) };
  const accounts = createAccountServices({ config, sql: database.sql, log, secrets, resolver: selfOwned, publicClient: opts.chain?.publicClient, ...opts.accounts });
  const quota = opts.quota?.({ sql: database.sql, log });
  const storage = opts.storage?.({ config, sql: database.sql, log, accounts, dataDir, quota });
  const keys = opts.keys?.({ sql: database.sql, secretsKey: secrets.secretsKey });
  const encryption = createEncryption({ sql: database.sql });
  const app = buildApp({ config, log, health: { database: () => database.sql.get("SELECT 1 AS one") }, chain: opts.chain, accounts, storage, quota, keys, encryption });
  return { app, config, database, log, dataDir, accounts, secrets, storage, quota, keys, encryption };
}

export const get = (path: string, init?: RequestInit) => new Request(`http://stowage.test${path}`, init);

/**
 * `request` as a client that sends the first `sent` bytes of its body and then stalls, with the
 * whole body's Content-Length declared: `abort()` breaks the body as a vanished client does,
 * `finish()` sends the rest. An answer given before `finish()` was given without the rest.
 */
export async function stalledRequest(request: Request, sent: number) {
  const body = new Uint8Array(await request.arrayBuffer());
  let fail!: (err: Error) => void;
  let resume!: () => void;
  const stalled = new Promise<void>((ok, reject) => ((fail = reject), (resume = ok)));
  let given = false;
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!given) {
        given = true;
        return controller.enqueue(body.subarray(0, sent));
      }
      try {
        await stalled;
        controller.enqueue(body.subarray(sent));
        controller.close();
      } catch (err) {
        controller.error(err);
      }
    },
  });
  const headers = new Headers(request.headers);
  headers.set("content-length", String(body.byteLength));
  // `duplex` is missing from Bun's RequestInit type; a streamed request body needs it.
  const stalledOne = new Request(request.url, { method: request.method, headers, body: stream, duplex: "half" } as RequestInit);
  return { request: stalledOne, abort: () => fail(new Error("client went away")), finish: resume };
}

export function postJson(path: string, body: unknown, headers: Record<string, string> = {}) {
  return new Request(`http://stowage.test${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
}

// biome-ignore lint: tests read arbitrary JSON bodies field by field; `any` keeps those reads short.
export type Json = any;
export const readJson = async (r: Response): Promise<Json> => r.json();

/** What a `fetch` was called with, as one Request (for fetches that look at it before passing it on). */
export const toRequest = (input: string | URL | Request, init?: RequestInit): Request =>
  input instanceof Request ? new Request(input, init) : new Request(input instanceof URL ? input.href : input, init);

/** A `fetch` that hands every request to the app, for SDK tests without a socket. */
export function appFetch(app: { handle(request: Request): Promise<Response> }): typeof fetch {
  return ((input: string | URL | Request, init?: RequestInit) => app.handle(toRequest(input, init))) as typeof fetch;
}

/** The HTTP status an SDK call ended with: 200, or its StorageApiError's status. */
export async function statusOf(call: Promise<unknown>): Promise<number> {
  try {
    await call;
    return 200;
  } catch (err) {
    if (err instanceof StorageApiError) return err.status;
    throw err;
  }
}
