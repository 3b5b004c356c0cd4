// Upload (spec 4.1 row 4, rule 2, section 2.5; D5, D6, D9): POST /dfs/ and /ipfs/ as multipart with
// the signed fields and a voucher before the file. The answer is the new file entry; a bad upload
// keeps nothing; names replace; the same bytes are stored once and get one Cid on both back-ends.
import { describe, expect, test } from "bun:test";
import { base36 } from "multiformats/bases/base36";
import { CID } from "multiformats/cid";
import { cidOf } from "../../src/storage/dfs/index.ts";
import { connectStorage, StorageApiError } from "../../src/sdk/storage.ts";
import { get, readJson, stalledRequest } from "../support/app.ts";
import { BASE, type Session, testGateway } from "../support/storage.ts";

const gw = await testGateway();
const enc = new TextEncoder();
const dfs = gw.backends.dfs as NonNullable<typeof gw.backends.dfs>;
const ipfs = gw.backends.ipfs as NonNullable<typeof gw.backends.ipfs>;
const unique = (label: string) => enc.encode(`${label} ${crypto.randomUUID()}`);
const sha256 = (b: Uint8Array) => new Bun.CryptoHasher("sha256").update(b).digest("hex");
const backendOf = (kind: "dfs" | "ipfs") => (kind === "dfs" ? dfs : ipfs);
const dfsRefs = async (cid: string) => (await gw.database.sql.get<{ refs: number }>("SELECT refs FROM dfs_objects WHERE cid = $1", [cid]))?.refs;
const hasBucket = async (did: string) => (await gw.database.sql.get("SELECT did FROM buckets WHERE did = $1", [did])) !== undefined;

async function failure(p: Promise<unknown>): Promise<StorageApiError> {
  const e = await p.then(() => undefined, (err: unknown) => err);
  expect(e).toBeInstanceOf(StorageApiError);
  return e as StorageApiError;
}

/** What the dfs store holds, to show a refused upload left nothing behind. */
const dfsHolds = async () => {
  const { objects, chunks, bytes } = (await dfs.health()) as { objects: number; chunks: number; bytes: number };
  return { objects, chunks, bytes };
};

/** An upload of `bytes` signed with a `payload` they do not match: 400 with `description`, nothing
 * stored, nothing listed (requestID 1 on dfs, 2 on ipfs: a fresh session that tries dfs first). */
async function expectRefusedKeepingNothing(s: Session, kind: "dfs" | "ipfs", bytes: Uint8Array, payload: string, description: unknown) {
  const held = await dfsHolds();
  const res = await gw.app.handle(await gw.uploadRequest(s, { requestID: kind === "dfs" ? 1 : 2, bytes, kind, payload, name: "liar.bin" }));
  expect(res.status).toBe(400);
  expect(await readJson(res)).toMatchObject({ Code: "InvalidArgument", HTTPStatusCode: 400, Description: description });
  expect(await backendOf(kind).stat(await cidOf([bytes]))).toBeUndefined();
  expect(await dfsHolds()).toEqual(held);
  const listed = await gw.app.handle(get(`/${kind}/listobjects`, { headers: { authorization: `Bearer ${s.accessToken}` } }));
  expect((await readJson(listed)).Object).toEqual([]);
}

describe("a good upload", () => {
  test("answers the file entry (spec 2.5), creating the DID's bucket on the first upload", async () => {
    const { client } = await gw.user();
    expect(await hasBucket(client.did)).toBe(false);
    const bytes = enc.encode("hello world\n");
    const before = Date.now();
    const entry = await client.upload("dfs", bytes, { name: "hello.txt" });
    expect(entry).toEqual({
      ID: expect.any(Number),
      Name: "hello.txt",
      Size: 12,
      Cid: "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4",
      ModTime: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      Public: false,
      UserDefined: { encryption: "", etag: "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4" },
    });
    expect(Date.parse(entry.ModTime)).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse(entry.ModTime)).toBeLessThanOrEqual(Date.now());
    expect(await hasBucket(client.did)).toBe(true);
    expect((await client.list("dfs")).Object).toEqual([entry]);
  });

  test("keeps the encryption method in UserDefined, and the file's name without its path", async () => {
    const { client } = await gw.user();
    const entry = await client.upload("ipfs", unique("secret"), { name: "../../etc/notes.txt.age", encryption: "age" });
    expect(entry.Name).toBe("notes.txt.age");
    expect(entry.UserDefined).toEqual({ encryption: "age", etag: entry.Cid });
    expect((await client.list("ipfs")).Object).toEqual([entry]);
  });

  test("an empty file is a file", async () => {
    const { client } = await gw.user();
    const entry = await client.upload("dfs", new Uint8Array(0), { name: "empty" });
    expect(entry.Size).toBe(0);
    expect(entry.Cid).toBe(await cidOf([new Uint8Array(0)]));
  });

  test("a path on disk through the SDK", async () => {
    const { client } = await gw.user();
    const path = `${gw.dataDir}/from-disk.bin`;
    const bytes = crypto.getRandomValues(new Uint8Array(300_000));
    await Bun.write(path, bytes);
    const entry = await client.upload("dfs", path);
    expect(entry).toMatchObject({ Name: "from-disk.bin", Size: bytes.length, Cid: await cidOf([bytes]) });
    expect(new Uint8Array(await (await client.download("dfs", entry.Cid)).arrayBuffer())).toEqual(bytes);
  });

  test("the SDK's onProgress hears the request's bytes as they are read, up to its whole length", async () => {
    const { client } = await gw.user();
    const bytes = crypto.getRandomValues(new Uint8Array(300_000));
    const heard: [number, number][] = [];
    await client.upload("dfs", bytes, { name: "progress.bin", onProgress: (sent, total) => heard.push([sent, total]) });
    const total = heard[0]?.[1] as number;
    // The multipart body: the signed fields, the file, the closing boundary.
    expect(total).toBeGreaterThan(bytes.length);
    expect(heard.every(([, t]) => t === total)).toBe(true);
    expect(heard.map(([sent]) => sent)).toEqual([...heard.map(([sent]) => sent)].sort((x, y) => x - y));
    expect(heard.at(-1)?.[0]).toBe(total);
  });
});

describe("the signed payload may be the file's Cid (D5)", () => {
  test("the right Cid stores the file (dfs and ipfs), in any base; the SHA-256 still works beside it", async () => {
    const account = await gw.chain.anvil.newAccount();
    const s = await gw.session(account);
    let requestID = 0;
    for (const kind of ["dfs", "ipfs"] as const) {
      // Two chunks and a bit: the Cid of a dag-pb root, not of a single raw leaf.
      const bytes = crypto.getRandomValues(new Uint8Array(2 * 1_048_576 + 7));
      const cid = await cidOf([bytes]);
      const res = await gw.app.handle(await gw.uploadRequest(s, { requestID: ++requestID, bytes, kind, payload: cid, name: "by-cid.bin" }));
      expect(res.status).toBe(200);
      expect(await readJson(res)).toMatchObject({ Name: "by-cid.bin", Size: bytes.length, Cid: cid });
      // A one-chunk file is its raw leaf; base36 spells the same CIDv1.
      const small = unique("small");
      const base36Cid = CID.parse(await cidOf([small])).toString(base36.encoder);
      const one = await gw.app.handle(await gw.uploadRequest(s, { requestID: ++requestID, bytes: small, kind, payload: base36Cid, name: "small.txt" }));
      expect(one.status).toBe(200);
      expect((await readJson(one)).Cid).toBe(await cidOf([small]));
      const old = await gw.app.handle(await gw.uploadRequest(s, { requestID: ++requestID, bytes: unique("old"), kind, payload: undefined, name: "old.txt" }));
      expect(old.status).toBe(200);
      expect(await backendOf(kind).stat(cid)).toEqual({ size: bytes.length });
    }
  });

  test("a Cid of other bytes → the same 400 as a wrong SHA-256, nothing listed, nothing stored (dfs and ipfs)", async () => {
    const account = await gw.chain.anvil.newAccount();
    const s = await gw.session(account);
    for (const kind of ["dfs", "ipfs"] as const) {
      const bytes = crypto.getRandomValues(new Uint8Array(1_500_000));
      // Off by one byte: the same chunks but the last, so the check must be of the whole Cid.
      const claimed = await cidOf([bytes.subarray(0, bytes.length - 1)]);
      await expectRefusedKeepingNothing(s, kind, bytes, claimed, "payload does not match the file's Cid: nothing was kept");
    }
  });

  test("the SDK signs the file's Cid as the payload (D5)", async () => {
    const account = await gw.chain.anvil.newAccount();
    const payloads: string[] = [];
    // The SDK's requests, with the signed payload read out of each upload's multipart body.
    const spy = async (input: string | URL | Request, init?: RequestInit) => {
      if (init?.method !== "POST" || !String(input).endsWith("/dfs/")) return gw.fetch(input, init);
      const body = new Uint8Array(await new Response(init.body).arrayBuffer());
      const text = new TextDecoder("latin1").decode(body.subarray(0, 4096));
      payloads.push(/name="payload"\r\n\r\n([^\r]*)\r\n/.exec(text)?.[1] ?? "none");
      return gw.fetch(input, { ...init, body });
    };
    const client = await connectStorage({ baseUrl: BASE, account, fetch: spy as typeof fetch });
    await client.login();
    const bytes = crypto.getRandomValues(new Uint8Array(1_048_576 + 1));
    const entry = await client.upload("dfs", bytes, { name: "sdk.bin" });
    expect(entry.Cid).toBe(await cidOf([bytes]));
    expect(payloads).toEqual([entry.Cid]);
  });
});

describe("a refused upload keeps nothing", () => {
  test("bytes that do not hash to the signed payload → 400, nothing listed, nothing stored (dfs and ipfs)", async () => {
    const account = await gw.chain.anvil.newAccount();
    const s = await gw.session(account);
    for (const kind of ["dfs", "ipfs"] as const) {
      const bytes = crypto.getRandomValues(new Uint8Array(1_500_000));
      await expectRefusedKeepingNothing(s, kind, bytes, sha256(unique("something else")), expect.stringMatching(/payload does not match/));
    }
  });

  test("a payload that is neither a SHA-256 nor a CIDv1 → 400", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    // A CIDv0 is not the D9 Cid of anything (D9 Cids are CIDv1).
    for (const payload of ["abc", "z".repeat(64), "", "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", "bafy-not-a-cid"]) {
      const res = await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes: unique("x"), payload }));
      expect(res.status).toBe(400);
    }
  });

  test("a voucher too small for the file → 402, nothing kept, and only what was read is counted", async () => {
    const account = await gw.chain.anvil.newAccount();
    const s = await gw.session(account);
    const bytes = crypto.getRandomValues(new Uint8Array(2_500_000));
    const size = 1_000_000;
    const held = await dfsHolds();
    const res = await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes, fields: { size: String(size), sign: await gw.sign.voucher(account, size, await cidOf([bytes])) } }));
    expect(res.status).toBe(402);
    expect(await readJson(res)).toMatchObject({ Code: "PaymentRequired", HTTPStatusCode: 402 });
    expect(await dfs.stat(await cidOf([bytes]))).toBeUndefined();
    expect(await dfsHolds()).toEqual(held);
  });

  test("a used-up voucher (its size already counted) → 402; a reused voucher → 402", async () => {
    const { account, client } = await gw.user();
    await client.upload("dfs", unique("first"), { name: "first" });
    const s = await gw.session(account);
    const used = Number((await client.trafficHash(0)).used);
    const x = unique("x");
    const stale = await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes: x, fields: { size: String(used), sign: await gw.sign.voucher(account, used, await cidOf([x])) } }));
    expect(stale.status).toBe(402);
    const size = used + 10_000;
    // One file sent twice: a voucher names the file it uploads (D22).
    const once = unique("once");
    const voucher = { size: String(size), sign: await gw.sign.voucher(account, size, await cidOf([once])) };
    expect((await gw.app.handle(await gw.uploadRequest(s, { requestID: 2, bytes: once, name: "once", fields: voucher }))).status).toBe(200);
    const again = await gw.app.handle(await gw.uploadRequest(s, { requestID: 3, bytes: once, name: "twice", fields: voucher }));
    expect(again.status).toBe(402);
    expect((await readJson(again)).Description).toMatch(/already used/);
  });

  test("a voucher signed by another key than the Bearer account's → 517; a missing or malformed one → 517", async () => {
    const account = await gw.chain.anvil.newAccount();
    const s = await gw.session(account);
    const other = await gw.chain.anvil.newAccount();
    const size = 1_000_000;
    const v = unique("v");
    const cases: Record<string, string | undefined>[] = [
      { size: String(size), sign: await gw.sign.voucher(other, size, await cidOf([v])) },
      { sign: undefined },
      { size: undefined },
      { sign: "0x1234" },
      { size: "lots" },
      { size: "-5" },
    ];
    for (const [i, fields] of cases.entries()) {
      const res = await gw.app.handle(await gw.uploadRequest(s, { requestID: i + 1, bytes: v, fields }));
      expect(res.status).toBe(517);
      expect(await readJson(res)).toMatchObject({ Code: "Address", HTTPStatusCode: 517 });
    }
    expect((await readJson(await gw.app.handle(get("/dfs/listobjects", { headers: { authorization: `Bearer ${s.accessToken}` } })))).Object).toEqual([]);
  });

  test("not a multipart body, no file part, or too many fields → 400", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    const auth = { authorization: `Bearer ${s.accessToken}` };
    const send = (body: RequestInit["body"], headers: Record<string, string> = {}) => gw.app.handle(new Request(`${BASE}/dfs/`, { method: "POST", headers: { ...auth, ...headers }, body }));
    expect((await send(JSON.stringify({ file: "x" }), { "content-type": "application/json" })).status).toBe(400);
    expect((await send("--x\r\n", { "content-type": "multipart/form-data" })).status).toBe(400);
    const noFile = new FormData();
    noFile.append("did", s.did);
    expect((await send(noFile)).status).toBe(400);
    const many = await (await gw.uploadRequest(s, { requestID: 1, bytes: unique("a") })).formData();
    const file = many.get("file") as File;
    many.delete("file");
    for (let i = 0; i < 20; i++) many.append(`extra${i}`, "x");
    many.append("file", file, "a");
    expect((await send(many as unknown as RequestInit["body"])).status).toBe(400);
    // None of these claimed id 1.
    expect((await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes: unique("a") }))).status).toBe(200);
  });

  test.each(["dfs", "ipfs"] as const)("a second file part → 400 (D14): neither file is kept, nothing is counted (%s)", async (kind) => {
    const backend = kind === "dfs" ? dfs : ipfs;
    const s = await gw.session(await gw.chain.anvil.newAccount());
    const auth = { authorization: `Bearer ${s.accessToken}` };
    // The first file spans several chunks, so its bytes are stored before the second part shows.
    const first = crypto.getRandomValues(new Uint8Array(2_500_000));
    const second = unique("second");
    const held = await dfsHolds();
    const two = await (await gw.uploadRequest(s, { requestID: 1, bytes: first, kind, name: "first" })).formData();
    two.append("file2", new Blob([second]), "second");
    const res = await gw.app.handle(new Request(`${BASE}/${kind}/`, { method: "POST", headers: auth, body: two as unknown as RequestInit["body"] }));
    expect(res.status).toBe(400);
    expect(await readJson(res)).toEqual({ Code: "InvalidArgument", Description: "one file per upload", HTTPStatusCode: 400 });
    for (const bytes of [first, second]) expect(await backend.stat(await cidOf([bytes]))).toBeUndefined();
    expect(await dfsHolds()).toEqual(held);
    expect((await readJson(await gw.app.handle(get(`/${kind}/listobjects`, { headers: auth })))).Object).toEqual([]);
    expect(await gw.storage?.vouchers.usedBy(s.account.address)).toBe(0);
    // The same file alone is then accepted (under a new request id: the refused one was used).
    const alone = await gw.app.handle(await gw.uploadRequest(s, { requestID: 2, bytes: first, kind, name: "first" }));
    expect(alone.status).toBe(200);
    expect(await readJson(alone)).toMatchObject({ Name: "first", Size: first.length, Cid: await cidOf([first]) });
  });

  test.each(["breaks off", "ends early"])("a body that %s mid-file → 400 (the client's fault), nothing kept", async (how) => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    const bytes = crypto.getRandomValues(new Uint8Array(2_000_000));
    const whole = await gw.uploadRequest(s, { requestID: 1, bytes });
    const body = new Uint8Array(await whole.arrayBuffer());
    const cut = body.length - 700_000;
    const held = await dfsHolds();
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(body.subarray(0, cut));
        if (how === "breaks off") controller.error(new Error("connection reset by peer"));
        else controller.close();
      },
    });
    const res = await gw.app.handle(new Request(whole.url, { method: "POST", headers: whole.headers, body: stream }));
    expect(res.status).toBe(400);
    expect(await readJson(res)).toMatchObject({ Code: "InvalidArgument", HTTPStatusCode: 400 });
    expect(await dfs.stat(await cidOf([bytes]))).toBeUndefined();
    expect(await dfsHolds()).toEqual(held);
    expect(await gw.storage?.vouchers.usedBy(s.account.address)).toBe(0);
  });

  test("names that need quoting or encoding survive the SDK's multipart (RFC 5987)", async () => {
    const { client } = await gw.user();
    for (const name of ["x (1).pdf", "it's*here.txt", 'say "hi".txt', "naïve – 日本語.md", "100% done;.txt"]) {
      const e = await client.upload("dfs", unique(name), { name });
      expect(e.Name).toBe(name);
    }
  });

  test("a file without a name → 400", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    for (const name of ["", "..", "a/"]) {
      const res = await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes: unique("n"), name }));
      expect(res.status).toBe(400);
    }
  });
});

// An upload claims its requestID and its voucher where it records the file (D5, D6:
// one transaction less); before its body it only looks, so a replay or a used voucher is refused
// there, and a refused upload spends neither.
describe("an upload's claims", () => {
  /** The answer to `request` while its client has sent only its first `sent` bytes and stalls. */
  async function answerStalled(request: Request, sent: number): Promise<Response> {
    const stalled = await stalledRequest(request, sent);
    const answer = await gw.app.handle(stalled.request);
    stalled.abort();
    return answer;
  }
  /** A voucher of `size` for the file `bytes`, its Cid sent beside it (the payload is their SHA-256). */
  const voucherOf = async (s: Session, size: number, bytes: Uint8Array) => {
    const cid = await cidOf([bytes]);
    return { size: String(size), sign: await gw.sign.voucher(s.account, size, cid), cid };
  };

  test("an upload refused for its bytes claims nothing: its very request, sent again with its file, is accepted once", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    const good = unique("good");
    const fields = await voucherOf(s, 1_000_000, good);
    const bad = await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes: unique("bad"), payload: sha256(good), fields }));
    expect(bad.status).toBe(400);
    const res = await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes: good, fields }));
    expect(res.status).toBe(200);
    expect((await readJson(res)).Size).toBe(good.length);
    const again = await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes: good, fields }));
    expect(again.status).toBe(401);
    expect((await readJson(again)).Description).toMatch(/requestID already used/);
  });

  test("a replayed requestID → 401 and a used voucher → 402, both before the file is read", async () => {
    const s = await gw.session(await gw.chain.anvil.newAccount());
    // The used voucher is sent again with its own file (a voucher names the file it uploads, D22).
    const bytes = crypto.getRandomValues(new Uint8Array(1_000_000));
    const fields = await voucherOf(s, 10_000_000, bytes);
    expect((await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes, name: "first", fields }))).status).toBe(200);
    const replay = await answerStalled(await gw.uploadRequest(s, { requestID: 1, bytes, fields: await voucherOf(s, 20_000_000, bytes) }), 500_000);
    expect(replay.status).toBe(401);
    expect((await readJson(replay)).Description).toMatch(/requestID already used/);
    const used = await answerStalled(await gw.uploadRequest(s, { requestID: 2, bytes, fields }), 500_000);
    expect(used.status).toBe(402);
    expect((await readJson(used)).Description).toMatch(/already used/);
    expect((await readJson(await gw.app.handle(get("/dfs/listobjects", { headers: { authorization: `Bearer ${s.accessToken}` } })))).Object).toHaveLength(1);
  });
});

describe("names", () => {
  test("an upload with an existing name replaces the entry: new ID, old content released and gone", async () => {
    const { client } = await gw.user();
    const v1 = unique("version 1");
    const v2 = unique("version 2");
    const a = await client.upload("dfs", v1, { name: "doc.txt" });
    const other = await client.upload("dfs", unique("other"), { name: "other.txt" });
    const b = await client.upload("dfs", v2, { name: "doc.txt" });
    expect(b.ID).not.toBe(a.ID);
    expect(b.Cid).not.toBe(a.Cid);
    expect((await client.list("dfs")).Object).toEqual([other, b]);
    expect(await dfs.stat(a.Cid)).toBeUndefined();
    expect(await dfs.stat(b.Cid)).toEqual({ size: v2.length });
    // Its old Cid is no longer the user's to read.
    expect((await failure(client.download("dfs", a.Cid, { size: v1.length }))).status).toBe(403);
    // The old ID is gone for delete too.
    expect((await failure(client.delete(a.ID))).status).toBe(404);
  });

  test("replacing keeps old content another file still references", async () => {
    const { client } = await gw.user();
    const shared = unique("shared");
    const kept = await client.upload("dfs", shared, { name: "keep.txt" });
    await client.upload("dfs", shared, { name: "doc.txt" });
    expect(await dfsRefs(kept.Cid)).toBe(2);
    await client.upload("dfs", unique("new"), { name: "doc.txt" });
    expect(await dfsRefs(kept.Cid)).toBe(1);
    expect(await (await client.download("dfs", kept.Cid)).text()).toBe(new TextDecoder().decode(shared));
  });

  test("on ipfs too: the replaced content is unpinned", async () => {
    const { client } = await gw.user();
    const a = await client.upload("ipfs", unique("pinned 1"), { name: "p.txt" });
    expect(await ipfs.stat(a.Cid)).toBeDefined();
    const b = await client.upload("ipfs", unique("pinned 2"), { name: "p.txt" });
    expect(await ipfs.stat(a.Cid)).toBeUndefined();
    expect((await client.list("ipfs")).Object).toEqual([b]);
  });

  test("the same name on dfs and ipfs, or for two users, are different files", async () => {
    const alice = await gw.user();
    const bob = await gw.user();
    const a = await alice.client.upload("dfs", unique("a"), { name: "same.txt" });
    const b = await alice.client.upload("ipfs", unique("b"), { name: "same.txt" });
    const c = await bob.client.upload("dfs", unique("c"), { name: "same.txt" });
    expect((await alice.client.list("dfs")).Object).toEqual([a]);
    expect((await alice.client.list("ipfs")).Object).toEqual([b]);
    expect((await bob.client.list("dfs")).Object).toEqual([c]);
  });
});

describe("content", () => {
  test("two users uploading the same bytes: stored once, both listed, a delete by one keeps the other's readable", async () => {
    const alice = await gw.user();
    const bob = await gw.user();
    const bytes = crypto.getRandomValues(new Uint8Array(1_200_000));
    const held = await dfsHolds();
    const a = await alice.client.upload("dfs", bytes, { name: "a.bin" });
    const b = await bob.client.upload("dfs", bytes, { name: "b.bin" });
    expect(b.Cid).toBe(a.Cid);
    expect(await dfsRefs(a.Cid)).toBe(2);
    // Stored once: one object, two chunks, the bytes once.
    expect(await dfsHolds()).toEqual({ objects: held.objects + 1, chunks: held.chunks + 2, bytes: held.bytes + bytes.length });
    expect((await alice.client.list("dfs")).Object).toEqual([a]);
    expect((await bob.client.list("dfs")).Object).toEqual([b]);

    expect(await alice.client.delete(a.ID)).toEqual({ Status: "Success" });
    expect(await dfsRefs(a.Cid)).toBe(1);
    expect((await alice.client.list("dfs")).Object).toEqual([]);
    expect(new Uint8Array(await (await bob.client.download("dfs", b.Cid)).arrayBuffer())).toEqual(bytes);
    expect((await failure(alice.client.download("dfs", a.Cid, { size: bytes.length }))).status).toBe(403);

    expect(await bob.client.delete(b.ID)).toEqual({ Status: "Success" });
    expect(await dfs.stat(a.Cid)).toBeUndefined();
    expect(await dfsHolds()).toEqual(held);
  });

  test("the same multi-chunk bytes get the same Cid on dfs and ipfs, and read back byte-exact", async () => {
    const { client } = await gw.user();
    const bytes = crypto.getRandomValues(new Uint8Array(3 * 1024 * 1024 + 5));
    const d = await client.upload("dfs", bytes, { name: "big.bin" });
    const i = await client.upload("ipfs", bytes, { name: "big.bin" });
    expect(i.Cid).toBe(d.Cid);
    expect(d.Cid).toBe(await cidOf([bytes]));
    expect(d.Size).toBe(bytes.length);
    for (const kind of ["dfs", "ipfs"] as const) {
      expect(new Uint8Array(await (await client.download(kind, d.Cid)).arrayBuffer())).toEqual(bytes);
    }
  });
});

describe("storage types", () => {
  test("an unknown storage type → 518 on upload, download and list", async () => {
    const { account, client } = await gw.user();
    const entry = await client.upload("dfs", unique("x"), { name: "x" });
    const s = await gw.session(account);
    const expect518 = async (res: Response) => {
      expect(res.status).toBe(518);
      expect(await readJson(res)).toEqual({ Code: "Storage", Description: "Storage type not supported", HTTPStatusCode: 518 });
    };
    await expect518(await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes: unique("y"), kind: "s3" })));
    expect((await failure(client.upload("mefs", unique("z")))).status).toBe(518);
    const size = 10_000_000;
    const sign = await gw.sign.voucher(account, size, entry.Cid);
    await expect518(await gw.app.handle(get(`/s3/${entry.Cid}?size=${size}&sign=${sign}`)));
    await expect518(await gw.app.handle(get(`/DFS/${entry.Cid}?size=${size}&sign=${sign}`)));
    await expect518(await gw.app.handle(get("/s3/listobjects", { headers: { authorization: `Bearer ${s.accessToken}` } })));
    expect((await failure(client.list("mefs"))).status).toBe(518);
    // The refused upload claimed nothing; the voucher was not used.
    expect((await gw.app.handle(await gw.uploadRequest(s, { requestID: 1, bytes: unique("y") }))).status).toBe(200);
    expect((await gw.app.handle(get(`/dfs/${entry.Cid}?size=${size}&sign=${sign}`))).status).toBe(200);
  });
});

describe("body limit (STOWAGE_MAX_BODY)", async () => {
  const small = await testGateway({ env: { STOWAGE_MAX_BODY: "1MiB" }, ipfs: false });
  const smallDfs = small.backends.dfs as NonNullable<typeof small.backends.dfs>;

  test("a file over the limit → 413 and nothing kept; a file of exactly the limit is taken", async () => {
    const { client } = await small.user();
    const held = await smallDfs.health();
    const over = crypto.getRandomValues(new Uint8Array(1024 * 1024 + 1));
    const e = await failure(client.upload("dfs", over, { name: "over.bin" }));
    expect(e.status).toBe(413);
    expect(e.body).toMatchObject({ Code: "EntityTooLarge", HTTPStatusCode: 413 });
    expect(await smallDfs.stat(await cidOf([over]))).toBeUndefined();
    expect((await smallDfs.health()).chunks).toBe(held.chunks);
    expect((await client.list("dfs")).Object).toEqual([]);

    const exact = over.subarray(0, 1024 * 1024);
    const entry = await client.upload("dfs", exact, { name: "exact.bin" });
    expect(entry.Size).toBe(1024 * 1024);
  });

  test("a body declaring far more than the limit → 413 before anything is read", async () => {
    const { account } = await small.user();
    const s = await small.session(account);
    const req = await small.uploadRequest(s, { requestID: 1, bytes: unique("small") });
    const headers = new Headers(req.headers);
    headers.set("content-length", String(64 * 1024 * 1024));
    const res = await small.app.handle(new Request(req.url, { method: "POST", headers, body: req.body }));
    expect(res.status).toBe(413);
    // Refused before the signed fields were read: id 1 is still free.
    expect((await small.app.handle(await small.uploadRequest(s, { requestID: 1, bytes: unique("small") }))).status).toBe(200);
  });
});
