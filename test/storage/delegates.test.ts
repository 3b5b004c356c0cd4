// Verification methods (spec 5.1; D2): a delegate key added in the DID registry logs in and acts for
// the DID; once revoked it cannot, at once without a cache and within 10 s with the default one.
import { expect, test } from "bun:test";
import { getAddress } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { connectGateway } from "../../src/sdk/chain.ts";
import { StorageApiError } from "../../src/sdk/storage.ts";
import { get, postJson, readJson } from "../support/app.ts";
import { BASE, newToken, testGateway } from "../support/storage.ts";

const didOf = (address: string) => `did:ethr:0x3d9:${getAddress(address)}`;

/** A fresh owner (funded, for registry transactions) and a fresh delegate key (no funds needed). */
async function ownerAndDelegate(gw: Awaited<ReturnType<typeof testGateway>>) {
  const owner = await gw.chain.anvil.newAccount();
  const delegate = privateKeyToAccount(generatePrivateKey());
  const registry = await connectGateway(BASE, { account: owner, fetch: gw.fetch });
  return { owner, delegate, registry, did: didOf(owner.address) };
}

/** A login by `signer` for `did`, newer than the DID's last one. */
async function handLogin(gw: Awaited<ReturnType<typeof testGateway>>, signer: Parameters<typeof gw.sign.login>[0], did: string) {
  let last = 0;
  try {
    last = (await gw.storage?.loginInfo(did))?.timestamp ?? 0;
  } catch {}
  const timestamp = Math.max(Math.floor(Date.now() / 1000), last + 1);
  const token = newToken();
  const signature = await gw.sign.login(signer, { did, token, timestamp });
  return gw.app.handle(postJson("/login", { did, token, timestamp, signature }));
}

test("without a cache: a delegate logs in and acts for the DID, and once revoked cannot", async () => {
  const gw = await testGateway({ resolverCacheMs: 0, ipfs: false });
  const { owner, delegate, registry, did } = await ownerAndDelegate(gw);

  // Not yet a verification method.
  expect((await handLogin(gw, delegate, did)).status).toBe(401);

  await registry.addDelegate(delegate.address, 3600n);
  expect((await handLogin(gw, delegate, did)).status).toBe(200);

  // The SDK with the delegate key: it logs in, uploads (its vouchers pay for the DID) and lists
  // in the owner's bucket.
  const { client } = await gw.user({ account: delegate, did });
  const entry = await client.upload("dfs", new TextEncoder().encode("signed by a delegate"), { name: "d.txt" });
  const list = await client.list("dfs");
  expect(list.Address).toBe(owner.address);
  expect(list.Object).toEqual([entry]);
  const read = await client.download("dfs", entry.Cid);
  expect(await read.text()).toBe("signed by a delegate");

  // A veriKey delegate counts too.
  const other = privateKeyToAccount(generatePrivateKey());
  await registry.addDelegate(other.address, 3600n, "veriKey");
  expect((await handLogin(gw, other, did)).status).toBe(200);

  await registry.revokeDelegate(delegate.address);
  const refused = await handLogin(gw, delegate, did);
  expect(refused.status).toBe(401);
  expect((await readJson(refused)).Description).toMatch(/not the DID's owner or a valid delegate/);
  // Its open session can no longer make restricted calls either.
  const upload = await client.upload("dfs", new TextEncoder().encode("after revocation"), { name: "late.txt" }).catch((e: unknown) => e);
  expect(upload).toBeInstanceOf(StorageApiError);
  expect((upload as StorageApiError).status).toBe(401);
  const deleted = await client.delete(entry.ID).catch((e: unknown) => e);
  expect((deleted as StorageApiError).status).toBe(401);
  // Nor read the DID's files: its access token is refused (the SDK asks its voucher counter with
  // it), and so is a voucher it signs (test/storage/owner-change.test.ts sends one).
  const read2 = await client.download("dfs", entry.Cid, { size: entry.Size }).catch((e: unknown) => e);
  expect((read2 as StorageApiError).status).toBe(401);
  expect((read2 as StorageApiError).body.Description).toMatch(/may no longer sign for its DID/);
  // The owner is unaffected.
  expect((await handLogin(gw, owner, did)).status).toBe(200);
  const mine = await gw.user({ account: owner });
  expect((await mine.client.list("dfs")).Object).toEqual([entry]);
});

test("with the default cache, a revocation takes effect within 10 s (resolver clock faked)", async () => {
  let clock = Date.now();
  // No resolverCacheMs: the resolver's own default, the one the server runs with.
  const gw = await testGateway({ ipfs: false, resolverNow: () => clock });
  const { delegate, registry, did } = await ownerAndDelegate(gw);

  await registry.addDelegate(delegate.address, 3600n);
  expect((await handLogin(gw, delegate, did)).status).toBe(200);
  await registry.revokeDelegate(delegate.address);

  clock += 10_000;
  const refused = await handLogin(gw, delegate, did);
  expect(refused.status).toBe(401);
  expect((await readJson(refused)).Description).toMatch(/not the DID's owner or a valid delegate/);
  expect((await gw.app.handle(get(`/login?did=${did}`))).status).toBe(200);
});
