/**
 * A whole gateway for the encryption tests, wired as the server wires it: `testGateway` (anvil,
 * this pass's database, dfs, Helia), storage that asks the directory's `readGrant`, the encryption
 * routes with the gateway's own age identity (escrows, buyers' shares), and an indexer over the
 * same database. Users get the SDK's
 * storage, directory and encryption clients, all talking to the app.
 */
import { afterAll } from "bun:test";
import type { LocalAccount } from "viem";
import { buildApp } from "../../src/app.ts";
import { createEncryption } from "../../src/encryption/index.ts";
import { generateIdentity } from "../../src/sdk/age.ts";
import { publishedRecipient } from "../../src/sdk/key-agreement.ts";
import { storedFiles } from "../../src/storage/head.ts";
import { createSessions } from "../../src/storage/sessions.ts";
import { appFetch } from "../support/app.ts";
import { createIndexer } from "../../src/chain/indexer.ts";
import { createDirectory, type Directory } from "../../src/directory/index.ts";
import { publicSql } from "../../src/directory/access.ts";
import { silentLogger } from "../../src/log.ts";
import { connectDirectory } from "../../src/sdk/directory.ts";
import { connectEncryption } from "../../src/sdk/encryption.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { BASE, testGateway } from "../support/storage.ts";

/** `env`: the gateway's settings (a test serving it over HTTP names its public URL). */
export async function encryptionGateway(o: { env?: Record<string, string> } = {}) {
  let directory: Directory | undefined;
  const gw = await testGateway({
    env: o.env,
    extra: {
      readGrant: (reader, kind, cid) => (directory as Directory).readGrant(reader, kind, cid),
      publicCids: (owner, cids, q) => (directory as Directory).publicCids(owner, cids, q),
      publicSql,
    },
  });
  const sql = gw.database.sql;
  directory = createDirectory({ sql, chainId: gw.config.chainId, address: gw.chain.context.contracts.directory, fromBlock: gw.chain.deployBlock, publicClient: gw.chain.context.publicClient });
  const indexer = createIndexer({ sql, publicClient: gw.chain.anvil.publicClient, confirmations: 0, log: silentLogger, pollMs: 60_000 });
  indexer.add(directory.consumer);
  afterAll(() => indexer.stop());
  const { publicClient, contracts } = gw.chain.context;
  const gatewayIdentity = generateIdentity();
  const encryption = createEncryption({
    sql,
    sessions: createSessions({ sql, resolver: gw.resolver, domain: gw.domain, chainId: gw.config.chainId }),
    escrow: {
      identity: gatewayIdentity,
      storedFile: storedFiles({ sql, backends: gw.backends, chainId: gw.config.chainId }),
      bought: (owner, mid, reader) => (directory as Directory).bought(owner, mid, reader),
      published: (owner, mid) => (directory as Directory).published(owner, mid),
      recipientOf: (reader) => publishedRecipient(publicClient, contracts.didRegistry, reader),
    },
  });
  const app = buildApp({ config: gw.config, log: gw.log, health: {}, chain: gw.chain.context, accounts: gw.accounts, storage: gw.storage, encryption });
  const fetch = appFetch(app);

  /** A funded user logged in to storage, with directory and encryption clients. */
  async function user(account?: LocalAccount) {
    const acct = account ?? (await gw.chain.anvil.newAccount());
    const store = await connectStorage({ baseUrl: BASE, account: acct, fetch });
    await store.login();
    const dir = await connectDirectory(BASE, { account: acct, fetch });
    const enc = await connectEncryption({ baseUrl: BASE, store, account: acct, fetch });
    return { account: acct, address: acct.address, store, dir, enc };
  }

  /** A call to the account API as any client would make it. */
  const call = (method: string, path: string, o: { token?: string; body?: unknown } = {}) =>
    app.handle(
      new Request(`${BASE}${path}`, {
        method,
        headers: { ...(o.token ? { authorization: `Bearer ${o.token}` } : {}), ...(o.body !== undefined ? { "content-type": "application/json" } : {}) },
        ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
      }),
    );

  return { gw, sql, directory, indexer, app, fetch, gatewayIdentity, user, call, sync: () => indexer.syncOnce() };
}
