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

describe("conditional DELETE", () => {
  const del = (key: string, headers: Record<string, string>) => h.signed(alice.key, "DELETE", `/dfs/${key}`, { headers });
  const exists = async (key: string) => (await h.signed(alice.key, "HEAD", `/dfs/${key}`)).status === 200;
  const stat = async (key: string) => {
    const head = await h.signed(alice.key, "HEAD", `/dfs/${key}`);
    return { etag: head.headers.get("etag") as string, modified: Date.parse(head.headers.get("last-modified") as string) };
  };

  test("If-Match: a stale tag is 412 and the object stays; its own tag or * deletes it; a missing key is 404 NoSuchKey", async () => {
    await put("cond/d1", "delete me");
    const { etag } = await stat("cond/d1");
    const stale = await del("cond/d1", { "if-match": '"00000000000000000000000000000000"' });
    expect([stale.status, codeIn(await stale.text())]).toEqual([412, "PreconditionFailed"]);
    expect(await exists("cond/d1")).toBe(true);
    expect((await del("cond/d1", { "if-match": etag })).status).toBe(204);
    expect(await exists("cond/d1")).toBe(false);
    await put("cond/d1", "again");
    expect((await del("cond/d1", { "if-match": "*" })).status).toBe(204);
    expect(await exists("cond/d1")).toBe(false);
    const missing = await del("cond/d1", { "if-match": "*" });
    expect([missing.status, codeIn(await missing.text())]).toEqual([404, "NoSuchKey"]);
  });

  test("x-amz-if-match-size and x-amz-if-match-last-modified-time: a mismatch is 412 and deletes nothing; a match deletes", async () => {
    await put("cond/d2", "twelve bytes");
    const { modified } = await stat("cond/d2");
    const mismatches: Record<string, string>[] = [{ "x-amz-if-match-size": "13" }, { "x-amz-if-match-last-modified-time": httpDate(modified - 60_000) }, { "x-amz-if-match-size": "12", "x-amz-if-match-last-modified-time": httpDate(modified + 60_000) }];
    for (const headers of mismatches) {
      const res = await del("cond/d2", headers);
      expect({ headers, status: res.status, code: codeIn(await res.text()) }).toEqual({ headers, status: 412, code: "PreconditionFailed" });
      expect(await exists("cond/d2")).toBe(true);
    }
    const bad = await del("cond/d2", { "x-amz-if-match-size": "twelve" });
    expect([bad.status, codeIn(await bad.text())]).toEqual([400, "InvalidArgument"]);
    expect(await exists("cond/d2")).toBe(true);
    expect((await del("cond/d2", { "x-amz-if-match-size": "12", "x-amz-if-match-last-modified-time": httpDate(modified) })).status).toBe(204);
    expect(await exists("cond/d2")).toBe(false);
    // Nothing to delete: the size and time conditions hold, as on S3.
    expect((await del("cond/d2", { "x-amz-if-match-size": "12" })).status).toBe(204);
  });

  test("DeleteObjects: each key's ETag, Size and LastModifiedTime are its conditions; a VersionId other than null is NoSuchVersion", async () => {
    for (const k of ["b1", "b2", "b3", "b4", "b5", "b6"]) await put(`cond/batch/${k}`, k);
    const s1 = await stat("cond/batch/b1");
    const s4 = await stat("cond/batch/b4");
    const iso = (ms: number) => new Date(ms).toISOString();
    const doc =
      "<Delete>" +
      `<Object><Key>cond/batch/b1</Key><ETag>${s1.etag.replace(/"/g, "&quot;")}</ETag></Object>` +
      '<Object><Key>cond/batch/b2</Key><ETag>"0000"</ETag></Object>' +
      "<Object><Key>cond/batch/b3</Key><Size>99</Size></Object>" +
      `<Object><Key>cond/batch/b4</Key><Size>2</Size><LastModifiedTime>${iso(s4.modified)}</LastModifiedTime></Object>` +
      `<Object><Key>cond/batch/b5</Key><LastModifiedTime>${iso(s4.modified - 60_000)}</LastModifiedTime></Object>` +
      "<Object><Key>cond/batch/b6</Key><VersionId>abc</VersionId></Object>" +
      "<Object><Key>cond/batch/none</Key><ETag>*</ETag></Object>" +
      "</Delete>";
    const res = await h.signed(alice.key, "POST", "/dfs", { query: { delete: "" }, body: doc });
    expect(res.status).toBe(200);
    const xml = await res.text();
    const deleted = [...xml.matchAll(/<Deleted><Key>([^<]*)<\/Key>/g)].map((m) => m[1]);
    const errors = [...xml.matchAll(/<Error><Key>([^<]*)<\/Key>(?:<VersionId>[^<]*<\/VersionId>)?<Code>([^<]*)<\/Code>/g)].map((m) => [m[1], m[2]]);
    expect(deleted).toEqual(["cond/batch/b1", "cond/batch/b4"]);
    expect(errors).toEqual([
      ["cond/batch/b2", "PreconditionFailed"],
      ["cond/batch/b3", "PreconditionFailed"],
      ["cond/batch/b5", "PreconditionFailed"],
      ["cond/batch/b6", "NoSuchVersion"],
      ["cond/batch/none", "NoSuchKey"],
    ]);
    for (const [k, kept] of [["b1", false], ["b2", true], ["b3", true], ["b4", false], ["b5", true], ["b6", true]] as const) expect({ k, kept: await exists(`cond/batch/${k}`) }).toEqual({ k, kept });
  });

  test("an If-Match PUT and an If-Match DELETE of one version at once, sixteen times: exactly one of them acts", async () => {
    for (let i = 0; i < 16; i++) {
      const key = `cond/race-del/${i}`;
      const tag = (await put(key, "base")).headers.get("etag") as string;
      const body = randomBytes(1024);
      const [w, d] = await Promise.all([put(key, body, { "if-match": tag }), del(key, { "if-match": tag })]);
      const won = [w.status === 200, d.status === 204];
      expect({ i, won: won.filter(Boolean).length }).toEqual({ i, won: 1 });
      // The delete that lost found the new version: 412, as a stale If-Match is, never 404.
      if (won[0]) expect([i, d.status, md5Hex(await bytesOf(key))]).toEqual([i, 412, md5Hex(body)]);
      else expect(await exists(key)).toBe(false);
    }
  });
});

describe("conditional CopyObject", () => {
  const copy = (bucket: string, key: string, source: string, headers: Record<string, string> = {}) => h.signed(alice.key, "PUT", `/${bucket}/${key}`, { headers: { "x-amz-copy-source": source, ...headers } });
  const read = async (bucket: string, key: string) => Buffer.from(await (await h.signed(alice.key, "GET", `/${bucket}/${key}`)).arrayBuffer()).toString();

  // dfs → dfs composes (no byte copied); dfs → ipfs stores the bytes again: both write paths.
  for (const bucket of ["dfs", "ipfs"]) {
    test(`${bucket}: If-None-Match: * onto an existing key is 412 and the destination stays; onto a new key it copies`, async () => {
      await put("cond/copy-src.txt", "source bytes");
      expect((await h.signed(alice.key, "PUT", `/${bucket}/cond/copy-dst-${bucket}.txt`, { body: "already here" })).status).toBe(200);
      const res = await copy(bucket, `cond/copy-dst-${bucket}.txt`, "dfs/cond/copy-src.txt", { "if-none-match": "*" });
      expect([res.status, codeIn(await res.text())]).toEqual([412, "PreconditionFailed"]);
      expect(await read(bucket, `cond/copy-dst-${bucket}.txt`)).toBe("already here");
      const fresh = await copy(bucket, `cond/copy-new-${bucket}.txt`, "dfs/cond/copy-src.txt", { "if-none-match": "*" });
      expect(fresh.status).toBe(200);
      expect(await read(bucket, `cond/copy-new-${bucket}.txt`)).toBe("source bytes");
    });

    test(`${bucket}: If-Match on the destination: a stale tag is 412, its own tag copies, a missing key is 404 NoSuchKey`, async () => {
      const dst = `cond/copy-cas-${bucket}.txt`;
      const tag = (await h.signed(alice.key, "PUT", `/${bucket}/${dst}`, { body: "v1" })).headers.get("etag") as string;
      const stale = await copy(bucket, dst, "dfs/cond/copy-src.txt", { "if-match": '"00000000000000000000000000000000"' });
      expect([stale.status, codeIn(await stale.text())]).toEqual([412, "PreconditionFailed"]);
      expect(await read(bucket, dst)).toBe("v1");
      expect((await copy(bucket, dst, "dfs/cond/copy-src.txt", { "if-match": tag })).status).toBe(200);
      expect(await read(bucket, dst)).toBe("source bytes");
      const missing = await copy(bucket, `cond/copy-absent-${bucket}.txt`, "dfs/cond/copy-src.txt", { "if-match": tag });
      expect([missing.status, codeIn(await missing.text())]).toEqual([404, "NoSuchKey"]);
    });
  }

  test("eight If-None-Match: * copies of different sources onto one new key at once: exactly one wins", async () => {
    for (let i = 0; i < 8; i++) await put(`cond/copy-race-src/${i}`, `source ${i}`);
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => copy("dfs", "cond/copy-race.txt", `dfs/cond/copy-race-src/${i}`, { "if-none-match": "*" })));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 412)).toHaveLength(7);
    expect(await read("dfs", "cond/copy-race.txt")).toBe(`source ${statuses.indexOf(200)}`);
  });
});
