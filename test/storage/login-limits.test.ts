/**
 * Rate limits of POST /login: per client (IPv6 by /64) before any signature work, and per DID
 * once the signature proves a key that may sign for it, 429 with Retry-After beyond. A stranger's
 * garbage for a DID spends its own client's logins, never the DID's.
 */
import { expect, test } from "bun:test";
import type { LocalAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { rememberClientIp } from "../../src/http/client-ip.ts";
import { didAddressKey } from "../../src/identity/did.ts";
import { LOGIN_LIMITS } from "../../src/storage/service.ts";
import { postJson, readJson } from "../support/app.ts";
import { newToken, testGateway } from "../support/storage.ts";

// Limits far apart, so each test knows which one answered.
const LIMITS = { perIp: { ...LOGIN_LIMITS.perIp, max: 150 }, perDid: { ...LOGIN_LIMITS.perDid, max: 10 } };
const gw = await testGateway({ ipfs: false, extra: { rateLimits: true, loginLimits: LIMITS } });
const newKey = () => privateKeyToAccount(generatePrivateKey());
const didOf = (key: LocalAccount) => `did:ethr:0x3d9:${key.address}`;

let clients = 0;
/** A POST /login from `ip` (default: an address of its own). */
async function post(body: Record<string, unknown>, ip = `198.51.100.${++clients % 250}`) {
  const request = postJson("/login", body);
  rememberClientIp(request, ip);
  return gw.app.handle(request);
}
/** A login signed by `key` for `did` (a fresh session token each time, so none is a replay). */
async function signedLogin(key: LocalAccount, did = didOf(key), ip?: string) {
  const token = newToken();
  const timestamp = Math.floor(Date.now() / 1000);
  return post({ did, token, timestamp, signature: await gw.sign.login(key, { did, token, timestamp }) }, ip);
}
const garbage = (did: string, ip?: string) => post({ did, token: "00", timestamp: 1, signature: "0x00" }, ip);
const didCount = async (did: string) =>
  (await gw.database.sql.get<{ count: number }>("SELECT count FROM rate_counters WHERE key = $1", [`${LIMITS.perDid.name}:${didAddressKey(did)}`]))?.count ?? 0;

test("one DID gets a bounded number of logins a minute, then 429 with Retry-After", async () => {
  const key = newKey();
  for (let i = 0; i < LIMITS.perDid.max; i++) expect((await signedLogin(key)).status).toBe(200);
  const limited = await signedLogin(key);
  expect(limited.status).toBe(429);
  expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
  expect(await readJson(limited)).toMatchObject({ Code: "RateLimited", HTTPStatusCode: 429 });
});

test("garbage sent for a DID never counts against it: its signer logs in after any number of them", async () => {
  const key = newKey();
  const did = didOf(key);
  const stranger = newKey();
  for (let i = 0; i < 3 * LIMITS.perDid.max; i++) expect((await garbage(did)).status).toBe(401);
  // Well signed, by a key that may not sign for the DID: refused as well, and not counted either.
  for (let i = 0; i < 2 * LIMITS.perDid.max; i++) expect((await signedLogin(stranger, did)).status).toBe(401);
  expect(await didCount(did)).toBe(0);
  expect((await signedLogin(key)).status).toBe(200);
  expect(await didCount(did)).toBe(1);
});

test("the counts live in the shared database, so every gateway on it meets the same limit (D16)", async () => {
  const key = newKey();
  for (let i = 0; i < 3; i++) expect((await signedLogin(key)).status).toBe(200);
  expect(await didCount(didOf(key))).toBe(3);
});

test("another spelling of the same DID shares its limit", async () => {
  const key = newKey();
  const address = key.address;
  const spellings = [`did:ethr:0x3d9:${address}`, `did:ethr:${address.toLowerCase()}`, `did:ethr:0x03d9:${address}`, `DID:ETHR:985:${address}`];
  let status = 200;
  for (let i = 0; i <= LIMITS.perDid.max && status !== 429; i++) status = (await signedLogin(key, spellings[i % spellings.length] as string)).status;
  expect(status).toBe(429);
});

test("one client gets a bounded number of attempts a minute across DIDs, and every address of its IPv6 /64 is that client", async () => {
  const ip = "2001:db8:77:1::1";
  for (let i = 0; i < LIMITS.perIp.max; i++) expect((await garbage(didOf(newKey()), ip)).status).toBe(401);
  expect((await garbage(didOf(newKey()), ip)).status).toBe(429);
  // Another address of the same /64: the same client, refused too; a real login included.
  expect((await garbage(didOf(newKey()), "2001:db8:77:1:ffff:ffff:ffff:fffe")).status).toBe(429);
  expect((await signedLogin(newKey(), undefined, "2001:db8:77:1:abcd::7")).status).toBe(429);
  // The next /64 is another client.
  expect((await signedLogin(newKey(), undefined, "2001:db8:77:2::1")).status).toBe(200);
});
