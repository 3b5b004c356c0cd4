/**
 * S3's conditional requests through the S3 API in process: GET/HEAD with If-Modified-Since and
 * If-Unmodified-Since, alone and with If-Match/If-None-Match (S3's precedence), and conditional
 * writes — PUT and CompleteMultipartUpload with If-None-Match: * and If-Match — including many
 * at once on one key, of which exactly one may win. Runs on both databases and on the S3 blob pass.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { codeIn, md5Hex, MiB, s3Harness } from "./harness.ts";

const h = await s3Harness();
let alice: Awaited<ReturnType<typeof h.account>>;
beforeAll(async () => {
  alice = await h.account();
});

const put = (key: string, body: string | Uint8Array, headers: Record<string, string> = {}) => h.signed(alice.key, "PUT", `/dfs/${key}`, { body, headers });
const bytesOf = async (key: string) => Buffer.from(await (await h.signed(alice.key, "GET", `/dfs/${key}`)).arrayBuffer());
const httpDate = (ms: number) => new Date(ms).toUTCString();

describe("GET and HEAD preconditions", () => {
  let etag: string;
  let modified: number;
  beforeAll(async () => {
    expect((await put("cond/read.txt", "read me")).status).toBe(200);
    const head = await h.signed(alice.key, "HEAD", "/dfs/cond/read.txt");
    etag = head.headers.get("etag") as string;
    modified = Date.parse(head.headers.get("last-modified") as string);
  });
  const get = (headers: Record<string, string>, method = "GET") => h.signed(alice.key, method, "/dfs/cond/read.txt", { headers });

  test("If-Modified-Since: 200 when modified after it, 304 at or after Last-Modified", async () => {
    for (const method of ["GET", "HEAD"]) {
      const earlier = await get({ "if-modified-since": httpDate(modified - 60_000) }, method);
      expect(earlier.status).toBe(200);
      if (method === "GET") expect(await earlier.text()).toBe("read me");
      const same = await get({ "if-modified-since": httpDate(modified) }, method);
      expect(same.status).toBe(304);
      expect(same.headers.get("etag")).toBe(etag);
      expect((await get({ "if-modified-since": httpDate(modified + 60_000) }, method)).status).toBe(304);
    }
  });

  test("If-Unmodified-Since: 412 PreconditionFailed when modified after it, 200 otherwise", async () => {
    const before = await get({ "if-unmodified-since": httpDate(modified - 60_000) });
    expect([before.status, codeIn(await before.text())]).toEqual([412, "PreconditionFailed"]);
    expect((await get({ "if-unmodified-since": httpDate(modified - 60_000) }, "HEAD")).status).toBe(412);
    expect((await get({ "if-unmodified-since": httpDate(modified) })).status).toBe(200);
    expect((await get({ "if-unmodified-since": httpDate(modified + 60_000) }, "HEAD")).status).toBe(200);
  });

  test("an If-Match that holds wins over a failing If-Unmodified-Since; one that fails is 412", async () => {
    expect((await get({ "if-match": etag, "if-unmodified-since": httpDate(modified - 60_000) })).status).toBe(200);
    expect((await get({ "if-match": '"00000000000000000000000000000000"', "if-unmodified-since": httpDate(modified + 60_000) })).status).toBe(412);
  });

  test("If-None-Match decides over If-Modified-Since: a matching tag is 304 whatever the date, another tag 200", async () => {
    expect((await get({ "if-none-match": etag, "if-modified-since": httpDate(modified - 60_000) })).status).toBe(304);
    expect((await get({ "if-none-match": '"00000000000000000000000000000000"', "if-modified-since": httpDate(modified + 60_000) })).status).toBe(200);
  });

  test("a date that is not a date is ignored, as S3 does", async () => {
    expect((await get({ "if-modified-since": "yesterday" })).status).toBe(200);
    expect((await get({ "if-unmodified-since": "not a date" })).status).toBe(200);
  });
});

describe("conditional PUT", () => {
  test("If-None-Match: * creates once; the second is 412 and the first bytes stay", async () => {
    const first = await put("cond/once.txt", "first", { "if-none-match": "*" });
    expect(first.status).toBe(200);
    const second = await put("cond/once.txt", "second", { "if-none-match": "*" });
    expect([second.status, codeIn(await second.text())]).toEqual([412, "PreconditionFailed"]);
    expect((await bytesOf("cond/once.txt")).toString()).toBe("first");
  });

  test("If-Match replaces only the version named: a stale tag is 412, a missing key 404 NoSuchKey", async () => {
    const v1 = await put("cond/cas.txt", "v1");
    const tag1 = v1.headers.get("etag") as string;
    const v2 = await put("cond/cas.txt", "v2", { "if-match": tag1 });
    expect(v2.status).toBe(200);
    const stale = await put("cond/cas.txt", "v3", { "if-match": tag1 });
    expect([stale.status, codeIn(await stale.text())]).toEqual([412, "PreconditionFailed"]);
    expect((await bytesOf("cond/cas.txt")).toString()).toBe("v2");
    const missing = await put("cond/absent.txt", "x", { "if-match": tag1 });
    expect([missing.status, codeIn(await missing.text())]).toEqual([404, "NoSuchKey"]);
    expect((await h.signed(alice.key, "HEAD", "/dfs/cond/absent.txt")).status).toBe(404);
  });

  test("If-None-Match with a tag on a write is NotImplemented, and stores nothing", async () => {
    const res = await put("cond/tagged.txt", "x", { "if-none-match": '"abc"' });
    expect([res.status, codeIn(await res.text())]).toEqual([501, "NotImplemented"]);
    expect((await h.signed(alice.key, "HEAD", "/dfs/cond/tagged.txt")).status).toBe(404);
  });

  test("eight If-None-Match: * PUTs of one new key at once: exactly one wins, its bytes are stored", async () => {
    const bodies = Array.from({ length: 8 }, () => randomBytes(MiB));
    const answers = await Promise.all(bodies.map((b) => put("cond/race.bin", b, { "if-none-match": "*" })));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 412)).toHaveLength(7);
    const winner = bodies[statuses.indexOf(200)] as Buffer;
    expect(md5Hex(await bytesOf("cond/race.bin"))).toBe(md5Hex(winner));
  });

  test("eight If-Match PUTs naming the same version at once: exactly one replaces it", async () => {
    const tag = (await put("cond/race-cas.bin", "base")).headers.get("etag") as string;
    const bodies = Array.from({ length: 8 }, () => randomBytes(MiB));
    const answers = await Promise.all(bodies.map((b) => put("cond/race-cas.bin", b, { "if-match": tag })));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 412)).toHaveLength(7);
    expect(md5Hex(await bytesOf("cond/race-cas.bin"))).toBe(md5Hex(bodies[statuses.indexOf(200)] as Buffer));
  });
});

describe("conditional CompleteMultipartUpload", () => {
  async function upload(key: string, bytes: Uint8Array): Promise<{ id: string; xml: string }> {
    const created = await h.signed(alice.key, "POST", `/dfs/${key}`, { query: { uploads: "" } });
    const id = /<UploadId>([^<]+)<\/UploadId>/.exec(await created.text())?.[1] as string;
    const part = await h.signed(alice.key, "PUT", `/dfs/${key}`, { query: { partNumber: "1", uploadId: id }, body: bytes });
    expect(part.status).toBe(200);
    const xml = `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>${part.headers.get("etag")}</ETag></Part></CompleteMultipartUpload>`;
    return { id, xml };
  }
  const complete = (key: string, u: { id: string; xml: string }, headers: Record<string, string>) => h.signed(alice.key, "POST", `/dfs/${key}`, { query: { uploadId: u.id }, body: u.xml, headers });

  test("If-None-Match: * onto an existing key is 412 and the object stays; the upload can still be aborted", async () => {
    await put("cond/mp.bin", "already here");
    const u = await upload("cond/mp.bin", randomBytes(1000));
    const res = await complete("cond/mp.bin", u, { "if-none-match": "*" });
    expect([res.status, codeIn(await res.text())]).toEqual([412, "PreconditionFailed"]);
    expect((await bytesOf("cond/mp.bin")).toString()).toBe("already here");
    expect((await h.signed(alice.key, "DELETE", "/dfs/cond/mp.bin", { query: { uploadId: u.id } })).status).toBe(204);
  });

  test("If-Match with the current tag completes; two uploads completing If-None-Match: * at once: one wins", async () => {
    const tag = (await put("cond/mp2.bin", "old")).headers.get("etag") as string;
    const u = await upload("cond/mp2.bin", randomBytes(1000));
    const ok = await complete("cond/mp2.bin", u, { "if-match": tag });
    expect([ok.status, codeIn(await ok.text())]).toEqual([200, undefined]);

    const bodies = [randomBytes(2 * MiB), randomBytes(2 * MiB), randomBytes(2 * MiB)];
    const uploads = await Promise.all(bodies.map((b) => upload("cond/mp-race.bin", b)));
    const answers = await Promise.all(uploads.map((u) => complete("cond/mp-race.bin", u, { "if-none-match": "*" })));
    // A refusal comes before the 200 starts (412) or in its body (a 200 whose document is an Error).
    const codes = await Promise.all(answers.map(async (a) => (a.status === 200 ? (codeIn(await a.text()) ?? "ok") : codeIn(await a.text()))));
    expect(codes.filter((c) => c === "ok")).toHaveLength(1);
    expect(codes.filter((c) => c === "PreconditionFailed")).toHaveLength(2);
    expect(md5Hex(await bytesOf("cond/mp-race.bin"))).toBe(md5Hex(bodies[codes.indexOf("ok")] as Buffer));
  });
});
