/**
 * D3: a DID login's refresh token works while the key that logged in may sign for the DID, and
 * stops (revoking the session) once that key is revoked in the registry.
 */
import { expect, test } from "bun:test";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { connectGateway } from "../../src/sdk/chain.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { postJson, readJson } from "../support/app.ts";
import { BASE, testGateway } from "../support/storage.ts";

const gw = await testGateway({ resolverCacheMs: 0, ipfs: false });

const refresh = async (token: string) => {
  const res = await gw.app.handle(postJson("/v2/login/refresh", {}, { authorization: token }));
  return { status: res.status, body: await readJson(res) };
};

test("a delegate's session refreshes until the delegate is revoked", async () => {
  const owner = await gw.chain.anvil.newAccount();
  const delegate = privateKeyToAccount(generatePrivateKey());
  const chain = await connectGateway(BASE, { account: owner, fetch: gw.fetch });
  await chain.addDelegate(delegate.address, 3600n);

  const did = `did:ethr:0x3d9:${owner.address}`;
  const store = await connectStorage({ baseUrl: BASE, account: delegate, did, fetch: gw.fetch });
  const { refreshToken } = await store.login();
  const first = await refresh(refreshToken);
  expect(first.status).toBe(200);
  expect(first.body.result).toBe(1);

  await chain.revokeDelegate(delegate.address);
  const after = await refresh(first.body.data.refreshToken);
  expect(after.status).toBe(401);
  expect(after.body).toMatchObject({ result: -1 });
  // The whole session is over, not just that token.
  expect((await refresh(refreshToken)).status).toBe(401);
});

test("the owner's own session keeps refreshing", async () => {
  const { client } = await gw.user({ login: false });
  const { refreshToken } = await client.login();
  const r = await refresh(refreshToken);
  expect(r.status).toBe(200);
  expect((await refresh(r.body.data.refreshToken)).status).toBe(200);
});
