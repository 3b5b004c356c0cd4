/**
 * S3's flexible checksums through the S3 API in process: each algorithm sent as a header is
 * checked (a wrong one stores nothing), kept, and given back by HEAD/GET with x-amz-checksum-mode,
 * GetObjectAttributes and listings; multipart uploads keep their algorithm, each part's checksum
 * (sent or copied) and the object's (COMPOSITE, or FULL_OBJECT combined from the parts);
 * GET/HEAD ?partNumber=.
 * Runs on both databases and on the S3 blob pass.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { crc32 } from "node:zlib";
import { running } from "../../src/s3api/checksums.ts";
import { codeIn, md5Hex, MiB, s3Harness } from "./harness.ts";

const h = await s3Harness();
let alice: Awaited<ReturnType<typeof h.account>>;
beforeAll(async () => {
  alice = await h.account();
});

const b64 = (hex: string) => Buffer.from(hex, "hex").toString("base64");
const crc32Of = (b: Uint8Array) => {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(crc32(b));
  return out.toString("base64");
};
const sumOf = (algorithm: "crc32c" | "crc64nvme", b: Uint8Array) => {
  const r = running(algorithm);
  r.update(b);
  return r.digest();
};
const mode = { "x-amz-checksum-mode": "ENABLED" };

test("the CRCs are the published ones (check values of '123456789')", () => {
  const nine = new TextEncoder().encode("123456789");
  expect(crc32Of(nine)).toBe(b64("cbf43926"));
  expect(sumOf("crc32c", nine)).toBe(b64("e3069283"));
  expect(sumOf("crc64nvme", nine)).toBe(b64("ae8b14860a799888"));
});

describe("PutObject", () => {
  const body = randomBytes(100_000);
  const cases: [string, string][] = [
    ["crc32", crc32Of(body)],
    ["crc32c", sumOf("crc32c", body)],
    ["crc64nvme", sumOf("crc64nvme", body)],
    ["sha1", createHash("sha1").update(body).digest("base64")],
    ["sha256", createHash("sha256").update(body).digest("base64")],
  ];
  for (const [algorithm, value] of cases) {
    test(`x-amz-checksum-${algorithm} is checked, kept, and given back when asked`, async () => {
      const key = `/dfs/sum/${algorithm}.bin`;
      const put = await h.signed(alice.key, "PUT", key, { body, headers: { [`x-amz-checksum-${algorithm}`]: value } });
      expect(put.status).toBe(200);
      expect(put.headers.get(`x-amz-checksum-${algorithm}`)).toBe(value);
      const head = await h.signed(alice.key, "HEAD", key, { headers: mode });
      expect([head.headers.get(`x-amz-checksum-${algorithm}`), head.headers.get("x-amz-checksum-type")]).toEqual([value, "FULL_OBJECT"]);
      expect((await h.signed(alice.key, "HEAD", key)).headers.get(`x-amz-checksum-${algorithm}`)).toBeNull();
      const get = await h.signed(alice.key, "GET", key, { headers: mode });
      expect(get.headers.get(`x-amz-checksum-${algorithm}`)).toBe(value);
      expect(md5Hex(Buffer.from(await get.arrayBuffer()))).toBe(md5Hex(body));
      // A range is not the object: no checksum. Part 1 of an object put whole is the object.
      expect((await h.signed(alice.key, "GET", key, { headers: { ...mode, range: "bytes=0-9" } })).headers.get(`x-amz-checksum-${algorithm}`)).toBeNull();
      expect((await h.signed(alice.key, "HEAD", key, { query: { partNumber: "1" }, headers: mode })).headers.get(`x-amz-checksum-${algorithm}`)).toBe(value);
      const attrs = await (await h.signed(alice.key, "GET", key, { query: { attributes: "" }, headers: { "x-amz-object-attributes": "Checksum,ObjectSize" } })).text();
      expect(attrs).toContain(`<Checksum><Checksum${algorithm.toUpperCase()}>${value}</Checksum${algorithm.toUpperCase()}><ChecksumType>FULL_OBJECT</ChecksumType></Checksum>`);
      const listed = await (await h.signed(alice.key, "GET", "/dfs", { query: { "list-type": "2", prefix: `sum/${algorithm}.bin` } })).text();
      expect(listed).toContain(`<ChecksumAlgorithm>${algorithm.toUpperCase()}</ChecksumAlgorithm>`);
    });
  }

  test("a checksum that does not match is BadDigest, a malformed one InvalidRequest, an unknown algorithm NotImplemented: nothing is stored", async () => {
    const wrong = await h.signed(alice.key, "PUT", "/dfs/sum/wrong.bin", { body, headers: { "x-amz-checksum-crc32c": sumOf("crc32c", randomBytes(10)) } });
    expect([wrong.status, codeIn(await wrong.text())]).toEqual([400, "BadDigest"]);
    const bad = await h.signed(alice.key, "PUT", "/dfs/sum/wrong.bin", { body, headers: { "x-amz-checksum-sha256": "not base64!" } });
    expect([bad.status, codeIn(await bad.text())]).toEqual([400, "InvalidRequest"]);
    const other = await h.signed(alice.key, "PUT", "/dfs/sum/wrong.bin", { body, headers: { "x-amz-checksum-sha512": createHash("sha512").update(body).digest("base64") } });
    expect([other.status, codeIn(await other.text())]).toEqual([501, "NotImplemented"]);
    expect((await h.signed(alice.key, "HEAD", "/dfs/sum/wrong.bin")).status).toBe(404);
  });
});

describe("multipart", () => {
  const parts = [randomBytes(5 * MiB), randomBytes(5 * MiB), randomBytes(MiB + 7)];
  async function uploadAll(key: string, headers: Record<string, string>, partHeaders: (i: number) => Record<string, string>) {
    const created = await h.signed(alice.key, "POST", key, { query: { uploads: "" }, headers });
    expect(created.status).toBe(200);
    const id = /<UploadId>([^<]+)<\/UploadId>/.exec(await created.text())?.[1] as string;
    const answers = [];
    for (const [i, p] of parts.entries()) {
      const res = await h.signed(alice.key, "PUT", key, { query: { partNumber: String(i + 1), uploadId: id }, body: p, headers: partHeaders(i) });
      expect(res.status).toBe(200);
      answers.push(res);
    }
    return { id, created, answers };
  }

  test("CRC32 COMPOSITE: each part's checksum (sent or computed), the object's -N, given back", async () => {
    const key = "/dfs/sum/mp-composite.bin";
    const { id, created, answers } = await uploadAll(key, { "x-amz-checksum-algorithm": "CRC32" }, (i): Record<string, string> => (i === 0 ? { "x-amz-checksum-crc32": crc32Of(parts[0] as Buffer) } : {}));
    expect([created.headers.get("x-amz-checksum-algorithm"), created.headers.get("x-amz-checksum-type")]).toEqual(["CRC32", "COMPOSITE"]);
    const sums = parts.map(crc32Of);
    expect(answers.map((a) => a.headers.get("x-amz-checksum-crc32"))).toEqual(sums);
    const listed = await (await h.signed(alice.key, "GET", key, { query: { uploadId: id } })).text();
    expect([...listed.matchAll(/<ChecksumCRC32>([^<]+)<\/ChecksumCRC32>/g)].map((m) => m[1])).toEqual(sums);
    const entry = (i: number, sum = sums[i]) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${answers[i]?.headers.get("etag")}</ETag><ChecksumCRC32>${sum}</ChecksumCRC32></Part>`;
    // A part's checksum that is not the stored one: InvalidPart.
    const off = await h.signed(alice.key, "POST", key, { query: { uploadId: id }, body: `<CompleteMultipartUpload>${entry(0)}${entry(1, sums[0])}${entry(2)}</CompleteMultipartUpload>` });
    expect([off.status, codeIn(await off.text())]).toEqual([400, "InvalidPart"]);
    const done = await h.signed(alice.key, "POST", key, { query: { uploadId: id }, body: `<CompleteMultipartUpload>${entry(0)}${entry(1)}${entry(2)}</CompleteMultipartUpload>` });
    const expected = `${crc32Of(Buffer.concat(sums.map((s) => Buffer.from(s as string, "base64"))))}-3`;
    const doc = await done.text();
    expect(doc).toContain(`<ChecksumCRC32>${expected}</ChecksumCRC32><ChecksumType>COMPOSITE</ChecksumType>`);
    const head = await h.signed(alice.key, "HEAD", key, { headers: mode });
    expect([head.headers.get("x-amz-checksum-crc32"), head.headers.get("x-amz-checksum-type")]).toEqual([expected, "COMPOSITE"]);
  }, 30_000);

  test("CRC64NVME FULL_OBJECT: the whole object's CRC, combined from the parts'; a wrong one in Complete's header is BadDigest", async () => {
    const key = "/dfs/sum/mp-full.bin";
    const { id, created, answers } = await uploadAll(key, { "x-amz-checksum-algorithm": "CRC64NVME" }, () => ({}));
    expect(created.headers.get("x-amz-checksum-type")).toBe("FULL_OBJECT");
    const whole = sumOf("crc64nvme", Buffer.concat(parts));
    const xml = `<CompleteMultipartUpload>${answers.map((a, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${a.headers.get("etag")}</ETag></Part>`).join("")}</CompleteMultipartUpload>`;
    const wrong = await h.signed(alice.key, "POST", key, { query: { uploadId: id }, body: xml, headers: { "x-amz-checksum-crc64nvme": sumOf("crc64nvme", parts[0] as Buffer) } });
    expect(codeIn(await wrong.text())).toBe("BadDigest");
    const done = await h.signed(alice.key, "POST", key, { query: { uploadId: id }, body: xml, headers: { "x-amz-checksum-crc64nvme": whole } });
    expect(await done.text()).toContain(`<ChecksumCRC64NVME>${whole}</ChecksumCRC64NVME><ChecksumType>FULL_OBJECT</ChecksumType>`);
    expect((await h.signed(alice.key, "HEAD", key, { headers: mode })).headers.get("x-amz-checksum-crc64nvme")).toBe(whole);
  }, 30_000);

  test("UploadPartCopy in a CRC32C upload: CopyPartResult gives each copied part's checksum; the object's is made of them", async () => {
    const source = randomBytes(6 * MiB + 3);
    expect((await h.signed(alice.key, "PUT", "/dfs/sum/copy-source.bin", { body: source })).status).toBe(200);
    const key = "/dfs/sum/mp-copied.bin";
    const created = await h.signed(alice.key, "POST", key, { query: { uploads: "" }, headers: { "x-amz-checksum-algorithm": "CRC32C" } });
    const id = /<UploadId>([^<]+)<\/UploadId>/.exec(await created.text())?.[1] as string;
    const pieces = [source.subarray(0, 5 * MiB), source.subarray(5 * MiB)];
    const etags: string[] = [];
    for (const [i, range] of [`bytes=0-${5 * MiB - 1}`, `bytes=${5 * MiB}-${source.byteLength - 1}`].entries()) {
      const res = await h.signed(alice.key, "PUT", key, { query: { partNumber: String(i + 1), uploadId: id }, headers: { "x-amz-copy-source": "dfs/sum/copy-source.bin", "x-amz-copy-source-range": range } });
      const doc = await res.text();
      expect(res.status).toBe(200);
      expect(/<ChecksumCRC32C>([^<]+)<\/ChecksumCRC32C>/.exec(doc)?.[1]).toBe(sumOf("crc32c", pieces[i] as Buffer));
      etags.push(/<ETag>([^<]+)<\/ETag>/.exec(doc)?.[1] as string);
    }
    const sums = pieces.map((p) => sumOf("crc32c", p));
    const xml = `<CompleteMultipartUpload>${etags.map((e, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${e}</ETag><ChecksumCRC32C>${sums[i]}</ChecksumCRC32C></Part>`).join("")}</CompleteMultipartUpload>`;
    const done = await h.signed(alice.key, "POST", key, { query: { uploadId: id }, body: xml });
    const expected = `${sumOf("crc32c", Buffer.concat(sums.map((s) => Buffer.from(s, "base64"))))}-2`;
    expect([done.status, await done.text()]).toEqual([200, expect.stringContaining(`<ChecksumCRC32C>${expected}</ChecksumCRC32C><ChecksumType>COMPOSITE</ChecksumType>`)]);
    const head = await h.signed(alice.key, "HEAD", key, { headers: mode });
    expect([head.headers.get("x-amz-checksum-crc32c"), head.headers.get("content-length")]).toEqual([expected, String(source.byteLength)]);
  }, 30_000);

  test("GET/HEAD ?partNumber= reads each part of a multipart object, with its count and its checksum; past the last is InvalidPartNumber", async () => {
    const key = "/dfs/sum/mp-composite.bin";
    let offset = 0;
    for (const [i, p] of parts.entries()) {
      const res = await h.signed(alice.key, "GET", key, { query: { partNumber: String(i + 1) }, headers: mode });
      expect([res.status, res.headers.get("x-amz-mp-parts-count"), res.headers.get("content-range")]).toEqual([206, "3", `bytes ${offset}-${offset + p.byteLength - 1}/${11 * MiB + 7}`]);
      // The part's own CRC32 (a client checks the bytes it got against it), not the object's -3.
      expect(res.headers.get("x-amz-checksum-crc32")).toBe(crc32Of(p));
      expect(md5Hex(Buffer.from(await res.arrayBuffer()))).toBe(md5Hex(p));
      offset += p.byteLength;
    }
    expect((await h.signed(alice.key, "GET", key, { query: { partNumber: "2" } })).headers.get("x-amz-checksum-crc32")).toBeNull();
    const head = await h.signed(alice.key, "HEAD", key, { query: { partNumber: "3" } });
    expect([head.status, head.headers.get("content-length")]).toEqual([206, String(MiB + 7)]);
    const past = await h.signed(alice.key, "GET", key, { query: { partNumber: "4" } });
    const doc = await past.text();
    expect([past.status, codeIn(doc)]).toEqual([416, "InvalidPartNumber"]);
    expect(doc).toContain("<ActualPartCount>3</ActualPartCount>");
  });

  test("GetObjectAttributes ObjectParts lists a multipart object's parts with their checksums, a page at a time", async () => {
    const key = "/dfs/sum/mp-composite.bin";
    const attrs = async (headers: Record<string, string>) => {
      const res = await h.signed(alice.key, "GET", key, { query: { attributes: "" }, headers: { "x-amz-object-attributes": "ObjectParts", ...headers } });
      return [res.status, await res.text()] as const;
    };
    const part = (i: number) => `<Part><PartNumber>${i + 1}</PartNumber><Size>${parts[i]?.byteLength}</Size><ChecksumCRC32>${crc32Of(parts[i] as Buffer)}</ChecksumCRC32></Part>`;
    const [status, first] = await attrs({ "x-amz-max-parts": "2" });
    expect(status).toBe(200);
    expect(first).toContain(`<ObjectParts><PartNumberMarker>0</PartNumberMarker><NextPartNumberMarker>2</NextPartNumberMarker><MaxParts>2</MaxParts><IsTruncated>true</IsTruncated>${part(0)}${part(1)}<PartsCount>3</PartsCount></ObjectParts>`);
    const [, rest] = await attrs({ "x-amz-max-parts": "2", "x-amz-part-number-marker": "2" });
    expect(rest).toContain(`<PartNumberMarker>2</PartNumberMarker><NextPartNumberMarker>3</NextPartNumberMarker><MaxParts>2</MaxParts><IsTruncated>false</IsTruncated>${part(2)}<PartsCount>3</PartsCount>`);
    const [bad, doc] = await attrs({ "x-amz-max-parts": "-1" });
    expect([bad, codeIn(doc)]).toEqual([400, "InvalidArgument"]);
  });
});
