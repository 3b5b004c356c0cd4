// Spec 7: "500 InternalError — Internal error, try again" for login, upload and download, when a
// part the gateway relies on (the chain, a back-end) fails; never a client error for a server fault,
// never a leak of the cause, nothing kept.
import { afterEach, expect, test } from "bun:test";
import type { DidResolver } from "../../src/identity/resolver.ts";
import type { Backend } from "../../src/storage/backend.ts";
import { StorageApiError } from "../../src/sdk/storage.ts";
import { get, postJson, readJson } from "../support/app.ts";
import { newToken, testGateway } from "../support/storage.ts";

let chainDown = false;
let resolver: DidResolver | undefined;
const gw = await testGateway({
  ipfs: false,
  extra: { resolver: { canSign: (did, signer) => (chainDown ? Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:8545")) : (resolver as DidResolver).canSign(did, signer)) } },
});
resolver = gw.resolver;
const dfs = gw.backends.dfs as Backend;
const INTERNAL = { Code: "InternalError", Description: "Internal error, try again", HTTPStatusCode: 500 };

afterEach(() => {
  chainDown = false;
  gw.backends.dfs = dfs;
});

async function failure(p: Promise<unknown>): Promise<StorageApiError> {
  const e = await p.then(() => undefined, (err: unknown) => err);
  expect(e).toBeInstanceOf(StorageApiError);
  return e as StorageApiError;
}

test("login: the DID registry cannot be read → 500, and the login can be retried", async () => {
  const account = await gw.chain.anvil.newAccount();
  const did = `did:ethr:0x3d9:${account.address}`;
  const token = newToken();
  const timestamp = Math.floor(Date.now() / 1000);
  const body = { did, token, timestamp, signature: await gw.sign.login(account, { did, token, timestamp }) };
  chainDown = true;
  const res = await gw.app.handle(postJson("/login", body));
  expect(res.status).toBe(500);
  expect(await readJson(res)).toEqual(INTERNAL);
  chainDown = false;
  // The failed attempt burnt nothing: the very same login goes through now.
  const again = await gw.app.handle(postJson("/login", body));
  expect(again.status).toBe(200);
});

test("upload: the back-end fails while storing → 500, nothing listed, nothing counted", async () => {
  const { client } = await gw.user();
  gw.backends.dfs = { ...dfs, put: async () => Promise.reject(new Error("EIO: i/o error, write")) };
  const e = await failure(client.upload("dfs", crypto.getRandomValues(new Uint8Array(100_000)), { name: "io.bin" }));
  expect(e.status).toBe(500);
  expect(e.body).toEqual(INTERNAL);
  gw.backends.dfs = dfs;
  expect((await client.list("dfs")).Object).toEqual([]);
  expect((await client.trafficHash(0)).used).toBe("0");
  await client.upload("dfs", new TextEncoder().encode("fine now"), { name: "ok.txt" });
});

test("upload: the back-end fails mid-stream (after reading some bytes) → 500", async () => {
  const { client } = await gw.user();
  gw.backends.dfs = {
    ...dfs,
    put: async (source) => {
      const reader = source.getReader();
      await reader.read();
      throw new Error("ENOSPC: no space left on device");
    },
  };
  const e = await failure(client.upload("dfs", crypto.getRandomValues(new Uint8Array(3_000_000)), { name: "full.bin" }));
  expect(e.status).toBe(500);
  expect(e.body).toEqual(INTERNAL);
});

test("download: the back-end cannot be asked → 500", async () => {
  const { client } = await gw.user();
  const entry = await client.upload("dfs", new TextEncoder().encode("stat me"), { name: "s.txt" });
  gw.backends.dfs = { ...dfs, stat: async () => Promise.reject(new Error("database is locked")) };
  const e = await failure(client.download("dfs", entry.Cid, { size: entry.Size }));
  expect(e.status).toBe(500);
  expect(e.body).toEqual(INTERNAL);
  gw.backends.dfs = dfs;
  expect(await (await client.download("dfs", entry.Cid, { size: entry.Size })).text()).toBe("stat me");
});

test("download: a body read whole (up to a chunk) that fails → 500, and neither its voucher nor its traffic is used: the same voucher then downloads", async () => {
  const { client, account } = await gw.user();
  const entry = await client.upload("dfs", new TextEncoder().encode("read me later"), { name: "r.txt" });
  const used = await gw.storage?.vouchers.usedBy(account.address);
  const size = (used ?? 0) + 1_000;
  const url = `/dfs/${entry.Cid}?size=${size}&sign=${await gw.sign.voucher(account, size, entry.Cid)}`;
  gw.backends.dfs = { ...dfs, read: () => new ReadableStream({ pull: (c) => c.error(new Error("EIO: i/o error, read")) }) };
  const res = await gw.app.handle(get(url));
  expect(res.status).toBe(500);
  expect(await readJson(res)).toEqual(INTERNAL);
  gw.backends.dfs = dfs;
  expect(await gw.storage?.vouchers.usedBy(account.address)).toBe(used);
  const again = await gw.app.handle(get(url));
  expect(again.status).toBe(200);
  expect(await again.text()).toBe("read me later");
  expect(await gw.storage?.vouchers.usedBy(account.address)).toBe((used ?? 0) + 13);
});

test("delete: the catalog fails → 500 with Status 'Failure' (D9), and the file is still there after", async () => {
  const { client } = await gw.user();
  const entry = await client.upload("dfs", new TextEncoder().encode("hold on"), { name: "h.txt" });
  await gw.database.sql.run("ALTER TABLE files RENAME TO files_away");
  let e: StorageApiError;
  try {
    e = await failure(client.delete(entry.ID));
  } finally {
    await gw.database.sql.run("ALTER TABLE files_away RENAME TO files");
  }
  expect(e.status).toBe(500);
  expect(e.body).toEqual({ Status: "Failure", ...INTERNAL });
  expect((await client.list("dfs")).Object).toEqual([entry]);
});
