/**
 * S3 protocol details real clients and conformance suites rely on, through the S3 API in
 * process: ListObjects markers, encoding and owners; bucket-name and key errors; a Complete sent
 * again; a part sent again while the first is in flight; GET/HEAD of one part (?partNumber=).
 * Runs on both databases and on the S3 blob pass.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { codeIn, md5Hex, MiB, s3Harness } from "./harness.ts";

const h = await s3Harness();
let alice: Awaited<ReturnType<typeof h.account>>;
beforeAll(async () => {
  alice = await h.account();
});

const put = (key: string, body: string | Uint8Array) => h.signed(alice.key, "PUT", `/dfs/${key}`, { body });
const list = async (query: Record<string, string>) => {
  const res = await h.signed(alice.key, "GET", "/dfs", { query });
  expect(res.status).toBe(200);
  return res.text();
};
const all = (xml: string, tag: string) => [...xml.matchAll(new RegExp(`<${tag}>([^<]*)</${tag}>`, "g"))].map((m) => (m[1] as string).replaceAll("&quot;", '"').replaceAll("&amp;", "&"));

describe("ListObjects", () => {
  beforeAll(async () => {
    for (const k of ["ls/a.txt", "ls/b/1.txt", "ls/b/2.txt", "ls/c.txt", "ls/d/1.txt", "ls/e.txt"]) expect((await put(k, k)).status).toBe(200);
  });

  test("V1 pages with a delimiter: NextMarker is the last key or common prefix, and each shows once", async () => {
    const seen: string[] = [];
    let marker = "";
    for (let page = 0; page < 10; page++) {
      const xml = await list({ prefix: "ls/", delimiter: "/", "max-keys": "2", ...(marker ? { marker } : {}) });
      const names = [...all(xml, "Key"), ...all(xml, "Prefix").filter((p) => p !== "ls/")];
      seen.push(...names);
      if (!xml.includes("<IsTruncated>true</IsTruncated>")) break;
      const next = all(xml, "NextMarker")[0] as string;
      expect(next).not.toContain("\u{10FFFF}");
      expect(names).toContain(next);
      marker = next;
    }
    expect(seen.sort()).toEqual(["ls/a.txt", "ls/b/", "ls/c.txt", "ls/d/", "ls/e.txt"]);
  });

  test("V2 continuation tokens page the same way", async () => {
    const seen: string[] = [];
    let token: string | undefined;
    for (let page = 0; page < 10; page++) {
      const xml = await list({ "list-type": "2", prefix: "ls/", delimiter: "/", "max-keys": "2", ...(token ? { "continuation-token": token } : {}) });
      seen.push(...all(xml, "Key"), ...all(xml, "Prefix").filter((p) => p !== "ls/"));
      if (!xml.includes("<IsTruncated>true</IsTruncated>")) break;
      token = all(xml, "NextContinuationToken")[0];
    }
    expect(seen.sort()).toEqual(["ls/a.txt", "ls/b/", "ls/c.txt", "ls/d/", "ls/e.txt"]);
  });

  test("encoding-type=url encodes keys but leaves the request's Prefix as it was sent", async () => {
    expect((await put("enc dir/x+y.txt", "e")).status).toBe(200);
    const xml = await list({ "list-type": "2", prefix: "enc dir/", "encoding-type": "url" });
    expect(all(xml, "Prefix")[0]).toBe("enc dir/");
    expect(all(xml, "Key")).toEqual(["enc%20dir/x%2By.txt"]);
  });

  test("max-keys=0 lists nothing and is not truncated", async () => {
    for (const v of [{}, { "list-type": "2" }] as Record<string, string>[]) {
      const xml = await list({ ...v, prefix: "ls/", "max-keys": "0" });
      expect(xml).toContain("<IsTruncated>false</IsTruncated>");
      expect(all(xml, "Key")).toEqual([]);
    }
  });

  test("V1 names each object's Owner; V2 only with fetch-owner=true", async () => {
    const owner = `<Owner><ID>${alice.client.did}</ID><DisplayName>${alice.client.did}</DisplayName></Owner>`;
    expect(await list({ prefix: "ls/a" })).toContain(owner);
    expect(await list({ "list-type": "2", prefix: "ls/a" })).not.toContain("<Owner>");
    expect(await list({ "list-type": "2", prefix: "ls/a", "fetch-owner": "true" })).toContain(owner);
  });
});

describe("errors", () => {
  test("a key that is not UTF-8 is 400, and nothing is stored", async () => {
    const res = await h.signed(alice.key, "PUT", "/dfs/x", { rawPath: "/dfs/bad%FF%FEkey", body: "x" });
    expect(res.status).toBe(400);
    expect(codeIn(await res.text())).toBeDefined();
    expect(await list({ prefix: "bad" })).not.toContain("<Key>");
  });

  test("a bucket name S3 would not allow is 400 InvalidBucketName; a good name that is not here, 404 NoSuchBucket", async () => {
    for (const [method, path] of [["GET", "/Bad_Bucket"], ["PUT", "/ab"], ["GET", "/-dash/key"], ["DELETE", "/a..b"], ["HEAD", "/192.168.1.1"]] as const) {
      const res = await h.signed(alice.key, method, path);
      expect([method, path, res.status]).toEqual([method, path, 400]);
      if (method !== "HEAD") expect(codeIn(await res.text())).toBe("InvalidBucketName");
    }
    for (const method of ["GET", "DELETE"]) {
      const res = await h.signed(alice.key, method, "/no-such-bucket");
      expect([res.status, codeIn(await res.text())]).toEqual([404, "NoSuchBucket"]);
    }
    // The buckets that are here cannot be deleted.
    expect((await h.signed(alice.key, "DELETE", "/dfs")).status).toBe(405);
  });
});

describe("multipart details", () => {
  async function create(key: string): Promise<string> {
    const res = await h.signed(alice.key, "POST", `/dfs/${key}`, { query: { uploads: "" } });
    return /<UploadId>([^<]+)<\/UploadId>/.exec(await res.text())?.[1] as string;
  }
  const completeXml = (parts: [number, string][]) => `<CompleteMultipartUpload>${parts.map(([n, e]) => `<Part><PartNumber>${n}</PartNumber><ETag>${e}</ETag></Part>`).join("")}</CompleteMultipartUpload>`;

  test("a Complete sent again after it succeeded answers 200 with the same ETag; with other parts it is NoSuchUpload", async () => {
    const id = await create("mp/again.bin");
    const part = await h.signed(alice.key, "PUT", "/dfs/mp/again.bin", { query: { partNumber: "1", uploadId: id }, body: "again" });
    const xml = completeXml([[1, part.headers.get("etag") as string]]);
    const first = await h.signed(alice.key, "POST", "/dfs/mp/again.bin", { query: { uploadId: id }, body: xml });
    const etag = all(await first.text(), "ETag")[0];
    expect(etag).toMatch(/^"[0-9a-f]{32}-1"$/);
    const second = await h.signed(alice.key, "POST", "/dfs/mp/again.bin", { query: { uploadId: id }, body: xml });
    const body = await second.text();
    expect([second.status, codeIn(body), all(body, "ETag")[0]]).toEqual([200, undefined, etag]);
    const other = await h.signed(alice.key, "POST", "/dfs/mp/again.bin", { query: { uploadId: id }, body: completeXml([[1, `"${md5Hex("other")}"`]]) });
    expect([other.status, codeIn(await other.text())]).toEqual([404, "NoSuchUpload"]);
  });

  test("a part sent again while the first is still arriving: the one that finishes last is kept, and a list naming both completes with it", async () => {
    const id = await create("mp/resend.bin");
    const first = randomBytes(MiB);
    const second = randomBytes(MiB);
    // The first part's body: half now, the rest once the second part is stored.
    let finish!: () => void;
    const held = new Promise<void>((r) => (finish = r));
    const slow = new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(first.subarray(0, MiB / 2));
        await held;
        c.enqueue(first.subarray(MiB / 2));
        c.close();
      },
    });
    const url = new URL("/dfs/mp/resend.bin", h.s3.url);
    // Signed as UNSIGNED-PAYLOAD: a streamed body cannot be hashed before it is sent.
    const pending = h.signed(alice.key, "PUT", url.pathname, { query: { partNumber: "1", uploadId: id }, payload: "UNSIGNED-PAYLOAD", body: slow as unknown as Uint8Array, headers: { "content-length": String(MiB) } });
    const b = await h.signed(alice.key, "PUT", url.pathname, { query: { partNumber: "1", uploadId: id }, body: second });
    expect(b.status).toBe(200);
    finish();
    const a = await pending;
    expect(a.status).toBe(200);
    const parts = await (await h.signed(alice.key, "GET", url.pathname, { query: { uploadId: id } })).text();
    expect(all(parts, "ETag")).toEqual([`"${md5Hex(first)}"`]);
    const done = await h.signed(alice.key, "POST", url.pathname, { query: { uploadId: id }, body: completeXml([[1, b.headers.get("etag") as string], [1, a.headers.get("etag") as string]]) });
    expect(codeIn(await done.text())).toBeUndefined();
    expect(md5Hex(Buffer.from(await (await h.signed(alice.key, "GET", url.pathname)).arrayBuffer()))).toBe(md5Hex(first));
  });
});
