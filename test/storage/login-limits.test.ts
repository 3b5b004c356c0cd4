/** Rate limits of POST /login: per client address and per DID, 429 with Retry-After beyond. */
import { expect, test } from "bun:test";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { didAddressKey } from "../../src/identity/did.ts";
import { LOGIN_LIMITS } from "../../src/storage/service.ts";
import { postJson, readJson } from "../support/app.ts";
import { testGateway } from "../support/storage.ts";

// Limits far apart, so each test knows which one answered.
const LIMITS = { perIp: { ...LOGIN_LIMITS.perIp, max: 150 }, perDid: { ...LOGIN_LIMITS.perDid, max: 10 } };
const gw = await testGateway({ ipfs: false, extra: { rateLimits: true, loginLimits: LIMITS } });
const attempt = (did: string) => gw.app.handle(postJson("/login", { did, token: "00", timestamp: 1, signature: "0x00" }));
const newDid = () => `did:ethr:0x3d9:${privateKeyToAccount(generatePrivateKey()).address}`;

test("one DID gets a bounded number of attempts a minute, then 429 with Retry-After", async () => {
  const did = newDid();
  for (let i = 0; i < LIMITS.perDid.max; i++) expect((await attempt(did)).status).toBe(401);
  const limited = await attempt(did);
  expect(limited.status).toBe(429);
  expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
  expect(await readJson(limited)).toMatchObject({ Code: "RateLimited", HTTPStatusCode: 429 });
});

test("the counts live in the shared database, so every gateway on it meets the same limit (D16)", async () => {
  const did = newDid();
  for (let i = 0; i < 3; i++) await attempt(did);
  const key = `${LIMITS.perDid.name}:${didAddressKey(did)}`;
  const row = await gw.database.sql.get<{ count: number }>("SELECT count FROM rate_counters WHERE key = $1", [key]);
  expect(row?.count).toBe(3);
});

test("another spelling of the same DID shares its limit", async () => {
  const address = privateKeyToAccount(generatePrivateKey()).address;
  const spellings = [`did:ethr:0x3d9:${address}`, `did:ethr:${address.toLowerCase()}`, `did:ethr:0x03d9:${address}`, `DID:ETHR:985:${address}`];
  let status = 401;
  for (let i = 0; i <= LIMITS.perDid.max && status !== 429; i++) status = (await attempt(spellings[i % spellings.length] as string)).status;
  expect(status).toBe(429);
});

test("one client address gets a bounded number of attempts a minute across DIDs", async () => {
  // The first test already spent some of this address's attempts; spend the rest.
  let status = 401;
  for (let i = 0; i <= LIMITS.perIp.max && status !== 429; i++) status = (await attempt(newDid())).status;
  expect(status).toBe(429);
  // A real login from the same address is refused too while the window lasts.
  const { client } = await gw.user({ login: false });
  await expect(client.login()).rejects.toThrow("429");
});
