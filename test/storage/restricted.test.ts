// Restricted calls (spec 5.3; D5): upload and delete carry did, token, requestID, payload and an
// EIP-712 Request signature, next to the Bearer token. The 64-wide replay window, session resets,
// binding to the Bearer DID and to the action, and claiming only verified ids.
import { describe, expect, test } from "bun:test";
import { cidOfStream } from "../../src/sdk/cid.ts";
import { get, readJson } from "../support/app.ts";
import { type Session, testGateway } from "../support/storage.ts";

const gw = await testGateway({ ipfs: false });
const enc = new TextEncoder();
let n = 0;
/** Distinct small file contents. */
const bytes = () => enc.encode(`restricted file ${++n} ${Math.random()}`);

async function upload(s: Session, requestID: number, o: Omit<Parameters<typeof gw.uploadRequest>[1], "requestID" | "bytes"> & { bytes?: Uint8Array } = {}) {
  return gw.app.handle(await gw.uploadRequest(s, { requestID, bytes: o.bytes ?? bytes(), ...o }));
}

async function expectStatus(res: Response, status: number, description?: RegExp) {
  const body = await readJson(res);
  expect({ status: res.status, body }).toMatchObject({ status, body: { HTTPStatusCode: status } });
  if (description) expect(body.Description).toMatch(description);
  return body;
}

const highest = async (s: Session) => (await readJson(await gw.app.handle(get(`/login?did=${s.did}`)))).requestID;

/** A delete of `id` as a restricted call, with `sign` choosing what is signed. */
async function deleteRequest(s: Session, id: number, requestID: number, o: { action?: "upload" | "delete"; payload?: string } = {}) {
  const payload = o.payload ?? String(id);
  const signature = await gw.sign.request(s.account, { did: s.did, token: s.token, requestID, action: o.action ?? "delete", payload });
  const q = new URLSearchParams({ id: String(id), did: s.did, token: s.token, requestID: String(requestID), payload, signature });
  return gw.app.handle(get(`/dfs/delete?${q}`, { headers: { authorization: `Bearer ${s.accessToken}` } }));
}

describe("the requestID window", () => {
  test("a requestID used once is refused the second time", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    expect((await upload(s, 1)).status).toBe(200);
    await expectStatus(await upload(s, 1), 401, /requestID already used/);
    expect((await upload(s, 2)).status).toBe(200);
    await expectStatus(await upload(s, 2), 401, /already used/);
  });

  // The requestID and the voucher are claimed in one transaction: a refused claim
  // rolls the other back, so a client may send the same id again with a new voucher.
  test("an upload refused for its voucher (already used) does not spend its requestID", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    const size = 10_000_000;
    // One file twice: a voucher names the file it uploads (D22).
    const file = bytes();
    const voucher = { size: String(size), sign: await gw.sign.voucher(s.account, size, await cidOfStream(new Blob([file]).stream())) };
    expect((await upload(s, 1, { bytes: file, fields: voucher })).status).toBe(200);
    await expectStatus(await upload(s, 2, { bytes: file, fields: voucher }), 402, /already used/);
    expect((await upload(s, 2)).status).toBe(200);
    await expectStatus(await upload(s, 2), 401, /requestID already used/);
  });

  test("ids out of order within the window are accepted, each once", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    for (const id of [5, 3, 1, 2, 64, 4, 10]) expect((await upload(s, id)).status).toBe(200);
    await expectStatus(await upload(s, 3), 401, /already used/);
    expect(await highest(s)).toBe("64");
  });

  test("an id ≤ highest − 64 is refused, highest − 63 still accepted", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    expect((await upload(s, 100)).status).toBe(200);
    await expectStatus(await upload(s, 36), 401, /too old/);
    await expectStatus(await upload(s, 1), 401, /too old/);
    expect((await upload(s, 37)).status).toBe(200);
    // The window moves with the highest id.
    expect((await upload(s, 200)).status).toBe(200);
    await expectStatus(await upload(s, 136), 401, /too old/);
    expect((await upload(s, 137)).status).toBe(200);
  });

  // Ids below the window are deleted on one call in 16 (sessions.ts PRUNE_EVERY), not on each:
  // whatever ids a client uses, the session keeps a bounded number, and none still in the window.
  test("a session keeps at most 64 + 16 claimed ids, whatever ids its calls use; those in the window stay refused", async () => {
    for (const step of [1, 2, 7, 16, 33]) {
      const s = await gw.session(await gw.chain.anvil.newAccount());
      const kept = async () => (await gw.database.sql.get<{ n: number }>("SELECT COUNT(*) AS n FROM session_requests WHERE token = $1", [s.token]))?.n;
      let most = 0;
      let id = 1 - step; // 1, 1 + step, …: with an even step, never a multiple of 16
      for (let call = 0; call < 120; call++) {
        id += step;
        await expectStatus(await deleteRequest(s, 999_999_999, id), 404);
        most = Math.max(most, Number(await kept()));
      }
      expect({ step, most }).toEqual({ step, most: Math.min(most, 80) });
      expect(most).toBeGreaterThanOrEqual(Math.min(120, Math.ceil(64 / step)));
      await expectStatus(await deleteRequest(s, 999_999_999, id), 401, /already used/);
      const oldestInWindow = id - Math.floor(63 / step) * step;
      await expectStatus(await deleteRequest(s, 999_999_999, oldestInWindow), 401, /already used/);
    }
    // 600 signed calls and as many counts: seconds on a loaded machine.
  }, 60_000);

  test("requestID 0, negative or non-numeric ids are refused", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    await expectStatus(await upload(s, 0), 401, /starts at 1/);
    for (const bad of ["-1", "1.5", "one", ""]) {
      const res = await upload(s, 1, { fields: { requestID: bad } });
      expect(res.status).toBe(401);
    }
    // None of them claimed id 1.
    expect((await upload(s, 1)).status).toBe(200);
  });

  test("a login resets the session: requestID back to 1 (SDK)", async () => {
    const { client } = await gw.user();
    for (let i = 0; i < 3; i++) await client.upload("dfs", bytes(), { name: `f${i}` });
    expect((await client.loginInfo()).requestID).toBe("3");
    await client.login();
    expect((await client.loginInfo()).requestID).toBe("0");
    // The SDK starts again at 1, which the new session accepts.
    await client.upload("dfs", bytes(), { name: "after" });
    expect((await client.loginInfo()).requestID).toBe("1");
  });

  // Were a login with a used token to reset its session, every restricted call signed under that
  // token (a captured upload, a delete) could be sent again: a token logs in once.
  test("a login with a token that already had a session is refused, even freshly signed: its used ids stay used", async () => {
    const account = await gw.chain.anvil.newAccount();
    const s = await gw.session(account);
    const captured = await gw.uploadRequest(s, { requestID: 1, bytes: bytes() });
    expect((await gw.app.handle(captured.clone() as Request)).status).toBe(200);
    expect((await upload(s, 2)).status).toBe(200);
    const again = await gw.session(account, { token: s.token }).then(
      () => "logged in",
      (err: Error) => err.message,
    );
    expect(again).toMatch(/login answered 401: .*already used to log in/);
    expect(await highest(s)).toBe("2");
    await expectStatus(await gw.app.handle(captured), 401, /already used/);
    await expectStatus(await upload(s, 2), 401, /already used/);
  });

  test("every SDK login brings a fresh token (a new session), never one it used before", async () => {
    const { client } = await gw.user();
    const tokens = new Set<string>();
    for (let i = 0; i < 3; i++) {
      await client.login();
      tokens.add((await client.loginInfo()).token);
    }
    expect(tokens.size).toBe(3);
  });

  test("another device's login leaves an open session alone", async () => {
    const account = await gw.chain.anvil.newAccount();
    const phone = await gw.session(account);
    expect((await upload(phone, 1)).status).toBe(200);
    const laptop = await gw.session(account);
    expect((await upload(laptop, 1)).status).toBe(200);
    await expectStatus(await upload(phone, 1), 401, /already used/);
    expect((await upload(phone, 2)).status).toBe(200);
  });

  test("a token that never logged in has no session", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    const stranger = { ...s, token: `0x${"ab".repeat(32)}` as const };
    await expectStatus(await upload(stranger, 1), 401, /no session/);
  });
});

describe("what a signature binds", () => {
  test("the signed did must be the Bearer token's DID", async () => {
    const alice = await gw.session(await gw.chain.anvil.newAccount());
    const bob = await gw.session(await gw.chain.anvil.newAccount());
    // Bob's fully valid signed call, sent with Alice's Bearer token.
    await expectStatus(await upload({ ...bob, accessToken: alice.accessToken }, 1), 401, /not the Bearer token's DID/);
    await expectStatus(await deleteRequest({ ...bob, accessToken: alice.accessToken }, 1, 2), 401, /not the Bearer token's DID/);
    // Neither id was claimed in Bob's session.
    expect((await upload(bob, 1)).status).toBe(200);
    expect(await highest(alice)).toBe("0");
  });

  test("the Bearer DID in another form than the signed did is the same DID", async () => {
    const account = await gw.chain.anvil.newAccount();
    const s = await gw.session(account, { did: `did:ethr:${account.address.toLowerCase()}` });
    expect((await upload(s, 1)).status).toBe(200);
  });

  test("a file part before the signed fields is refused, keeping nothing and claiming no id", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    const file = bytes();
    const res = await upload(s, 1, { bytes: file, fileFirst: true });
    expect(res.status).toBe(400);
    await expectStatus(res, 400, /before the file/);
    expect(await highest(s)).toBe("0");
    expect((await upload(s, 1, { bytes: file })).status).toBe(200);
  });

  test("a request signed for another action is refused: a delete signature on an upload and the reverse", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    const file = bytes();
    const payload = new Bun.CryptoHasher("sha256").update(file).digest("hex");
    const deleteSignature = await gw.sign.request(s.account, { did: s.did, token: s.token, requestID: 1, action: "delete", payload });
    await expectStatus(await upload(s, 1, { bytes: file, fields: { signature: deleteSignature } }), 401, /not the DID's owner/);

    const up = await upload(s, 2, { bytes: file });
    expect(up.status).toBe(200);
    const { ID } = await readJson(up);
    await expectStatus(await deleteRequest(s, ID, 3, { action: "upload" }), 401, /not the DID's owner/);
    // A signature over another payload (another file id) does not delete this one.
    const signature = await gw.sign.request(s.account, { did: s.did, token: s.token, requestID: 4, action: "delete", payload: String(ID + 1) });
    const q = new URLSearchParams({ id: String(ID), did: s.did, token: s.token, requestID: "4", payload: String(ID), signature });
    await expectStatus(await gw.app.handle(get(`/dfs/delete?${q}`, { headers: { authorization: `Bearer ${s.accessToken}` } })), 401);
    // A payload other than the id, even correctly signed, is refused.
    await expectStatus(await deleteRequest(s, ID, 5, { payload: String(ID + 1) }), 401, /payload/);
    expect((await deleteRequest(s, ID, 6)).status).toBe(200);
  });

  test("a missing signed field is refused", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    for (const missing of ["did", "token", "requestID", "signature"]) {
      await expectStatus(await upload(s, 1, { fields: { [missing]: undefined } }), 401, /Missing parameter/);
    }
    await expectStatus(await upload(s, 1, { fields: { payload: undefined } }), 400, /payload/);
    expect((await upload(s, 1)).status).toBe(200);
  });

  test("the requestID is claimed only once the signature verifies: a bad signature, then a good one with the same id", async () => {
    const account = await gw.chain.anvil.newAccount();
    const s = await gw.session(account);
    const stranger = await gw.chain.anvil.newAccount();
    const file = bytes();
    const payload = new Bun.CryptoHasher("sha256").update(file).digest("hex");
    const forged = await gw.sign.request(stranger, { did: s.did, token: s.token, requestID: 7, action: "upload", payload });
    await expectStatus(await upload(s, 7, { bytes: file, fields: { signature: forged } }), 401, /not the DID's owner/);
    await expectStatus(await upload(s, 7, { bytes: file, fields: { signature: `0x${"00".repeat(65)}` } }), 401);
    await expectStatus(await upload(s, 7, { bytes: file, fields: { signature: "0x1234" } }), 401, /65 bytes/);
    expect(await highest(s)).toBe("0");
    expect((await upload(s, 7, { bytes: file })).status).toBe(200);
    expect(await highest(s)).toBe("7");
  });
});
