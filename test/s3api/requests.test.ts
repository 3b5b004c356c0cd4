/**
 * Requests whose shape decides the answer before anything else: a browser's form upload and CORS
 * preflight (refused as unsupported, not as anonymous), a key whose path has dot segments as sent
 * (refused as a key, before the URL parser's normalising breaks its signature), and the absolute
 * Location a CompleteMultipartUpload answers.
 * Runs on both databases and on the S3 blob pass.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { connect } from "node:net";
import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";
import { codeIn, s3Harness, type Minted } from "./harness.ts";

const h = await s3Harness();
let alice: Awaited<ReturnType<typeof h.account>>;
beforeAll(async () => {
  alice = await h.account();
});

const one = (xml: string, tag: string) => new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml)?.[1];

describe("what a browser sends", () => {
  test("a POST policy (form) upload to a bucket is 501 NotImplemented, saying to presign a PUT; nothing is stored", async () => {
    const form = new FormData();
    form.set("key", "form/upload.txt");
    form.set("policy", "eyJjb25kaXRpb25zIjpbXX0=");
    form.set("x-amz-algorithm", "AWS4-HMAC-SHA256");
    form.set("file", new Blob(["from a form"]), "upload.txt");
    for (const path of ["/dfs", "/dfs/"]) {
      const res = await fetch(`${h.s3.url}${path}`, { method: "POST", body: form });
      const xml = await res.text();
      expect([res.status, codeIn(xml)]).toEqual([501, "NotImplemented"]);
      expect(one(xml, "Message")).toBe("POST policy (browser form) uploads are not supported: use a presigned PUT");
    }
    expect((await h.signed(alice.key, "HEAD", "/dfs/form/upload.txt")).status).toBe(404);
    // Any other anonymous POST is refused as anonymous.
    const plain = await fetch(`${h.s3.url}/dfs`, { method: "POST", body: "x", headers: { "content-type": "text/plain" } });
    expect([plain.status, codeIn(await plain.text())]).toEqual([403, "AccessDenied"]);
  });

  test("a CORS preflight is 501 NotImplemented, CORS is not supported; an OPTIONS that is not one is refused as anonymous", async () => {
    const res = await fetch(`${h.s3.url}/dfs/some/key`, { method: "OPTIONS", headers: { origin: "https://app.example", "access-control-request-method": "PUT" } });
    const xml = await res.text();
    expect([res.status, codeIn(xml), one(xml, "Message")]).toEqual([501, "NotImplemented", "CORS is not supported"]);
    const bare = await fetch(`${h.s3.url}/dfs/some/key`, { method: "OPTIONS", headers: { origin: "https://app.example" } });
    expect([bare.status, codeIn(await bare.text())]).toEqual([403, "AccessDenied"]);
  });
});

/**
 * A PUT signed over `rawPath` as it is and sent byte for byte on a socket, as aws-cli sends a key
 * with dot segments: fetch (and any URL parser) would resolve them before sending.
 */
async function rawPut(key: Minted, rawPath: string, body: string): Promise<{ status: number; xml: string }> {
  const base = new URL(h.s3.url);
  const signer = new SignatureV4({ service: "s3", region: "us-east-1", credentials: key, sha256: Sha256, uriEscapePath: false });
  const hash = createHash("sha256").update(body).digest("hex");
  const signed = await signer.sign({ method: "PUT", protocol: "http:", hostname: base.hostname, port: Number(base.port), path: rawPath, query: {}, headers: { host: base.host, "x-amz-content-sha256": hash, "content-length": String(Buffer.byteLength(body)) }, body });
  const head = Object.entries(signed.headers).map(([n, v]) => `${n}: ${v}\r\n`).join("");
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = connect(Number(base.port), base.hostname, () => socket.write(`PUT ${rawPath} HTTP/1.1\r\n${head}connection: close\r\n\r\n${body}`));
    let text = "";
    socket.on("data", (d) => (text += d.toString("utf8")));
    socket.on("end", () => resolve(text));
    socket.on("error", reject);
  });
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]), xml: answer.slice(answer.indexOf("\r\n\r\n") + 4) };
}

describe("keys with dot segments, as sent", () => {
  test("a key with a '.' or '..' segment in the path as sent is 400 InvalidArgument, not a signature mismatch; nothing is stored", async () => {
    for (const path of ["/dfs/dd/a/./b", "/dfs/dd/a/../b", "/dfs/dd/a/%2E/b", "/dfs/dd/a/.%2e/b"]) {
      const { status, xml } = await rawPut(alice.key, path, "dotted");
      expect([path, status, codeIn(xml)]).toEqual([path, 400, "InvalidArgument"]);
    }
    for (const resolved of ["/dfs/dd/a/b", "/dfs/dd/b"]) expect((await h.signed(alice.key, "HEAD", resolved)).status).toBe(404);
    // The same socket path with plain segments stores as it should.
    expect((await rawPut(alice.key, "/dfs/dd/a/.b./c", "dotted")).status).toBe(200);
    expect(await (await h.signed(alice.key, "GET", "/dfs/dd/a/.b./c")).text()).toBe("dotted");
  });
});

describe("CompleteMultipartUpload", () => {
  test("Location is the object's absolute URL on the request's host, its key URL-encoded", async () => {
    const key = "mp loc/a+b (1).bin";
    const path = `/dfs/${encodeURIComponent(key).replaceAll("%2F", "/").replace(/[()]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`;
    const created = await h.signed(alice.key, "POST", path, { query: { uploads: "" } });
    const id = one(await created.text(), "UploadId") as string;
    const part = await h.signed(alice.key, "PUT", path, { query: { uploadId: id, partNumber: "1" }, body: "located" });
    const xml = `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>${part.headers.get("etag")}</ETag></Part></CompleteMultipartUpload>`;
    const done = await (await h.signed(alice.key, "POST", path, { query: { uploadId: id }, body: xml })).text();
    const expected = `${h.s3.url}/dfs/mp%20loc/a%2Bb%20%281%29.bin`;
    expect([one(done, "Location"), one(done, "Key")]).toEqual([expected, key]);
    // The Location names the object: a GET of it (signed) reads it back.
    const url = new URL(expected);
    expect(url.host).toBe(new URL(h.s3.url).host);
    expect(await (await h.signed(alice.key, "GET", url.pathname)).text()).toBe("located");
    // A Complete sent again answers the same Location.
    const again = await (await h.signed(alice.key, "POST", path, { query: { uploadId: id }, body: xml })).text();
    expect(one(again, "Location")).toBe(expected);
  });
});
