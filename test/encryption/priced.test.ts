/**
 * Priced encrypted entries (D20): the owner escrows the file key to the gateway's age recipient
 * (GET /chain's ageRecipient); the gateway keeps it only if it opens the stored file's header
 * (MAC); the SDK refuses to buy an encrypted entry whose key is not escrowed; after a purchase is
 * indexed, the buyer's share is written by the gateway on request and the buyer decrypts.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { encryptStream, generateIdentity, headerFor, identityToRecipient, readFileKey } from "../../src/sdk/age.ts";
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

describe("what anyone may ask", () => {
  // The status is public: it must not tell whether someone keeps a file they never published.
  test("the status answers for published entries only: a private file gets the same 404 as no file at all", async () => {
    const secret = (await owner.enc.upload("dfs", crypto.getRandomValues(new Uint8Array(5_000)), { name: "diary.txt" })).Cid;
    const absent = (await owner.enc.upload("dfs", crypto.getRandomValues(new Uint8Array(5_000)), { name: "gone.txt" })).Cid;
    await owner.store.delete((await owner.store.list("dfs")).Object.find((o) => o.Cid === absent)?.ID as number);
    const answer = async (mid: string) => {
      const res = await call("GET", `/v2/escrows/${owner.address}/${mid}`);
      const body = await readJson(res);
      return { status: res.status, body: { ...body, message: String(body.message).replace(mid, "MID") } };
    };
    const [hidden, none] = [await answer(secret), await answer(absent)];
    expect(hidden).toEqual(none);
    expect(hidden).toMatchObject({ status: 404, body: { result: -1, error: "NOT_FOUND" } });
    // Even its own owner learns it only by publishing it (an entry anyone can see).
    await owner.dir.publish({ cid: secret, name: "diary", size: 5_000, price: 1n });
    await env.sync();
    expect(await status(owner.address, secret)).toMatchObject({ stored: true, encrypted: true, escrowed: false });
  });

  test("an entry published a moment ago, not indexed yet, is answered from the chain: the SDK still refuses to buy it unescrowed", async () => {
    const fresh = (await owner.enc.upload("dfs", crypto.getRandomValues(new Uint8Array(5_000)), { name: "new.txt" })).Cid;
    await owner.dir.publish({ cid: fresh, name: "new", size: 5_000, price: 1n });
    expect(await env.sql.get("SELECT mid FROM directory_entries WHERE mid = $1", [fresh])).toBeUndefined();
    expect(await status(owner.address, fresh)).toMatchObject({ stored: true, encrypted: true, escrowed: false });
    const buyer = await env.user();
    const err = (await buyer.dir.buyRead(owner.address, fresh).catch((e: unknown) => e)) as Error;
    expect(err.message).toContain("refusing to buy");
    expect(await buyer.dir.canRead(owner.address, fresh)).toBe(false);
    // Unpublished again: the same 404 as for a file never published.
    await owner.dir.unpublish(fresh);
    expect((await call("GET", `/v2/escrows/${owner.address}/${fresh}`)).status).toBe(404);
  });
});

describe("an escrow is verified against the payload too", () => {
  // A header's MAC covers the header alone: put before a payload sealed under another key, it
  // checks out under a key that opens none of the file, and a buyer would pay for noise.
  test("a file whose header is one key's and whose payload is another's: the key of the header is refused (400), not kept", async () => {
    const identity = generateIdentity();
    const sealed = async (plain: Uint8Array) => new Response(encryptStream([identityToRecipient(identity)], new Blob([plain]).stream())).bytes();
    const [a, b] = [await sealed(crypto.getRandomValues(new Uint8Array(200_000))), await sealed(crypto.getRandomValues(new Uint8Array(200_000)))];
    const headerEnd = (file: Uint8Array) => {
      const text = new TextDecoder("latin1").decode(file.subarray(0, 4096));
      return text.indexOf("\n", text.indexOf("\n---") + 1) + 1;
    };
    const mixed = new Uint8Array([...a.subarray(0, headerEnd(a)), ...b.subarray(headerEnd(b))]);
    const mid = (await owner.store.upload("dfs", mixed, { name: "mixed.age", encryption: "age" })).Cid;
    await owner.dir.publish({ cid: mid, name: "mixed", size: mixed.length, price: 1000n });
    await env.sync();
    const keyOfHeader = await readFileKey([identity], new Blob([a]).stream());
    const header = new TextDecoder().decode(headerFor(keyOfHeader, [identityToRecipient(env.gatewayIdentity)]));
    const res = await call("PUT", `/v2/escrows/${mid}`, { token: owner.store.accessToken, body: { header } });
    expect(res.status).toBe(400);
    expect((await readJson(res)).message).toContain("first chunk of its payload does not open");
    expect(await status(owner.address, mid)).toMatchObject({ encrypted: true, escrowed: false });
    // The key of the whole file (a's, over a's own payload) is kept.
    const whole = (await owner.store.upload("dfs", a, { name: "whole.age", encryption: "age" })).Cid;
    expect((await call("PUT", `/v2/escrows/${whole}`, { token: owner.store.accessToken, body: { header } })).status).toBe(200);
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
