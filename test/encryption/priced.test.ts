/**
 * Priced encrypted entries (D20): the owner escrows the file key to the gateway's age recipient
 * (GET /chain's ageRecipient); the gateway keeps it only if it opens the stored file's header
 * (MAC); the SDK refuses to buy an encrypted entry whose key is not escrowed; after a purchase is
 * indexed, the buyer's share is written by the gateway on request and the buyer decrypts.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { headerFor, identityToRecipient } from "../../src/sdk/age.ts";
import { readJson } from "../support/app.ts";
import { BASE } from "../support/storage.ts";
import { encryptionGateway } from "./support.ts";

setDefaultTimeout(60_000);

const env = await encryptionGateway();
const { call } = env;
const sha256 = (b: Uint8Array) => new Bun.CryptoHasher("sha256").update(b).digest("hex");
const bytesOf = (s: ReadableStream<Uint8Array>) => new Response(s).bytes();
const plain = crypto.getRandomValues(new Uint8Array(100_000));

type User = Awaited<ReturnType<typeof env.user>>;
let owner: User;
let cid = "";
const status = async (o: string, mid: string) => (await readJson(await call("GET", `/v2/escrows/${o}/${mid}`))).data;

beforeAll(async () => {
  owner = await env.user();
  cid = (await owner.enc.upload("dfs", plain, { name: "report.pdf" })).Cid;
  await owner.dir.publish({ cid, name: "report", size: plain.length, price: 1000n });
  await env.sync();
});

test("GET /chain names the gateway's age recipient", async () => {
  const info = await readJson(await env.fetch(`${BASE}/chain`));
  expect(info.ageRecipient).toBe(identityToRecipient(env.gatewayIdentity));
});

describe("before the escrow", () => {
  test("the status says encrypted, not escrowed; the SDK refuses to buy, and nothing is paid", async () => {
    expect(await status(owner.address, cid)).toMatchObject({ stored: true, encrypted: true, escrowed: false });
    const buyer = await env.user();
    const err = (await buyer.dir.buyRead(owner.address, cid).catch((e: unknown) => e)) as Error;
    expect(err.message).toContain("refusing to buy");
    expect(await buyer.dir.canRead(owner.address, cid)).toBe(false);
  });

  test("an escrow that does not open the stored file's header is refused (400) and not kept", async () => {
    const wrongKey = crypto.getRandomValues(new Uint8Array(16));
    const header = new TextDecoder().decode(headerFor(wrongKey, [identityToRecipient(env.gatewayIdentity)]));
    const res = await call("PUT", `/v2/escrows/${cid}`, { token: owner.store.accessToken, body: { header } });
    expect(res.status).toBe(400);
    expect((await readJson(res)).message).toContain("header MAC does not check out");
    expect((await status(owner.address, cid)).escrowed).toBe(false);
  });

  test("a key wrapped to someone else, a plain file, a file not stored: each refused with its reason", async () => {
    const notGateway = new TextDecoder().decode(headerFor(crypto.getRandomValues(new Uint8Array(16)), [await owner.enc.recipient()]));
    const r1 = await call("PUT", `/v2/escrows/${cid}`, { token: owner.store.accessToken, body: { header: notGateway } });
    expect(r1.status).toBe(400);
    expect((await readJson(r1)).message).toContain("ageRecipient");
    const plainFile = (await owner.store.upload("dfs", new Uint8Array([1, 2, 3]), { name: "plain" })).Cid;
    const r2 = await call("PUT", `/v2/escrows/${plainFile}`, { token: owner.store.accessToken, body: { header: notGateway } });
    expect(r2.status).toBe(400);
    expect((await readJson(r2)).message).toContain("not an encrypted");
    const stranger = await env.user();
    const r3 = await call("PUT", `/v2/escrows/${cid}`, { token: stranger.store.accessToken, body: { header: notGateway } });
    expect(r3.status).toBe(404);
  });
});

describe("after the escrow", () => {
  beforeAll(async () => {
    const held = await owner.enc.escrow(cid, "dfs");
    expect(held.keyId).toBe(identityToRecipient(env.gatewayIdentity));
  });

  test("a buyer pays, and once the purchase is indexed decrypts with the share the gateway writes", async () => {
    expect((await status(owner.address, cid)).escrowed).toBe(true);
    const buyer = await env.user();
    await buyer.enc.publish();
    await buyer.dir.buyRead(owner.address, cid);
    await env.sync();
    const opened = await buyer.enc.download("dfs", cid);
    expect(opened.encrypted).toBe(true);
    expect(sha256(await bytesOf(opened.body))).toBe(sha256(plain));
  });

  test("no purchase, no share: a reader who did not buy gets the 404", async () => {
    const other = await env.user();
    await other.enc.publish();
    const res = await call("GET", `/v2/shares/${owner.address}/${cid}`, { token: other.store.accessToken });
    expect(res.status).toBe(404);
  });

  test("a buyer with no published recipient is told what to do (409), and gets its share once it has one", async () => {
    const buyer = await env.user();
    await buyer.dir.buyRead(owner.address, cid);
    await env.sync();
    const res = await call("GET", `/v2/shares/${owner.address}/${cid}`, { token: buyer.store.accessToken });
    expect(res.status).toBe(409);
    expect((await readJson(res)).message).toContain("age-key --publish");
    await buyer.enc.publish();
    expect(sha256(await bytesOf((await buyer.enc.download("dfs", cid)).body))).toBe(sha256(plain));
  });
});
