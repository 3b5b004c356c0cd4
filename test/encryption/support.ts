/**
 * A whole gateway for the encryption tests, wired as the server wires it (`testGateway`, which is
 * the server's `compose`): storage that asks the directory's `readGrant`, the encryption routes
 * with the gateway's own age identity (escrows, buyers' shares), and an indexer over the same
 * database. Users get the SDK's storage, directory and encryption clients, all talking to the app.
 */
import type { LocalAccount } from "viem";
import { appFetch } from "../support/app.ts";
import { connectDirectory } from "../../src/sdk/directory.ts";
import { connectEncryption } from "../../src/sdk/encryption.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { BASE, testGateway } from "../support/storage.ts";

/** `env`: the gateway's settings (a test serving it over HTTP names its public URL). */
export async function encryptionGateway(o: { env?: Record<string, string> } = {}) {
  const gw = await testGateway({ env: o.env });
  const sql = gw.database.sql;
  const { directory, indexer, app } = gw;
  const encryption = gw.composed.encryption;
  const gatewayIdentity = gw.ageIdentity;
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
