// POST /login and GET /login (spec 4.1 rows 1–2, rule 1, sections 2.1, 2.2, 3; D2, D4): DID login
// through app.handle, by the SDK where a client would and by hand where the request is hostile.
import { describe, expect, test } from "bun:test";
import { getAddress, type Hex, type LocalAccount } from "viem";
import { createHandler } from "../../src/http/handler.ts";
import { silentLogger } from "../../src/log.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { get, postJson, readJson } from "../support/app.ts";
import { BASE, newToken, testGateway } from "../support/storage.ts";

/** The server's clock: real time, unless a boundary test pins it to one millisecond. */
let pinnedMs: number | undefined;
const gw = await testGateway({ ipfs: false, extra: { now: () => pinnedMs ?? Date.now() } });
const nowS = () => Math.floor(Date.now() / 1000);
const didOf = (a: { address: string }) => `did:ethr:0x3d9:${getAddress(a.address)}`;

interface LoginFields {
  did?: string;
  token?: string;
  timestamp?: number | string;
  signature?: string;
}

/** Signs a Login for `signer` (by default a fresh token, so a fresh session; now; the signer's DID). */
async function signed(signer: LocalAccount, o: { did?: string; token?: Hex; timestamp?: number } = {}): Promise<Required<LoginFields> & { token: Hex; timestamp: number }> {
  const did = o.did ?? didOf(signer);
  const token = o.token ?? newToken();
  const timestamp = o.timestamp ?? nowS();
  return { did, token, timestamp, signature: await gw.sign.login(signer, { did, token, timestamp }) };
}

type Form = "json" | "form" | "query";
function loginRequest(fields: LoginFields, form: Form = "json", headers: Record<string, string> = {}) {
  const pairs = Object.entries(fields).map(([k, v]): [string, string] => [k, String(v)]);
  if (form === "json") return postJson("/login", fields, headers);
  if (form === "form") {
    return new Request(`${BASE}/login`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...headers }, body: new URLSearchParams(pairs).toString() });
  }
  return new Request(`${BASE}/login?${new URLSearchParams(pairs)}`, { method: "POST", headers });
}

const send = (fields: LoginFields, form: Form = "json", headers: Record<string, string> = {}) => gw.app.handle(loginRequest(fields, form, headers));

async function expectRefused(res: Response, description: string | RegExp) {
  expect(res.status).toBe(401);
  const body = await readJson(res);
  expect(body).toEqual({ Code: "Authentication", Description: expect.any(String), HTTPStatusCode: 401 });
  expect(body.Description).toMatch(description);
}

const list = (accessToken: string) => gw.app.handle(get("/dfs/listobjects", { headers: { authorization: `Bearer ${accessToken}` } }));
const info = async (did: string) => readJson(await gw.app.handle(get(`/login?did=${encodeURIComponent(did)}`)));

/** The same signature with v as 0/1 instead of 27/28 (D4 accepts both). */
const vOf = (signature: string) => Number.parseInt(signature.slice(-2), 16);
const withV01 = (signature: string) => `${signature.slice(0, -2)}${(vOf(signature) - 27).toString(16).padStart(2, "0")}`;

describe("POST /login succeeds", () => {
  test("answers text/plain `Login success!` by default", async () => {
    const account = await gw.chain.anvil.newAccount();
    const res = await send(await signed(account));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/plain");
    expect(await res.text()).toBe("Login success!");
  });

  test("answers the account API's tokens as JSON with Accept: application/json, and they open storage routes", async () => {
    const account = await gw.chain.anvil.newAccount();
    const res = await send(await signed(account), "json", { accept: "application/json" });
    expect(res.status).toBe(200);
    const body = await readJson(res);
    expect(body).toEqual({ result: 1, data: { did: didOf(account), accessToken: expect.any(String), refreshToken: expect.any(String) } });
    const listed = await list(body.data.accessToken);
    expect(listed.status).toBe(200);
    expect(await readJson(listed)).toEqual({ Address: account.address, Storage: "dfs", Object: [] });
  });

  test.each(["json", "form", "query"] as const)("takes its parameters as %s", async (form) => {
    const account = await gw.chain.anvil.newAccount();
    const fields = await signed(account);
    const res = await send(fields, form);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("Login success!");
    // The session exists: GET /login names its token and timestamp, requestID back at 0.
    expect(await readJson(await gw.app.handle(get(`/login?did=${fields.did}`)))).toEqual({ token: fields.token, timestamp: fields.timestamp, requestID: "0" });
  });

  test("a JSON body without Content-Type (Go's default) is read as JSON (D14)", async () => {
    const account = await gw.chain.anvil.newAccount();
    const fields = await signed(account);
    const res = await gw.app.handle(new Request(`${BASE}/login`, { method: "POST", headers: { accept: "application/json" }, body: JSON.stringify(fields) }));
    expect(res.headers.get("content-type")).toStartWith("application/json");
    expect(await readJson(res)).toEqual({ result: 1, data: { did: fields.did, accessToken: expect.any(String), refreshToken: expect.any(String) } });
    expect(await info(fields.did)).toEqual({ token: fields.token, timestamp: fields.timestamp, requestID: "0" });
  });

  test("a JSON body sent as a form (`curl -d`) is read as JSON; a real form is still a form", async () => {
    const account = await gw.chain.anvil.newAccount();
    const fields = await signed(account);
    const asForm = { "content-type": "application/x-www-form-urlencoded" };
    const res = await gw.app.handle(new Request(`${BASE}/login`, { method: "POST", headers: asForm, body: `  ${JSON.stringify(fields)}\n` }));
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("Login success!");
    expect((await info(fields.did)).token).toBe(fields.token);
    // A form whose first field merely starts with "{" is not a JSON object: read as the form it is.
    const form = await signed(account);
    const pairs = new URLSearchParams({ "{": "x", ...Object.fromEntries(Object.entries(form).map(([k, v]) => [k, String(v)])) });
    expect((await gw.app.handle(new Request(`${BASE}/login`, { method: "POST", headers: asForm, body: pairs.toString() }))).status).toBe(200);
    expect((await info(form.did)).token).toBe(form.token);
  });

  test("a JSON login without Content-Type works over a real socket too", async () => {
    const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: createHandler({ handle: (r) => gw.app.handle(r), log: silentLogger, corsOrigins: [], trustProxy: 0 }) });
    try {
      const fields = await signed(await gw.chain.anvil.newAccount());
      // A byte body, as Go sends it: fetch adds no Content-Type for one.
      const request = new Request(`http://127.0.0.1:${server.port}/login`, { method: "POST", body: new TextEncoder().encode(JSON.stringify(fields)) });
      expect(request.headers.get("content-type")).toBeNull();
      const res = await fetch(request);
      expect(await res.text()).toBe("Login success!");
      expect((await info(fields.did)).token).toBe(fields.token);
    } finally {
      server.stop(true);
    }
  });

  test("a timestamp as a JSON string and a token without 0x or in upper case are the same login", async () => {
    const account = await gw.chain.anvil.newAccount();
    const fields = await signed(account);
    const res = await send({ ...fields, timestamp: String(fields.timestamp), token: fields.token.slice(2).toUpperCase() });
    expect(res.status).toBe(200);
    expect((await readJson(await gw.app.handle(get(`/login?did=${fields.did}`)))).token).toBe(fields.token);
  });

  test("a login signed 50 s ago is still inside the 1-minute window", async () => {
    const account = await gw.chain.anvil.newAccount();
    expect((await send(await signed(account, { timestamp: nowS() - 50 }))).status).toBe(200);
  });
});

describe("POST /login refuses, always 401 with the storage error body", () => {
  test.each(["did", "token", "timestamp", "signature"] as const)("a missing %s", async (missing) => {
    const account = await gw.chain.anvil.newAccount();
    const fields: LoginFields = await signed(account);
    delete fields[missing];
    for (const form of ["json", "form", "query"] as const) await expectRefused(await send(fields, form), /^Missing parameter$/);
  });

  test("no parameters at all", async () => {
    await expectRefused(await gw.app.handle(new Request(`${BASE}/login`, { method: "POST" })), /^Missing parameter$/);
    await expectRefused(await send({}), /^Missing parameter$/);
  });

  test("a body without Content-Type that is not JSON is not guessed at; one that starts with { but is not JSON is malformed JSON", async () => {
    const fields = await signed(await gw.chain.anvil.newAccount());
    const pairs = new URLSearchParams(Object.entries(fields).map(([k, v]): [string, string] => [k, String(v)]));
    await expectRefused(await gw.app.handle(new Request(`${BASE}/login`, { method: "POST", body: pairs.toString() })), /^Missing parameter$/);
    const broken = JSON.stringify(fields).slice(0, -1);
    const untyped = await gw.app.handle(new Request(`${BASE}/login`, { method: "POST", body: broken }));
    const typed = await gw.app.handle(new Request(`${BASE}/login`, { method: "POST", headers: { "content-type": "application/json" }, body: broken }));
    expect(untyped.status).toBe(typed.status);
    expect(await readJson(untyped)).toEqual(await readJson(typed));
    expect(untyped.status).toBeLessThan(500);
    // None of it was a login.
    expect((await gw.app.handle(get(`/login?did=${fields.did}`))).status).toBe(404);
  });

  test("a stale timestamp (> 60 s old) is expired", async () => {
    const account = await gw.chain.anvil.newAccount();
    await expectRefused(await send(await signed(account, { timestamp: nowS() - 61 })), /expired/);
    await expectRefused(await send(await signed(account, { timestamp: 1 })), /expired/);
  });

  test("a future timestamp (> 60 s ahead) is refused", async () => {
    const account = await gw.chain.anvil.newAccount();
    // The server's clock is pinned to the second the timestamp is made from: unpinned, a second
    // that turns between the two readings would make this 60 s ahead, which is accepted.
    pinnedMs = Date.now();
    try {
      await expectRefused(await send(await signed(account, { timestamp: Math.floor(pinnedMs / 1000) + 61 })), /future/);
    } finally {
      pinnedMs = undefined;
    }
  });

  test("the time window is checked before any signature work: garbage signature and DID, stale time → still 'expired'", async () => {
    await expectRefused(await send({ did: "did:ethr:0x3d9:0xnot-an-address", token: "zz", timestamp: nowS() - 3600, signature: "0xdeadbeef" }), /expired/);
    await expectRefused(await send({ did: "garbage", token: "zz", timestamp: nowS() + 3600, signature: "not hex" }), /future/);
  });

  test("a malformed timestamp, token, signature or DID", async () => {
    const account = await gw.chain.anvil.newAccount();
    const good = await signed(account);
    await expectRefused(await send({ ...good, timestamp: "soon" }), /timestamp/);
    await expectRefused(await send({ ...good, timestamp: -5 }), /timestamp/);
    await expectRefused(await send({ ...good, token: "0x1234" }), /token/);
    await expectRefused(await send({ ...good, token: "xyz".repeat(20) }), /token/);
    await expectRefused(await send({ ...good, signature: "0x1234" }), /signature/);
    await expectRefused(await send({ ...good, did: "did:web:example.com" }), /did:ethr/);
    await expectRefused(await send({ ...good, did: "did:ethr:0x3d9:0x1234" }), /address/);
    // Over-long fields are refusals like any other (D4), not a different status.
    await expectRefused(await send({ ...good, did: `did:ethr:0x3d9:${"a".repeat(5000)}` }), /address/);
    await expectRefused(await send({ ...good, token: "ab".repeat(2000) }), /token/);
    await expectRefused(await send({ ...good, signature: `0x${"ab".repeat(2000)}` }), /signature/);
    await expectRefused(await send({ ...good, timestamp: "9".repeat(40) }), /timestamp/);
    // None of these was a login: the good one still works.
    expect((await send(good)).status).toBe(200);
  });

  test("a replayed login (the same message again) is refused, in any form and with v as 0/1", async () => {
    const account = await gw.chain.anvil.newAccount();
    const fields = await signed(account);
    expect((await send(fields)).status).toBe(200);
    await expectRefused(await send(fields), /already used to log in/);
    await expectRefused(await send(fields, "query"), /already used to log in/);
    await expectRefused(await send({ ...fields, signature: withV01(fields.signature) }), /already used to log in/);
    // Other devices logging in since do not make the old message acceptable again.
    expect((await send(await signed(account, { timestamp: fields.timestamp + 1 }))).status).toBe(200);
    await expectRefused(await send(fields, "form"), /already used to log in/);
    expect(await info(fields.did)).toMatchObject({ timestamp: fields.timestamp + 1 });
  });

  test("two identical logins at once: exactly one is accepted", async () => {
    const account = await gw.chain.anvil.newAccount();
    const fields = await signed(account);
    const answers = await Promise.all(Array.from({ length: 8 }, () => send(fields)));
    expect(answers.map((r) => r.status).sort()).toEqual([200, 401, 401, 401, 401, 401, 401, 401]);
    for (const r of answers.filter((r) => r.status === 401)) await expectRefused(r, /already used to log in/);
  });

  test("a signature by another key (not the owner, not a delegate) is refused and burns nothing", async () => {
    const [owner, stranger] = [await gw.chain.anvil.newAccount(), await gw.chain.anvil.newAccount()];
    const t = nowS();
    const token = newToken();
    const forged = await signed(stranger, { did: didOf(owner), token, timestamp: t });
    await expectRefused(await send(forged), /not the DID's owner or a valid delegate/);
    expect((await gw.app.handle(get(`/login?did=${didOf(owner)}`))).status).toBe(404);
    // The refused attempt did not take the session's timestamp: the owner's own login of it works.
    expect((await send(await signed(owner, { token, timestamp: t }))).status).toBe(200);
  });

  test("a signature over other fields than those sent is refused", async () => {
    const account = await gw.chain.anvil.newAccount();
    const fields = await signed(account);
    await expectRefused(await send({ ...fields, token: newToken() }), /not the DID's owner/);
    await expectRefused(await send({ ...fields, timestamp: fields.timestamp + 1 }), /not the DID's owner/);
  });

  test("a signature made for another gateway (other Proxy address in the domain) is refused", async () => {
    const account = await gw.chain.anvil.newAccount();
    const did = didOf(account);
    const token = newToken();
    const timestamp = nowS();
    const signature = await account.signTypedData({
      domain: { ...gw.domain, verifyingContract: gw.chain.context.contracts.directory },
      types: { Login: [{ name: "did", type: "string" }, { name: "token", type: "bytes" }, { name: "timestamp", type: "uint64" }] },
      primaryType: "Login",
      message: { did, token, timestamp: BigInt(timestamp) },
    });
    await expectRefused(await send({ did, token, timestamp, signature }), /not the DID's owner/);
  });
});

describe("boundaries (D4)", () => {
  test("the window is inclusive: exactly 60 s old or ahead is accepted, 61 s refused, at either end of the server's second", async () => {
    const account = await gw.chain.anvil.newAccount();
    const t = nowS();
    try {
      for (const pinned of [t * 1000, t * 1000 + 999]) {
        pinnedMs = pinned;
        expect((await send(await signed(account, { timestamp: t - 60 }))).status).toBe(200);
        await expectRefused(await send(await signed(account, { timestamp: t - 61 })), /expired/);
        expect((await send(await signed(account, { timestamp: t + 60 }))).status).toBe(200);
        await expectRefused(await send(await signed(account, { timestamp: t + 61 })), /future/);
      }
    } finally {
      pinnedMs = undefined;
    }
  });

  test("tokens of 16 and 64 bytes are accepted, 15 and 65 refused", async () => {
    const account = await gw.chain.anvil.newAccount();
    for (const bytes of [16, 64]) {
      const fields = await signed(account, { token: newToken(bytes) });
      expect((await send(fields)).status).toBe(200);
      expect((await info(fields.did)).token).toBe(fields.token);
    }
    for (const bytes of [15, 65]) await expectRefused(await send(await signed(account, { token: newToken(bytes) })), /token must be 16 to 64 bytes/);
  });

  test("signatures with v = 27/28 and with v = 0/1 are both accepted", async () => {
    const account = await gw.chain.anvil.newAccount();
    // Sign until each recovery id has turned up twice: once sent as 27/28, once as 0/1.
    const byV = new Map<number, Awaited<ReturnType<typeof signed>>[]>([[27, []], [28, []]]);
    for (let i = 0; i < 200 && [...byV.values()].some((l) => l.length < 2); i++) {
      const fields = await signed(account);
      byV.get(vOf(fields.signature))?.push(fields);
    }
    for (const [v, [plain, shifted]] of byV) {
      if (!plain || !shifted) throw new Error(`no two signatures with v = ${v} in 200 tries`);
      expect((await send(plain)).status).toBe(200);
      const low = withV01(shifted.signature);
      expect(vOf(low)).toBe(v - 27);
      expect((await send({ ...shifted, signature: low })).status).toBe(200);
      expect((await info(shifted.did)).token).toBe(shifted.token);
    }
  });
});

describe("DID forms (D2)", () => {
  test("did:ethr:<address>, lower case, decimal chain and upper-case method are canonicalised", async () => {
    const account = await gw.chain.anvil.newAccount();
    const address = account.address;
    const forms = [`did:ethr:${address}`, `did:ethr:0x3d9:${address.toLowerCase()}`, `did:ethr:985:${address}`, `DID:ETHR:0x3D9:${address.toLowerCase()}`, didOf(account)];
    for (const did of forms) {
      const res = await send(await signed(account, { did }), "json", { accept: "application/json" });
      expect(res.status).toBe(200);
      expect((await readJson(res)).data.did).toBe(didOf(account));
    }
    // Every form names the same DID, and so the same latest session.
    const infos = await Promise.all(forms.map(async (did) => readJson(await gw.app.handle(get(`/login?did=${encodeURIComponent(did)}`)))));
    for (const info of infos) expect(info).toEqual(infos[0]);
  });

  test("an SDK client acting with a non-canonical DID form stores into the canonical bucket", async () => {
    const account = await gw.chain.anvil.newAccount();
    const lower = await gw.user({ account, did: `did:ethr:${account.address.toLowerCase()}` });
    const entry = await lower.client.upload("dfs", new TextEncoder().encode("canonical"), { name: "c.txt" });
    const canonical = await gw.user({ account });
    expect((await canonical.client.list("dfs")).Object).toEqual([entry]);
  });

  test("a DID of another chain is refused", async () => {
    const account = await gw.chain.anvil.newAccount();
    for (const did of [`did:ethr:0x1:${account.address}`, `did:ethr:1:${account.address}`, `did:ethr:mainnet:${account.address}`]) {
      await expectRefused(await send(await signed(account, { did })), /network/);
    }
  });
});

describe("GET /login?did=", () => {
  test("answers token, timestamp and requestID of the DID's latest session, following restricted calls", async () => {
    const { account, client } = await gw.user();
    const info = await client.loginInfo();
    expect(info).toEqual({ token: expect.stringMatching(/^0x[0-9a-f]{64}$/), timestamp: expect.any(Number), requestID: "0" });
    expect(Math.abs(info.timestamp - nowS())).toBeLessThanOrEqual(2);
    await client.upload("dfs", new TextEncoder().encode("one"), { name: "1" });
    await client.upload("dfs", new TextEncoder().encode("two"), { name: "2" });
    expect((await client.loginInfo()).requestID).toBe("2");
    // A new login (a new session) is the latest now, at 0 again.
    const fields = await signed(account);
    expect((await send(fields)).status).toBe(200);
    expect(await client.loginInfo()).toEqual({ token: fields.token, timestamp: fields.timestamp, requestID: "0" });
  });

  test("a missing or malformed did is 400, a DID that never logged in is 404", async () => {
    const missing = await gw.app.handle(get("/login"));
    expect(missing.status).toBe(400);
    expect(await readJson(missing)).toMatchObject({ Code: "InvalidArgument", HTTPStatusCode: 400 });
    expect((await gw.app.handle(get("/login?did=did:ethr:0x3d9:0x12"))).status).toBe(400);
    const account = await gw.chain.anvil.newAccount();
    const never = await gw.app.handle(get(`/login?did=${didOf(account)}`));
    expect(never.status).toBe(404);
    expect(await readJson(never)).toMatchObject({ Code: "NotFound", HTTPStatusCode: 404 });
  });
});

describe("sessions (one per login: a token logs in once)", () => {
  test("two tokens of one DID log in within the same second, and both sessions make restricted calls", async () => {
    const account = await gw.chain.anvil.newAccount();
    const t = nowS();
    const phone = await signed(account, { timestamp: t });
    const laptop = await signed(account, { timestamp: t });
    const sessions = [];
    for (const fields of [phone, laptop]) {
      const res = await send(fields, "json", { accept: "application/json" });
      expect(res.status).toBe(200);
      const { data } = await readJson(res);
      sessions.push({ account, did: fields.did, token: fields.token, accessToken: data.accessToken, refreshToken: data.refreshToken });
    }
    // Both logins share the second; the latest session is the one that logged in last.
    expect(await info(phone.did)).toEqual({ token: laptop.token, timestamp: t, requestID: "0" });
    for (const [i, session] of sessions.entries()) {
      const res = await gw.app.handle(await gw.uploadRequest(session, { requestID: 1, bytes: new TextEncoder().encode(`device ${i}`), name: `device-${i}.txt` }));
      expect(res.status).toBe(200);
    }
    expect((await readJson(await list(sessions[0]!.accessToken))).Object.map((f: { Name: string }) => f.Name)).toEqual(["device-0.txt", "device-1.txt"]);
  });

  test("a token logs in once, whatever its timestamp; another session's timestamps do not matter", async () => {
    const account = await gw.chain.anvil.newAccount();
    const t = nowS();
    const phone = newToken();
    expect((await send(await signed(account, { token: phone, timestamp: t }))).status).toBe(200);
    // A new device may sign a second earlier than the phone's last login: it is its own session.
    expect((await send(await signed(account, { timestamp: t - 1 }))).status).toBe(200);
    // The phone's token again: refused, older, equal or newer, each freshly signed.
    for (const at of [t - 1, t, t + 1]) await expectRefused(await send(await signed(account, { token: phone, timestamp: at })), /already used to log in/);
    expect(await info(didOf(account))).toEqual({ token: phone, timestamp: t, requestID: "0" });
  });

  test("two devices (two tokens) logged in at once both work", async () => {
    const phone = await gw.user();
    const laptop = await connectStorage({ baseUrl: BASE, account: phone.account, fetch: gw.fetch });
    await laptop.login();
    expect(laptop.accessToken).not.toBe(phone.client.accessToken);
    const a = await phone.client.upload("dfs", new TextEncoder().encode("from the phone"), { name: "phone.txt" });
    const b = await laptop.upload("dfs", new TextEncoder().encode("from the laptop"), { name: "laptop.txt" });
    const c = await phone.client.upload("dfs", new TextEncoder().encode("phone again"), { name: "phone2.txt" });
    expect((await laptop.list("dfs")).Object.map((f) => f.ID)).toEqual([a.ID, b.ID, c.ID]);
    expect((await phone.client.delete(b.ID)).Status).toBe("Success");
    expect((await laptop.delete(a.ID)).Status).toBe("Success");
  });

  test("an SDK client may log in again at once (a new session, requestIDs from 1)", async () => {
    const { client } = await gw.user();
    await client.upload("dfs", new TextEncoder().encode("before"), { name: "before" });
    await client.login();
    await client.login();
    expect((await client.loginInfo()).requestID).toBe("0");
    await client.upload("dfs", new TextEncoder().encode("after"), { name: "after" });
    expect((await client.loginInfo()).requestID).toBe("1");
  });
});

test("a login field of the wrong JSON type is a 401 like every other login refusal", async () => {
  const res = await gw.app.handle(postJson("/login", { did: "did:ethr:0x3d9:0x0000000000000000000000000000000000000001", token: "00".repeat(16), timestamp: true, signature: "0x" }));
  expect(res.status).toBe(401);
  expect(await readJson(res)).toMatchObject({ Code: "Authentication", HTTPStatusCode: 401 });
});
