/**
 * The S3 API in process, over a whole test gateway (anvil, the dfs store, Helia, quota from the
 * chain's records, access keys minted through POST /v2/keys), on a real socket, driven by Bun's
 * own S3Client and by hand-signed requests: objects up, down, listed and deleted; the key's
 * scope, a wrong secret, a revoked key, another account's key; quota refusals storing nothing;
 * multipart; presigned URLs. Runs on both databases (and on the S3 blob pass).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes, createHash, createHmac } from "node:crypto";
import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";
import { findAccessKey } from "../../src/keys/index.ts";
import { keysClient } from "../../src/sdk/keys.ts";
import { startS3Api } from "../../src/s3api/index.ts";
import { createDirectStorage } from "../../src/storage/direct.ts";
import { cidOf } from "../../src/storage/dfs/index.ts";
import { granter } from "../quota/grants.ts";
import { blobStoreOf } from "../support/blobs.ts";
import { MAX_OPEN_UPLOADS } from "../../src/s3api/multipart.ts";
import { BASE, testGateway } from "../support/storage.ts";
import { codeIn, s3ApiOver, signedAt, type Minted } from "./harness.ts";

const MiB = 1024 * 1024;
const gw = await testGateway({ quota: true });
const grant = granter(gw.chain);
const meter = gw.quota?.meter;
/** File bytes in and out as the server's metrics hear of them. */
const moved = { in: 0, out: 0 };
/** Content reads of the dfs back-end (a multipart completion of parts that line up on chunks makes none). */
const dfsReads = { n: 0 };
const dfs = gw.backends.dfs!;
/** Set, the dfs back-end's reads answer this instead of the content (a disk that fails). */
const readInstead: { bytes?: () => ReadableStream<Uint8Array> } = {};
const backends = { ...gw.backends, dfs: { ...dfs, read: (...a: Parameters<typeof dfs.read>) => (dfsReads.n++, readInstead.bytes?.() ?? dfs.read(...a)) } };
/** Bytes the dfs back-end's `put` has taken from its sources: what could reach the blob store. */
const intoDfs = { bytes: 0 };
backends.dfs.put = (source, opts) => dfs.put(source.pipeThrough(new TransformStream({ transform: (chunk, c) => void ((intoDfs.bytes += chunk.byteLength), c.enqueue(chunk)) })), opts);
const direct = createDirectStorage({ sql: gw.database.sql, log: gw.log, maxBody: gw.config.maxBody, backends, meter, onTransfer: (_, d, n) => void (moved[d] += n) });
const { s3, bucketClient, signed } = await s3ApiOver(gw, { direct });

/** A new account with `space`/`traffic` bytes of free quota, and a key of its own. */
async function account(o: { space?: number; traffic?: number; access?: "rw" | "ro"; bucket?: "dfs" | "ipfs" | "*" } = {}) {
  const { account, client } = await gw.user();
  if (o.space !== 0) await grant(account.address, "space", o.space ?? 256 * MiB);
  if (o.traffic !== 0) await grant(account.address, "traffic", o.traffic ?? 1024 * MiB);
  const keys = keysClient({ baseUrl: BASE, store: client, fetch: gw.fetch });
  const key = await keys.create({ access: o.access ?? "rw", bucket: o.bucket ?? "*" });
  return { account, client, keys, key };
}


let alice: Awaited<ReturnType<typeof account>>;
beforeAll(async () => {
  alice = await account();
});

describe("objects with Bun's S3Client", () => {
  test("put, get, stat, list and delete on dfs; ETag is the MD5, the Cid in x-stowage-cid", async () => {
    const c = bucketClient(alice.key);
    const bytes = randomBytes(3 * MiB + 17);
    const before = { ...moved };
    await c.write("photos/2024/a.bin", bytes);
    const back = new Uint8Array(await c.file("photos/2024/a.bin").arrayBuffer());
    expect(Buffer.from(back).equals(bytes)).toBe(true);
    expect([moved.in - before.in, moved.out - before.out]).toEqual([bytes.byteLength, bytes.byteLength]);
    const stat = await c.file("photos/2024/a.bin").stat();
    expect(stat.size).toBe(bytes.byteLength);
    expect(stat.etag.replace(/"/g, "")).toBe(createHash("md5").update(bytes).digest("hex"));
    const head = await signed(alice.key, "HEAD", "/dfs/photos/2024/a.bin");
    expect(head.headers.get("x-stowage-cid")).toMatch(/^baf/);
    const ranged = await c.file("photos/2024/a.bin").slice(10, 20).arrayBuffer();
    expect(Buffer.from(ranged).equals(bytes.subarray(10, 20))).toBe(true);
    const listed = await c.list({ prefix: "photos/" });
    expect(listed.contents?.map((o) => o.key)).toEqual(["photos/2024/a.bin"]);
    await c.delete("photos/2024/a.bin");
    expect(await c.exists("photos/2024/a.bin")).toBe(false);
  });

  test("multipart: a 12 MiB object in 5 MiB parts has the <md5 of MD5s>-N ETag and reads back whole", async () => {
    const c = bucketClient(alice.key);
    const bytes = randomBytes(12 * MiB);
    const writer = c.file("big/multi.bin").writer({ partSize: 5 * MiB });
    for (let i = 0; i < bytes.byteLength; i += MiB) writer.write(bytes.subarray(i, i + MiB));
    await writer.end();
    const stat = await c.file("big/multi.bin").stat();
    const parts = [bytes.subarray(0, 5 * MiB), bytes.subarray(5 * MiB, 10 * MiB), bytes.subarray(10 * MiB)];
    const expected = `${createHash("md5").update(Buffer.concat(parts.map((p) => createHash("md5").update(p).digest()))).digest("hex")}-3`;
    expect(stat.etag.replace(/"/g, "")).toBe(expected);
    expect(Buffer.from(await c.file("big/multi.bin").arrayBuffer()).equals(bytes)).toBe(true);
    await c.delete("big/multi.bin");
  }, 30_000);

  test("multipart of parts in whole MiB: completion reads no part back; the Cid is the bytes' own, byte-exact; other parts stream", async () => {
    const c = bucketClient(alice.key);
    for (const [partSize, size, readsBack] of [[5 * MiB, 11 * MiB + 3, false], [5 * MiB + 512 * 1024, 11 * MiB + 3, true]] as const) {
      const bytes = randomBytes(size);
      const writer = c.file("big/aligned.bin").writer({ partSize });
      for (let i = 0; i < bytes.byteLength; i += 256 * 1024) writer.write(bytes.subarray(i, i + 256 * 1024));
      const before = { reads: dfsReads.n, moved: moved.in };
      await writer.end();
      expect(dfsReads.n > before.reads).toBe(readsBack);
      expect(moved.in - before.moved).toBe(size); // the parts' bytes, counted once at completion
      const stat = await c.file("big/aligned.bin").stat();
      const n = Math.ceil(size / partSize);
      const md5s = Array.from({ length: n }, (_, i) => createHash("md5").update(bytes.subarray(i * partSize, (i + 1) * partSize)).digest());
      expect(stat.etag.replace(/"/g, "")).toBe(`${createHash("md5").update(Buffer.concat(md5s)).digest("hex")}-${n}`);
      const head = await signed(alice.key, "HEAD", "/dfs/big/aligned.bin");
      expect(head.headers.get("x-stowage-cid")).toBe(await cidOf([bytes]));
      expect(Buffer.from(await c.file("big/aligned.bin").arrayBuffer()).equals(bytes)).toBe(true);
    }
    await c.delete("big/aligned.bin");
  }, 60_000);

  test("multipart on ipfs (whose back-end composes nothing) streams the parts: the same Cid as on dfs, byte-exact", async () => {
    const c = bucketClient(alice.key, "ipfs");
    const bytes = randomBytes(10 * MiB + 5);
    const writer = c.file("big/ipfs-multi.bin").writer({ partSize: 5 * MiB });
    for (let i = 0; i < bytes.byteLength; i += MiB) writer.write(bytes.subarray(i, i + MiB));
    await writer.end();
    const head = await signed(alice.key, "HEAD", "/ipfs/big/ipfs-multi.bin");
    expect(head.headers.get("x-stowage-cid")).toBe(await cidOf([bytes]));
    expect(Buffer.from(await c.file("big/ipfs-multi.bin").arrayBuffer()).equals(bytes)).toBe(true);
  }, 60_000);

  test("a presigned GET URL works with a plain fetch", async () => {
    const c = bucketClient(alice.key);
    await c.write("shared.txt", "hello presigned\n");
    const url = c.file("shared.txt").presign({ expiresIn: 60 });
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("hello presigned\n");
    const tampered = await fetch(url.replace("shared.txt", "shared.tx"));
    expect(tampered.status).toBe(403);
    expect(codeIn(await tampered.text())).toBe("SignatureDoesNotMatch");
  });
});

describe("a read that fails", () => {
  const didOf = (a: { account: { address: string } }) => `did:ethr:0x${gw.config.chainId.toString(16)}:${a.account.address}`;
  const trafficLeft = async (a: Awaited<ReturnType<typeof account>>) => (await meter?.record(a.account.address, didOf(a), "traffic"))?.SizeByte ?? -1;
  const failures: [string, () => ReadableStream<Uint8Array>][] = [
    ["fails", () => new ReadableStream({ pull: (c) => c.error(new Error("EIO: i/o error, read")) })],
    ["comes short", () => new ReadableStream({ start: (c) => (c.enqueue(new Uint8Array(10)), c.close()) })],
  ];
  test.each(failures)("GetObject of a body read whole whose read %s → 500 InternalError, its traffic given back; the next GET is charged once", async (_, bytes) => {
    const a = await account();
    const body = randomBytes(4096);
    expect((await signed(a.key, "PUT", "/dfs/flaky.bin", { body })).status).toBe(200);
    const before = await trafficLeft(a);
    readInstead.bytes = bytes;
    let res: Response;
    try {
      res = await signed(a.key, "GET", "/dfs/flaky.bin");
    } finally {
      readInstead.bytes = undefined;
    }
    expect(res.status).toBe(500);
    expect(codeIn(await res.text())).toBe("InternalError");
    expect(await trafficLeft(a)).toBe(before);
    const again = await signed(a.key, "GET", "/dfs/flaky.bin");
    expect(Buffer.from(await again.arrayBuffer()).equals(body)).toBe(true);
    expect(before - (await trafficLeft(a))).toBe(4096);
  });
});

describe("authentication and scope", () => {
  test("a wrong secret → 403 SignatureDoesNotMatch; an unknown key → 403 InvalidAccessKeyId", async () => {
    const wrong = await signed({ ...alice.key, secretAccessKey: `${alice.key.secretAccessKey}x` }, "GET", "/dfs", { query: { "list-type": "2" } });
    expect(wrong.status).toBe(403);
    expect(codeIn(await wrong.text())).toBe("SignatureDoesNotMatch");
    const unknown = await signed({ accessKeyId: "STWAAAAAAAAAAAAAAAAA", secretAccessKey: "x" }, "GET", "/");
    expect(unknown.status).toBe(403);
    expect(codeIn(await unknown.text())).toBe("InvalidAccessKeyId");
    const anonymous = await fetch(`${s3.url}/dfs`);
    expect(anonymous.status).toBe(403);
    expect(anonymous.headers.get("content-type")).toBe("application/xml");
  });

  test("a read-only key cannot write, a dfs key cannot see ipfs", async () => {
    const ro = await alice.keys.create({ access: "ro", bucket: "dfs" });
    const put = await signed(ro, "PUT", "/dfs/ro.txt", { body: "x" });
    expect(put.status).toBe(403);
    expect(codeIn(await put.text())).toBe("AccessDenied");
    const other = await signed(ro, "GET", "/ipfs", { query: { "list-type": "2" } });
    expect(codeIn(await other.text())).toBe("AccessDenied");
    const buckets = await signed(ro, "GET", "/");
    const xml = await buckets.text();
    expect(xml).toContain("<Name>dfs</Name>");
    expect(xml).not.toContain("<Name>ipfs</Name>");
  });

  test("a revoked key is refused", async () => {
    const k = await alice.keys.create();
    expect((await signed(k, "GET", "/")).status).toBe(200);
    await alice.keys.revoke(k.accessKeyId);
    const res = await signed(k, "GET", "/");
    expect(res.status).toBe(403);
    expect(codeIn(await res.text())).toBe("InvalidAccessKeyId");
  });

  test("another account's key sees none of the first's files", async () => {
    await bucketClient(alice.key).write("mine/secret.txt", "alice only");
    const bob = await account();
    const c = bucketClient(bob.key);
    expect((await c.list()).contents ?? []).toEqual([]);
    const get = await signed(bob.key, "GET", "/dfs/mine/secret.txt");
    expect(get.status).toBe(404);
    expect(codeIn(await get.text())).toBe("NoSuchKey");
  });
});

describe("buckets, listing, deletes, errors", () => {
  test("CreateBucket is refused; unknown buckets do not exist", async () => {
    const mine = await signed(alice.key, "PUT", "/dfs");
    expect(mine.status).toBe(409);
    expect(codeIn(await mine.text())).toBe("BucketAlreadyOwnedByYou");
    const other = await signed(alice.key, "PUT", "/newbucket");
    expect(codeIn(await other.text())).toBe("AccessDenied");
    const none = await signed(alice.key, "GET", "/newbucket", { query: { "list-type": "2" } });
    expect(none.status).toBe(404);
    expect(codeIn(await none.text())).toBe("NoSuchBucket");
    // HeadBucket: the two back-ends are there, nothing else is.
    for (const bucket of ["/dfs", "/ipfs"]) expect((await signed(alice.key, "HEAD", bucket)).status).toBe(200);
    expect((await signed(alice.key, "HEAD", "/newbucket")).status).toBe(404);
  });

  test("ListObjectsV2: byte order, delimiter folding, pages by continuation token", async () => {
    const bob = await account();
    const c = bucketClient(bob.key);
    const names = ["a/1", "a/2", "a/b/3", "B", "b", "c/x", "é", "z"];
    for (const n of names) await c.write(n, n);
    const all = await c.list();
    expect(all.contents?.map((o) => o.key)).toEqual([...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y))));
    const folded = await c.list({ delimiter: "/" });
    expect(folded.contents?.map((o) => o.key)).toEqual(["B", "b", "z", "é"]);
    expect(folded.commonPrefixes?.map((p) => p.prefix)).toEqual(["a/", "c/"]);
    const seen: string[] = [];
    let token: string | undefined;
    do {
      const page = await c.list({ maxKeys: 3, continuationToken: token });
      seen.push(...(page.contents ?? []).map((o) => o.key));
      token = page.isTruncated ? page.nextContinuationToken : undefined;
    } while (token);
    expect(seen).toEqual(all.contents?.map((o) => o.key) ?? []);
    const inA = await c.list({ prefix: "a/", delimiter: "/" });
    expect(inA.contents?.map((o) => o.key)).toEqual(["a/1", "a/2"]);
    expect(inA.commonPrefixes?.map((p) => p.prefix)).toEqual(["a/b/"]);
  });

  test("ipfs: put and get work, delete is refused (spec rule 4)", async () => {
    const c = bucketClient(alice.key, "ipfs");
    await c.write("perm.txt", "forever");
    expect(await c.file("perm.txt").text()).toBe("forever");
    const res = await signed(alice.key, "DELETE", "/ipfs/perm.txt");
    expect(res.status).toBe(405);
    expect(codeIn(await res.text())).toBe("MethodNotAllowed");
    expect(await c.file("perm.txt").text()).toBe("forever");
  });

  test("keys with . or .. segments are refused", async () => {
    // A URL resolves plain dot segments before any server sees them; encoded slashes keep them in the key.
    for (const path of ["/dfs/a%2F..%2Fb", "/dfs/a%2F.%2Fb", "/dfs/..%2Fb"]) {
      const res = await signed(alice.key, "PUT", path, { body: "x" });
      expect(res.status).toBe(400);
      expect(codeIn(await res.text())).toBe("InvalidArgument");
    }
    expect((await bucketClient(alice.key).list({ prefix: "a/" })).contents ?? []).toEqual([]);
  });

  test("a body that does not match its signed SHA-256 stores nothing", async () => {
    const res = await signed(alice.key, "PUT", "/dfs/mismatch.txt", { body: "real bytes", payload: createHash("sha256").update("other bytes").digest("hex") });
    expect(res.status).toBe(400);
    expect(codeIn(await res.text())).toBe("XAmzContentSHA256Mismatch");
    expect((await signed(alice.key, "HEAD", "/dfs/mismatch.txt")).status).toBe(404);
  });

  test("a checksum header (x-amz-checksum-crc32) that does not match → BadDigest, nothing stored", async () => {
    const wrong = await signed(alice.key, "PUT", "/dfs/crc.txt", { body: "hello world", headers: { "x-amz-checksum-crc32": "AAAAAA==" } });
    expect(wrong.status).toBe(400);
    expect(codeIn(await wrong.text())).toBe("BadDigest");
    expect((await signed(alice.key, "HEAD", "/dfs/crc.txt")).status).toBe(404);
    expect((await signed(alice.key, "PUT", "/dfs/crc.txt", { body: "hello world", headers: { "x-amz-checksum-crc32": "DUoRhQ==" } })).status).toBe(200);
  });

  test("over quota → an S3 error, and nothing is stored", async () => {
    const poor = await account({ space: MiB });
    const c = bucketClient(poor.key);
    const err = await c.write("too-big.bin", randomBytes(2 * MiB)).catch((e: unknown) => e as { code?: string });
    expect((err as { code?: string }).code).toBe("QuotaExceeded");
    expect((await c.list()).contents ?? []).toEqual([]);
    expect(await meter?.record(poor.account.address, `did:ethr:0x${gw.config.chainId.toString(16)}:${poor.account.address}`, "space")).toMatchObject({ SizeByte: MiB });
  });

  test("If-Match / If-None-Match", async () => {
    const c = bucketClient(alice.key);
    await c.write("cond.txt", "conditional");
    const etag = (await c.file("cond.txt").stat()).etag;
    expect((await signed(alice.key, "GET", "/dfs/cond.txt", { headers: { "if-none-match": etag } })).status).toBe(304);
    expect((await signed(alice.key, "GET", "/dfs/cond.txt", { headers: { "if-match": etag } })).status).toBe(200);
    const failed = await signed(alice.key, "GET", "/dfs/cond.txt", { headers: { "if-match": '"0123"' } });
    expect(failed.status).toBe(412);
    expect(codeIn(await failed.text())).toBe("PreconditionFailed");
  });
});

describe("multipart quota and streamed bodies", () => {
  /** CreateMultipartUpload by hand: the UploadId. */
  async function createUpload(key: Minted, path: string): Promise<string> {
    const res = await signed(key, "POST", path, { query: { uploads: "" } });
    expect(res.status).toBe(200);
    return /<UploadId>([^<]+)<\/UploadId>/.exec(await res.text())?.[1] as string;
  }

  test("parts hold space until completed or aborted: a part that does not fit is refused and not kept", async () => {
    const poor = await account({ space: 6 * MiB });
    const id = await createUpload(poor.key, "/dfs/parts.bin");
    const part1 = await signed(poor.key, "PUT", "/dfs/parts.bin", { query: { partNumber: "1", uploadId: id }, body: randomBytes(5 * MiB) });
    expect(part1.status).toBe(200);
    const part2 = await signed(poor.key, "PUT", "/dfs/parts.bin", { query: { partNumber: "2", uploadId: id }, body: randomBytes(2 * MiB) });
    expect(part2.status).toBe(403);
    expect(codeIn(await part2.text())).toBe("QuotaExceeded");
    // The first part's hold counts against other uploads too.
    const other = await signed(poor.key, "PUT", "/dfs/other.bin", { body: randomBytes(2 * MiB) });
    expect(codeIn(await other.text())).toBe("QuotaExceeded");
    const listed = await signed(poor.key, "GET", "/dfs/parts.bin", { query: { uploadId: id } });
    expect((await listed.text()).match(/<PartNumber>/g)?.length).toBe(1);
    const uploads = await (await signed(poor.key, "GET", "/dfs", { query: { uploads: "" } })).text();
    expect(uploads).toContain(`<Upload><Key>parts.bin</Key><UploadId>${id}</UploadId>`);
    expect((await signed(poor.key, "DELETE", "/dfs/parts.bin", { query: { uploadId: id } })).status).toBe(204);
    // Aborted: the space is free again, and the upload is gone.
    expect((await signed(poor.key, "PUT", "/dfs/other.bin", { body: randomBytes(2 * MiB) })).status).toBe(200);
    const gone = await signed(poor.key, "PUT", "/dfs/parts.bin", { query: { partNumber: "3", uploadId: id }, body: "x" });
    expect(codeIn(await gone.text())).toBe("NoSuchUpload");
    expect(await (await signed(poor.key, "GET", "/dfs", { query: { uploads: "" } })).text()).not.toContain("<Upload>");
  });

  test("UploadPart checks Content-MD5: a part that differs is BadDigest, not kept and holding no space; a malformed one InvalidDigest", async () => {
    const poor = await account({ space: 6 * MiB });
    const id = await createUpload(poor.key, "/dfs/md5-part.bin");
    const bytes = randomBytes(5 * MiB);
    const part = (body: Uint8Array | string, md5: string) => signed(poor.key, "PUT", "/dfs/md5-part.bin", { query: { partNumber: "1", uploadId: id }, body, headers: { "content-md5": md5 } });
    const b64 = (b: Uint8Array | string) => createHash("md5").update(b).digest("base64");
    const wrong = await part(bytes, b64("y"));
    expect([wrong.status, codeIn(await wrong.text())]).toEqual([400, "BadDigest"]);
    const malformed = await part("x".repeat(10), "not-an-md5");
    expect([malformed.status, codeIn(await malformed.text())]).toEqual([400, "InvalidDigest"]);
    expect(await (await signed(poor.key, "GET", "/dfs/md5-part.bin", { query: { uploadId: id } })).text()).not.toContain("<Part>");
    // The refused part holds nothing: the same 5 MiB of a 6 MiB account fit at once.
    const ok = await part(bytes, b64(bytes));
    expect(ok.status).toBe(200);
    expect(ok.headers.get("etag")).toBe(`"${createHash("md5").update(bytes).digest("hex")}"`);
    expect((await (await signed(poor.key, "GET", "/dfs/md5-part.bin", { query: { uploadId: id } })).text()).match(/<Part>/g)?.length).toBe(1);
    expect((await signed(poor.key, "DELETE", "/dfs/md5-part.bin", { query: { uploadId: id } })).status).toBe(204);
  });

  test("STREAMING-AWS4-HMAC-SHA256-PAYLOAD: chunk signatures checked on the way in", async () => {
    const key = alice.key;
    const url = new URL("/dfs/streamed.txt", s3.url);
    const chunks = ["hello ", "streamed ", "world"];
    const decoded = chunks.join("").length;
    const signer = new SignatureV4({ service: "s3", region: "us-east-1", credentials: key, sha256: Sha256, uriEscapePath: false });
    const headers = { host: url.host, "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "content-encoding": "aws-chunked", "x-amz-decoded-content-length": String(decoded) };
    const req = await signer.sign({ method: "PUT", protocol: "http:", hostname: url.hostname, port: Number(url.port), path: url.pathname, query: {}, headers });
    const auth = String(req.headers.authorization);
    const seed = /Signature=([0-9a-f]{64})/.exec(auth)?.[1] as string;
    const date = String(req.headers["x-amz-date"]);
    const scope = `${date.slice(0, 8)}/us-east-1/s3/aws4_request`;
    // The signing key and each chunk's string to sign, as AWS's streaming documentation spells them.
    let k: Buffer = Buffer.from(`AWS4${key.secretAccessKey}`);
    for (const part of [date.slice(0, 8), "us-east-1", "s3", "aws4_request"]) k = createHmac("sha256", k).update(part).digest();
    const sha = (s: string) => createHash("sha256").update(s).digest("hex");
    const body = (tamper: boolean) => {
      let previous = seed;
      let out = "";
      for (const c of [...chunks, ""]) {
        const sig = createHmac("sha256", k).update(["AWS4-HMAC-SHA256-PAYLOAD", date, scope, previous, sha(""), sha(c)].join("\n")).digest("hex");
        previous = sig;
        out += `${c.length.toString(16)};chunk-signature=${sig}\r\n${tamper && c === "world" ? "w0rld" : c}\r\n`;
      }
      return out;
    };
    const send = (b: string) => fetch(url, { method: "PUT", headers: req.headers as Record<string, string>, body: b });
    const bad = await send(body(true));
    expect(bad.status).toBe(403);
    expect(codeIn(await bad.text())).toBe("SignatureDoesNotMatch");
    expect((await signed(key, "HEAD", "/dfs/streamed.txt")).status).toBe(404);
    const ok = await send(body(false));
    expect(ok.status).toBe(200);
    expect(await bucketClient(key).file("streamed.txt").text()).toBe("hello streamed world");
  });
});

describe("copy and batch delete", () => {
  test("CopyObject within the account (across buckets too); another account's source is not found", async () => {
    const c = bucketClient(alice.key);
    await c.write("copy/src.txt", "copied bytes");
    const before = { reads: dfsReads.n, moved: moved.in };
    const res = await signed(alice.key, "PUT", "/dfs/copy/dst.txt", { headers: { "x-amz-copy-source": "/dfs/copy/src.txt" } });
    expect(res.status).toBe(200);
    const xml = await res.text();
    expect(xml).toContain(`<ETag>&quot;${createHash("md5").update("copied bytes").digest("hex")}&quot;</ETag>`);
    // Within dfs the copy is one more reference to the same content: nothing read, no traffic.
    expect([dfsReads.n, moved.in]).toEqual([before.reads, before.moved]);
    expect(res.headers.get("x-stowage-cid")).toBe(await cidOf([new TextEncoder().encode("copied bytes")]));
    expect(await c.file("copy/dst.txt").text()).toBe("copied bytes");
    // The source can go; the copy stays whole.
    await c.delete("copy/src.txt");
    expect(await c.file("copy/dst.txt").text()).toBe("copied bytes");
    await c.write("copy/src.txt", "copied bytes");
    expect((await signed(alice.key, "PUT", "/ipfs/copied.txt", { headers: { "x-amz-copy-source": "dfs/copy/src.txt" } })).status).toBe(200);
    expect(await bucketClient(alice.key, "ipfs").file("copied.txt").text()).toBe("copied bytes");
    const bob = await account();
    const stolen = await signed(bob.key, "PUT", "/dfs/stolen.txt", { headers: { "x-amz-copy-source": "dfs/copy/src.txt" } });
    expect(stolen.status).toBe(404);
    expect(codeIn(await stolen.text())).toBe("NoSuchKey");
  });

  test("a copy keeps its source's encryption label (an age file stays marked as one, in and across buckets)", async () => {
    const bytes = randomBytes(4000); // stands for age ciphertext: the server never looks inside
    await alice.client.upload("dfs", bytes, { name: "sealed-a.age", encryption: "age" });
    for (const [bucket, path] of [["dfs", "/dfs/sealed/b.age"], ["ipfs", "/ipfs/sealed-b.age"]] as const) {
      expect((await signed(alice.key, "PUT", path, { headers: { "x-amz-copy-source": "dfs/sealed-a.age" } })).status).toBe(200);
      const listed = (await alice.client.list(bucket)).Object.find((f) => f.Name === path.slice(bucket.length + 2));
      expect(listed?.UserDefined.encryption).toBe("age");
    }
  });

  test("DeleteObjects: each key deleted, reported per key", async () => {
    const c = bucketClient(alice.key);
    for (const n of ["batch/1", "batch/2", "batch/3"]) await c.write(n, n);
    const doc = `<Delete><Object><Key>batch/1</Key></Object><Object><Key>batch/2</Key></Object><Object><Key>batch/none</Key></Object></Delete>`;
    const res = await signed(alice.key, "POST", "/dfs", { query: { delete: "" }, body: doc, headers: { "content-md5": createHash("md5").update(doc).digest("base64") } });
    expect(res.status).toBe(200);
    expect((await res.text()).match(/<Deleted>/g)?.length).toBe(3);
    expect((await c.list({ prefix: "batch/" })).contents?.map((o) => o.key)).toEqual(["batch/3"]);
    const bad = await signed(alice.key, "POST", "/dfs", { query: { delete: "" }, body: "<nope/>" });
    expect(codeIn(await bad.text())).toBe("MalformedXML");
  });

  test("DeleteObjects checks the document's Content-MD5: one that differs is BadDigest and deletes nothing", async () => {
    const c = bucketClient(alice.key);
    await c.write("batch-md5/1", "1");
    const doc = "<Delete><Object><Key>batch-md5/1</Key></Object></Delete>";
    const wrong = await signed(alice.key, "POST", "/dfs", { query: { delete: "" }, body: doc, headers: { "content-md5": createHash("md5").update(doc.replace("1", "2")).digest("base64") } });
    expect([wrong.status, codeIn(await wrong.text())]).toEqual([400, "BadDigest"]);
    const malformed = await signed(alice.key, "POST", "/dfs", { query: { delete: "" }, body: doc, headers: { "content-md5": "nope" } });
    expect([malformed.status, codeIn(await malformed.text())]).toEqual([400, "InvalidDigest"]);
    expect(await c.exists("batch-md5/1")).toBe(true);
  });

  test("a character reference to no XML character (&#x110000;, &#0;, a surrogate, U+FFFE, a huge number) is MalformedXML (400), and deletes nothing", async () => {
    const c = bucketClient(alice.key);
    await c.write("refs/kept", "kept");
    for (const ref of ["&#x110000;", "&#1114112;", "&#0;", "&#xD800;", "&#xFFFE;", "&#x1F;", `&#${"9".repeat(400)};`, `&#x${"F".repeat(400)};`]) {
      const doc = `<Delete><Object><Key>refs/kept</Key></Object><Object><Key>refs/${ref}</Key></Object></Delete>`;
      const res = await signed(alice.key, "POST", "/dfs", { query: { delete: "" }, body: doc });
      expect({ ref, status: res.status, code: codeIn(await res.text()) }).toEqual({ ref, status: 400, code: "MalformedXML" });
    }
    expect(await c.exists("refs/kept")).toBe(true);
    // Valid references still read: the last character of Unicode, a tab, an astral one.
    const doc = "<Delete><Object><Key>refs/kept</Key></Object><Object><Key>refs/&#x10FFFF;&#9;&#x1F600;</Key></Object></Delete>";
    const res = await signed(alice.key, "POST", "/dfs", { query: { delete: "" }, body: doc });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain(`<Key>refs/\u{10FFFF}\t\u{1F600}</Key>`);
    expect(await c.exists("refs/kept")).toBe(false);
  });
});

describe("objects a browser would run", () => {
  // A presigned URL opens in a browser, on a port of the same site as the console: an object is
  // never sniffed, a document made of it is sandboxed, and what a browser would render or run
  // comes as an attachment (passive types, such as images, may still show inline).
  test("GetObject and HeadObject of an uploaded .html, .svg or .js: an attachment, with nosniff and the sandbox; a .png inline", async () => {
    const c = bucketClient(alice.key);
    const files: [string, string, string | null][] = [
      ["site/page.html", "text/html", 'attachment; filename="page.html"; filename*=UTF-8\'\'page.html'],
      ["site/pic.svg", "image/svg+xml", 'attachment; filename="pic.svg"; filename*=UTF-8\'\'pic.svg'],
      ["site/data.xml", "application/xml", 'attachment; filename="data.xml"; filename*=UTF-8\'\'data.xml'],
      ["site/app.js", "text/plain; charset=utf-8", 'attachment; filename="app.js"; filename*=UTF-8\'\'app.js'],
      ["site/photo.png", "image/png", null],
    ];
    for (const [key] of files) await c.write(key, `<html><script>alert(document.domain)</script></html> ${key}`);
    for (const [key, type, disposition] of files) {
      for (const method of ["GET", "HEAD"]) {
        const res = await signed(alice.key, method, `/dfs/${key}`);
        expect(res.status).toBe(200);
        expect({ key, method, type: res.headers.get("content-type"), disposition: res.headers.get("content-disposition"), nosniff: res.headers.get("x-content-type-options"), csp: res.headers.get("content-security-policy") }).toEqual({
          key,
          method,
          type: expect.stringMatching(new RegExp(`^${type.replace("+", "\\+")}`)),
          disposition,
          nosniff: "nosniff",
          csp: "sandbox; default-src 'none'",
        });
        await res.arrayBuffer();
      }
    }
    // A presigned GET, as a browser would open it, the same.
    const url = c.file("site/page.html").presign({ expiresIn: 60 });
    const opened = await fetch(url);
    expect([opened.status, opened.headers.get("content-disposition"), opened.headers.get("content-security-policy")]).toEqual([200, 'attachment; filename="page.html"; filename*=UTF-8\'\'page.html', "sandbox; default-src 'none'"]);
    await opened.arrayBuffer();
  });
});

describe("empty objects", () => {
  test("a zero-byte object (a folder marker) stores, lists and reads back empty", async () => {
    const c = bucketClient(alice.key);
    expect((await signed(alice.key, "PUT", "/dfs/marker/")).status).toBe(200);
    const got = await signed(alice.key, "GET", "/dfs/marker/");
    expect([got.status, await got.text(), got.headers.get("content-length")]).toEqual([200, "", "0"]);
    expect((await c.list({ prefix: "marker/" })).contents?.map((o) => [o.key, o.size])).toEqual([["marker/", 0]]);
  });
});

describe("files from the HTTP API", () => {
  test("a file uploaded over HTTP (no MD5) shows under its name, with its Cid as a non-hex ETag", async () => {
    const bytes = randomBytes(5000);
    const entry = await alice.client.upload("dfs", bytes, { name: "from-http.bin" });
    const head = await signed(alice.key, "HEAD", "/dfs/from-http.bin");
    expect(head.status).toBe(200);
    expect(head.headers.get("etag")).toBe(`"${entry.Cid}"`);
    expect(head.headers.get("etag")).not.toMatch(/^"[0-9a-f]{32}"$/);
    expect(head.headers.get("x-stowage-cid")).toBe(entry.Cid);
    expect(Buffer.from(await bucketClient(alice.key).file("from-http.bin").arrayBuffer()).equals(bytes)).toBe(true);
  });
});

describe("never the storage API's JSON on this port", () => {
  test("a request no URL can be made of is answered with an S3 XML error", async () => {
    const { hostname, port } = new URL(s3.url);
    const answer = await new Promise<string>((resolve, reject) => {
      let text = "";
      Bun.connect({
        hostname,
        port: Number(port),
        socket: {
          open: (socket) => void socket.write("GET /dfs HTTP/1.1\r\nHost: bad host^\r\nConnection: close\r\n\r\n"),
          data: (_, chunk) => void (text += chunk.toString()),
          close: () => resolve(text),
          error: (_, err) => reject(err),
        },
      }).catch(reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    expect(answer).toContain("<Code>InvalidRequest</Code>");
  });
});

describe("sub-resources never touch the object's bytes", () => {
  const md5 = (b: Uint8Array) => createHash("md5").update(b).digest("hex");
  /** A fresh object and a check that it reads back byte-exact, under the same name. */
  async function object(key: string) {
    const bytes = randomBytes(40_000);
    await bucketClient(alice.key).write(key, bytes);
    return {
      async intact() {
        const back = await signed(alice.key, "GET", `/dfs/${key}`);
        expect(back.status).toBe(200);
        expect(md5(new Uint8Array(await back.arrayBuffer()))).toBe(md5(bytes));
      },
    };
  }
  const TAGS = '<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>';

  test("PUT ?acl: a canned private ACL is accepted and changes nothing; a public one or an ACL document is NotImplemented", async () => {
    const o = await object("sub/acl.bin");
    expect((await signed(alice.key, "PUT", "/dfs/sub/acl.bin", { query: { acl: "" }, headers: { "x-amz-acl": "private" } })).status).toBe(200);
    await o.intact();
    const open = await signed(alice.key, "PUT", "/dfs/sub/acl.bin", { query: { acl: "" }, headers: { "x-amz-acl": "public-read" } });
    expect([open.status, codeIn(await open.text())]).toEqual([501, "NotImplemented"]);
    const doc = await signed(alice.key, "PUT", "/dfs/sub/acl.bin", { query: { acl: "" }, body: "<AccessControlPolicy><AccessControlList/></AccessControlPolicy>" });
    expect([doc.status, codeIn(await doc.text())]).toEqual([501, "NotImplemented"]);
    await o.intact();
  });

  test("PUT ?tagging, ?legal-hold, ?retention and DELETE ?tagging are NotImplemented; the object stays whole; GET ?tagging is an empty tag set", async () => {
    const o = await object("sub/tags.bin");
    const tags = await signed(alice.key, "GET", "/dfs/sub/tags.bin", { query: { tagging: "" } });
    expect([tags.status, (await tags.text()).replace(/\s+/g, "")]).toEqual([200, '<?xmlversion="1.0"encoding="UTF-8"?><Taggingxmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet></TagSet></Tagging>']);
    const none = await signed(alice.key, "GET", "/dfs/sub/no-such.bin", { query: { tagging: "" } });
    expect([none.status, codeIn(await none.text())]).toEqual([404, "NoSuchKey"]);
    for (const sub of ["tagging", "legal-hold", "retention"]) {
      const put = await signed(alice.key, "PUT", "/dfs/sub/tags.bin", { query: { [sub]: "" }, body: TAGS });
      expect([sub, put.status, codeIn(await put.text())]).toEqual([sub, 501, "NotImplemented"]);
    }
    const del = await signed(alice.key, "DELETE", "/dfs/sub/tags.bin", { query: { tagging: "" } });
    expect([del.status, codeIn(await del.text())]).toEqual([501, "NotImplemented"]);
    await o.intact();
  });

  test("GET ?acl is the owner's full control; ?attributes answers size and ETag; ?torrent is NotImplemented, not the bytes", async () => {
    await object("sub/get.bin");
    const acl = await signed(alice.key, "GET", "/dfs/sub/get.bin", { query: { acl: "" } });
    const aclXml = await acl.text();
    expect(acl.status).toBe(200);
    expect(aclXml).toContain("<AccessControlPolicy");
    expect(aclXml).toContain(`<ID>${alice.client.did}</ID>`);
    expect(aclXml).toContain("<Permission>FULL_CONTROL</Permission>");
    const attrs = await signed(alice.key, "GET", "/dfs/sub/get.bin", { query: { attributes: "" }, headers: { "x-amz-object-attributes": "ObjectSize,ETag,StorageClass" } });
    const attrsXml = await attrs.text();
    expect(attrs.status).toBe(200);
    expect(attrsXml).toContain("<ObjectSize>40000</ObjectSize>");
    expect(attrsXml).toMatch(/<ETag>[0-9a-f]{32}<\/ETag>/);
    const torrent = await signed(alice.key, "GET", "/dfs/sub/get.bin", { query: { torrent: "" } });
    expect([torrent.status, codeIn(await torrent.text())]).toEqual([501, "NotImplemented"]);
    const missing = await signed(alice.key, "GET", "/dfs/sub/none.bin", { query: { acl: "" } });
    expect([missing.status, codeIn(await missing.text())]).toEqual([404, "NoSuchKey"]);
  });

  test("bucket sub-resources: ?acl and ?location answer; ?policy, ?cors, … read as none set and cannot be set; never a listing or BucketAlreadyOwnedByYou", async () => {
    const acl = await signed(alice.key, "GET", "/dfs", { query: { acl: "" } });
    expect([acl.status, (await acl.text()).includes("FULL_CONTROL")]).toEqual([200, true]);
    // A configuration never kept here reads back as S3 answers one never set (tools read them first).
    const none: [string, string][] = [
      ["policy", "NoSuchBucketPolicy"],
      ["cors", "NoSuchCORSConfiguration"],
      ["lifecycle", "NoSuchLifecycleConfiguration"],
      ["tagging", "NoSuchTagSet"],
      ["website", "NoSuchWebsiteConfiguration"],
      ["encryption", "ServerSideEncryptionConfigurationNotFoundError"],
      ["replication", "ReplicationConfigurationNotFoundError"],
      ["object-lock", "ObjectLockConfigurationNotFoundError"],
      ["ownershipControls", "OwnershipControlsNotFoundError"],
      ["publicAccessBlock", "NoSuchPublicAccessBlockConfiguration"],
    ];
    for (const [sub, code] of none) {
      const get = await signed(alice.key, "GET", "/dfs", { query: { [sub]: "" } });
      expect([sub, get.status, codeIn(await get.text())]).toEqual([sub, 404, code]);
      for (const method of ["PUT", "DELETE"]) {
        const set = await signed(alice.key, method, "/dfs", { query: { [sub]: "" }, body: method === "PUT" ? "<x/>" : undefined });
        expect([sub, method, set.status, codeIn(await set.text())]).toEqual([sub, method, 501, "NotImplemented"]);
      }
    }
    // Of a bucket that does not exist: NoSuchBucket, as for any request to it.
    const other = await signed(alice.key, "GET", "/nosuchbucket", { query: { cors: "" } });
    expect([other.status, codeIn(await other.text())]).toEqual([404, "NoSuchBucket"]);
    for (const sub of ["versions", "logging", "notification"]) {
      const get = await signed(alice.key, "GET", "/dfs", { query: { [sub]: "" } });
      expect([sub, get.status, codeIn(await get.text())]).toEqual([sub, 501, "NotImplemented"]);
    }
    const versioning = await signed(alice.key, "PUT", "/dfs", { query: { versioning: "" }, body: "<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>" });
    expect([versioning.status, codeIn(await versioning.text())]).toEqual([501, "NotImplemented"]);
    const unknown = await signed(alice.key, "DELETE", "/nosuchbucket");
    expect([unknown.status, codeIn(await unknown.text())]).toEqual([404, "NoSuchBucket"]);
  });

  test("an unknown sub-resource is refused; an unknown parameter with a value is ignored, as S3 does", async () => {
    const o = await object("sub/unknown.bin");
    const sub = await signed(alice.key, "PUT", "/dfs/sub/unknown.bin", { query: { renameObject: "" }, body: "x" });
    expect([sub.status, codeIn(await sub.text())]).toEqual([501, "NotImplemented"]);
    const named = await signed(alice.key, "GET", "/dfs/sub/unknown.bin", { query: { "x-id": "GetObject", colour: "blue" } });
    expect(named.status).toBe(200);
    await o.intact();
  });

  test("server-side encryption is refused, never stored without it; an SSE-C read is refused", async () => {
    const c = { "x-amz-server-side-encryption-customer-algorithm": "AES256", "x-amz-server-side-encryption-customer-key": Buffer.alloc(32, 7).toString("base64"), "x-amz-server-side-encryption-customer-key-md5": createHash("md5").update(Buffer.alloc(32, 7)).digest("base64") };
    const ssec = await signed(alice.key, "PUT", "/dfs/sub/ssec.bin", { body: "secret", headers: c });
    expect([ssec.status, codeIn(await ssec.text())]).toEqual([501, "NotImplemented"]);
    const sse = await signed(alice.key, "PUT", "/dfs/sub/sse.bin", { body: "secret", headers: { "x-amz-server-side-encryption": "AES256" } });
    expect([sse.status, codeIn(await sse.text())]).toEqual([501, "NotImplemented"]);
    for (const key of ["sub/ssec.bin", "sub/sse.bin"]) expect(await bucketClient(alice.key).exists(key)).toBe(false);
    await object("sub/plain.bin");
    const read = await signed(alice.key, "GET", "/dfs/sub/plain.bin", { headers: c });
    expect([read.status, codeIn(await read.text())]).toEqual([400, "InvalidRequest"]);
  });

  test("an append (x-amz-write-offset-bytes) is NotImplemented and the object stays whole", async () => {
    const o = await object("sub/append.bin");
    const res = await signed(alice.key, "PUT", "/dfs/sub/append.bin", { body: "more", headers: { "x-amz-write-offset-bytes": "40000" } });
    expect([res.status, codeIn(await res.text())]).toEqual([501, "NotImplemented"]);
    await o.intact();
    const fresh = await signed(alice.key, "PUT", "/dfs/sub/append-new.bin", { body: "more", headers: { "x-amz-write-offset-bytes": "0" } });
    expect([fresh.status, codeIn(await fresh.text())]).toEqual([501, "NotImplemented"]);
    expect(await bucketClient(alice.key).exists("sub/append-new.bin")).toBe(false);
  });

  test("versionId other than null is NoSuchVersion; partNumber=1 of a single-part object is the object, 2 is InvalidPartNumber", async () => {
    const o = await object("sub/parts.bin");
    const version = await signed(alice.key, "GET", "/dfs/sub/parts.bin", { query: { versionId: "3HL4kqtJlcpXroDTDmjVBH40Nrjfkd" } });
    expect([version.status, codeIn(await version.text())]).toEqual([404, "NoSuchVersion"]);
    expect((await signed(alice.key, "GET", "/dfs/sub/parts.bin", { query: { versionId: "null" } })).status).toBe(200);
    const one = await signed(alice.key, "GET", "/dfs/sub/parts.bin", { query: { partNumber: "1" } });
    expect([one.status, (await one.arrayBuffer()).byteLength]).toEqual([200, 40_000]);
    const two = await signed(alice.key, "GET", "/dfs/sub/parts.bin", { query: { partNumber: "2" } });
    expect([two.status, codeIn(await two.text())]).toEqual([416, "InvalidPartNumber"]);
    await o.intact();
  });
});

describe("object metadata", () => {
  /** UTF-8 text as the Latin-1 code units of its bytes: how a raw UTF-8 header value travels (fetch sends each code unit as one byte). */
  const rawUtf8 = (s: string) => Buffer.from(s, "utf8").toString("latin1");
  const STANDARD = {
    "content-type": "application/x-custom; charset=utf-8",
    "cache-control": "max-age=3600, public",
    expires: "Thu, 01 Jan 2037 00:00:00 GMT",
    "content-disposition": 'attachment; filename="report.bin"',
    "content-encoding": "gzip",
    "content-language": "de-CH",
  };

  test("PutObject keeps Content-Type, Cache-Control, Expires, Content-Disposition, Content-Encoding, Content-Language and x-amz-meta-*, non-ASCII values RFC 2047-encoded", async () => {
    // Stored gzipped, with Content-Encoding: gzip, it reads back as the text (fetch undoes the encoding).
    const put = await signed(alice.key, "PUT", "/dfs/meta/report.txt", {
      body: Bun.gzipSync("some bytes"),
      headers: { ...STANDARD, "x-amz-meta-mtime": "1700000000.5", "x-amz-meta-author": rawUtf8("Zoë Ñandú"), "x-amz-meta-word": "=?UTF-8?B?w6lsw6hiZQ==?=", "x-amz-meta-empty": "" },
    });
    expect(put.status).toBe(200);
    expect(put.headers.get("x-stowage-cid")).toMatch(/^baf/);
    for (const method of ["HEAD", "GET"]) {
      const res = await signed(alice.key, method, "/dfs/meta/report.txt");
      expect(res.status).toBe(200);
      const got = Object.fromEntries([...Object.keys(STANDARD), "x-amz-meta-mtime", "x-amz-meta-author", "x-amz-meta-word", "x-amz-meta-empty", "x-amz-meta-cid"].map((h) => [h, res.headers.get(h)]));
      expect(got).toEqual({
        ...STANDARD,
        "x-amz-meta-mtime": "1700000000.5",
        "x-amz-meta-author": `=?UTF-8?B?${Buffer.from("Zoë Ñandú").toString("base64")}?=`,
        "x-amz-meta-word": "=?UTF-8?B?w6lsw6hiZQ==?=",
        "x-amz-meta-empty": "",
        // The Cid is the gateway's own header now: user metadata holds only what the user put there.
        "x-amz-meta-cid": null,
      });
      expect(res.headers.get("x-stowage-cid")).toMatch(/^baf/);
      if (method === "GET") expect(await res.text()).toBe("some bytes");
    }
    // Sent again without metadata, the object has none: a PUT replaces it all, as on S3.
    await signed(alice.key, "PUT", "/dfs/meta/report.txt", { body: "other" });
    const bare = await signed(alice.key, "HEAD", "/dfs/meta/report.txt");
    expect([...bare.headers.keys()].filter((h) => h.startsWith("x-amz-meta-") || h === "cache-control" || h === "content-language")).toEqual([]);
    expect(bare.headers.get("content-type")).toBe("text/plain;charset=utf-8"); // from the name, as before
  });

  test("aws-chunked is how the body was framed, not the object's encoding: it is not stored", async () => {
    await signed(alice.key, "PUT", "/dfs/meta/plain.bin", { body: "x", headers: { "content-encoding": "aws-chunked" } });
    expect((await signed(alice.key, "HEAD", "/dfs/meta/plain.bin")).headers.get("content-encoding")).toBeNull();
  });

  test("more than 2 KB of user metadata is MetadataTooLarge (400) and stores nothing; 2 KB exactly is kept", async () => {
    // Name (after x-amz-meta-) and value bytes: 4 + 2044 = 2048.
    const fits = await signed(alice.key, "PUT", "/dfs/meta/big-meta.txt", { body: "b", headers: { "x-amz-meta-note": "n".repeat(2044) } });
    expect(fits.status).toBe(200);
    const over = await signed(alice.key, "PUT", "/dfs/meta/too-big.txt", { body: "b", headers: { "x-amz-meta-note": "n".repeat(2045) } });
    expect([over.status, codeIn(await over.text())]).toEqual([400, "MetadataTooLarge"]);
    expect((await signed(alice.key, "HEAD", "/dfs/meta/too-big.txt")).status).toBe(404);
    const create = await signed(alice.key, "POST", "/dfs/meta/too-big.txt", { query: { uploads: "" }, headers: { "x-amz-meta-a": "é".repeat(1024) } });
    expect([create.status, codeIn(await create.text())]).toEqual([400, "MetadataTooLarge"]);
  });

  test("GET's response-* parameters answer in place of the stored headers; a presigned link with them too", async () => {
    const c = bucketClient(alice.key);
    await signed(alice.key, "PUT", "/dfs/meta/photo.jpg", { body: "jpeg bytes", headers: { "content-type": "image/jpeg", "cache-control": "no-cache" } });
    const overrides = { "response-content-type": "application/octet-stream", "response-content-disposition": 'attachment; filename="holiday.jpg"', "response-cache-control": "max-age=60", "response-content-language": "fr", "response-expires": "Fri, 02 Jan 2037 00:00:00 GMT", "response-content-encoding": "identity" };
    const res = await signed(alice.key, "GET", "/dfs/meta/photo.jpg", { query: overrides });
    expect(Object.fromEntries(["content-type", "content-disposition", "cache-control", "content-language", "expires", "content-encoding"].map((h) => [h, res.headers.get(h)]))).toEqual({
      "content-type": "application/octet-stream",
      "content-disposition": 'attachment; filename="holiday.jpg"',
      "cache-control": "max-age=60",
      "content-language": "fr",
      expires: "Fri, 02 Jan 2037 00:00:00 GMT",
      "content-encoding": "identity",
    });
    expect(await res.text()).toBe("jpeg bytes");
    // The stored ones are untouched.
    const head = await signed(alice.key, "HEAD", "/dfs/meta/photo.jpg");
    expect([head.headers.get("content-type"), head.headers.get("cache-control"), head.headers.get("content-disposition")]).toEqual(["image/jpeg", "no-cache", null]);
    const url = c.file("meta/photo.jpg").presign({ expiresIn: 60, contentDisposition: 'attachment; filename="saved.jpg"' });
    const opened = await fetch(url);
    expect([opened.status, opened.headers.get("content-disposition")]).toEqual([200, 'attachment; filename="saved.jpg"']);
    await opened.arrayBuffer();
  });

  test("bytes a browser would run go as an attachment whatever type or disposition is stored or asked for", async () => {
    await signed(alice.key, "PUT", "/dfs/meta/page.bin", { body: "<script>alert(1)</script>", headers: { "content-type": "text/html", "content-disposition": "inline" } });
    const stored = await signed(alice.key, "GET", "/dfs/meta/page.bin");
    expect([stored.headers.get("content-type"), stored.headers.get("content-disposition"), stored.headers.get("content-security-policy")]).toEqual(["text/html", 'attachment; filename="page.bin"; filename*=UTF-8\'\'page.bin', "sandbox; default-src 'none'"]);
    await stored.arrayBuffer();
    await signed(alice.key, "PUT", "/dfs/meta/note.txt", { body: "<script>alert(1)</script>", headers: { "content-type": "text/plain" } });
    const asked = await signed(alice.key, "GET", "/dfs/meta/note.txt", { query: { "response-content-type": "text/html", "response-content-disposition": "inline" } });
    expect([asked.headers.get("content-type"), asked.headers.get("content-disposition")]).toEqual(["text/html", 'attachment; filename="note.txt"; filename*=UTF-8\'\'note.txt']);
    await asked.arrayBuffer();
    const script = await signed(alice.key, "GET", "/dfs/meta/note.txt", { query: { "response-content-type": "text/javascript" } });
    expect(script.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    await script.arrayBuffer();
  });

  test("multipart: the metadata given at CreateMultipartUpload is the completed object's", async () => {
    const created = await signed(alice.key, "POST", "/dfs/meta/multi.bin", { query: { uploads: "" }, headers: { "content-type": "video/mp4", "x-amz-meta-mtime": "1600000000", "cache-control": "private" } });
    const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(await created.text())?.[1] as string;
    const bytes = randomBytes(6 * MiB);
    const tags: string[] = [];
    for (const [i, part] of [bytes.subarray(0, 5 * MiB), bytes.subarray(5 * MiB)].entries()) {
      // A part's own Content-Type says nothing about the object's.
      const res = await signed(alice.key, "PUT", "/dfs/meta/multi.bin", { query: { partNumber: String(i + 1), uploadId }, body: part, headers: { "content-type": "application/octet-stream" } });
      tags.push(res.headers.get("etag") as string);
    }
    const done = await signed(alice.key, "POST", "/dfs/meta/multi.bin", { query: { uploadId }, body: `<CompleteMultipartUpload>${tags.map((t, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${t}</ETag></Part>`).join("")}</CompleteMultipartUpload>` });
    expect(await done.text()).toContain("<CompleteMultipartUploadResult");
    const head = await signed(alice.key, "HEAD", "/dfs/meta/multi.bin");
    expect([head.headers.get("content-type"), head.headers.get("x-amz-meta-mtime"), head.headers.get("cache-control"), head.headers.get("content-length")]).toEqual(["video/mp4", "1600000000", "private", String(6 * MiB)]);
  });
});

describe("copies", () => {
  const path = (k: string) => `/dfs/copies/${k}`;
  async function source(k: string, headers: Record<string, string> = { "content-type": "text/csv", "x-amz-meta-origin": "lab" }) {
    const res = await signed(alice.key, "PUT", path(k), { body: `rows of ${k}`, headers });
    expect(res.status).toBe(200);
    return (await signed(alice.key, "HEAD", path(k))).headers;
  }
  const copy = (to: string, from: string, headers: Record<string, string> = {}) => signed(alice.key, "PUT", path(to), { headers: { "x-amz-copy-source": path(from), ...headers } });
  const metaOf = async (k: string) => {
    const h = (await signed(alice.key, "HEAD", path(k))).headers;
    return { type: h.get("content-type"), origin: h.get("x-amz-meta-origin"), stage: h.get("x-amz-meta-stage"), cache: h.get("cache-control") };
  };

  test("a copy source's versionId: null is the object; any other is NoSuchVersion, for CopyObject and UploadPartCopy, and nothing is written", async () => {
    await source("versioned.csv");
    await source("dest.csv", { "content-type": "text/plain" });
    const stale = await signed(alice.key, "PUT", path("dest.csv"), { headers: { "x-amz-copy-source": `${path("versioned.csv")}?versionId=abc` } });
    expect([stale.status, codeIn(await stale.text())]).toEqual([404, "NoSuchVersion"]);
    expect(await (await signed(alice.key, "GET", path("dest.csv"))).text()).toBe("rows of dest.csv");
    const current = await signed(alice.key, "PUT", path("dest.csv"), { headers: { "x-amz-copy-source": `dfs/copies/versioned.csv?versionId=null` } });
    expect(current.status).toBe(200);
    expect(await (await signed(alice.key, "GET", path("dest.csv"))).text()).toBe("rows of versioned.csv");

    const created = await signed(alice.key, "POST", path("parts.csv"), { query: { uploads: "" } });
    const id = /<UploadId>([^<]+)<\/UploadId>/.exec(await created.text())?.[1] as string;
    const part = (version: string) => signed(alice.key, "PUT", path("parts.csv"), { query: { partNumber: "1", uploadId: id }, headers: { "x-amz-copy-source": `dfs/copies/versioned.csv?versionId=${version}` } });
    const refused = await part("3HL4kqtJlcpXroDTDmjVBH40Nrjfkd");
    expect([refused.status, codeIn(await refused.text())]).toEqual([404, "NoSuchVersion"]);
    expect(await (await signed(alice.key, "GET", path("parts.csv"), { query: { uploadId: id } })).text()).not.toContain("<Part>");
    expect((await part("null")).status).toBe(200);
    expect((await signed(alice.key, "DELETE", path("parts.csv"), { query: { uploadId: id } })).status).toBe(204);
  });

  test("MetadataDirective COPY (the default) keeps the source's metadata; REPLACE takes the request's", async () => {
    await source("a.csv");
    expect((await copy("kept.csv", "a.csv", { "content-type": "image/png", "x-amz-meta-stage": "ignored" })).status).toBe(200);
    expect(await metaOf("kept.csv")).toEqual({ type: "text/csv", origin: "lab", stage: null, cache: null });
    expect((await copy("kept2.csv", "a.csv", { "x-amz-metadata-directive": "COPY" })).status).toBe(200);
    expect(await metaOf("kept2.csv")).toEqual({ type: "text/csv", origin: "lab", stage: null, cache: null });
    expect((await copy("new.csv", "a.csv", { "x-amz-metadata-directive": "REPLACE", "content-type": "application/json", "x-amz-meta-stage": "clean", "cache-control": "no-store" })).status).toBe(200);
    expect(await metaOf("new.csv")).toEqual({ type: "application/json", origin: null, stage: "clean", cache: "no-store" });
    expect(await (await signed(alice.key, "GET", path("new.csv"))).text()).toBe("rows of a.csv");
    const bad = await copy("x.csv", "a.csv", { "x-amz-metadata-directive": "MERGE" });
    expect([bad.status, codeIn(await bad.text())]).toEqual([400, "InvalidArgument"]);
  });

  test("a copy onto itself must change something (InvalidRequest, as S3); with REPLACE it changes the type in place", async () => {
    const before = await source("self.csv");
    const same = await copy("self.csv", "self.csv");
    expect([same.status, codeIn(await same.text())]).toEqual([400, "InvalidRequest"]);
    expect(await metaOf("self.csv")).toEqual({ type: "text/csv", origin: "lab", stage: null, cache: null });
    const retyped = await copy("self.csv", "self.csv", { "x-amz-metadata-directive": "REPLACE", "content-type": "text/plain" });
    expect(retyped.status).toBe(200);
    expect(await metaOf("self.csv")).toEqual({ type: "text/plain", origin: null, stage: null, cache: null });
    const after = (await signed(alice.key, "HEAD", path("self.csv"))).headers;
    expect([after.get("etag"), after.get("x-stowage-cid")]).toEqual([before.get("etag"), before.get("x-stowage-cid")]);
    expect(await (await signed(alice.key, "GET", path("self.csv"))).text()).toBe("rows of self.csv");
  });

  test("x-amz-copy-source-if-match, -if-none-match, -if-modified-since, -if-unmodified-since", async () => {
    const h = await source("cond.csv");
    const etag = h.get("etag") as string;
    const lastModified = Date.parse(h.get("last-modified") as string);
    const day = 24 * 3600_000;
    const date = (ms: number) => new Date(ms).toUTCString();
    const cases: [Record<string, string>, number][] = [
      [{ "x-amz-copy-source-if-match": etag }, 200],
      [{ "x-amz-copy-source-if-match": '"0123"' }, 412],
      [{ "x-amz-copy-source-if-none-match": etag }, 412],
      [{ "x-amz-copy-source-if-none-match": '"0123"' }, 200],
      [{ "x-amz-copy-source-if-modified-since": date(lastModified - day) }, 200],
      [{ "x-amz-copy-source-if-modified-since": date(lastModified + day) }, 412],
      [{ "x-amz-copy-source-if-modified-since": date(lastModified) }, 412],
      [{ "x-amz-copy-source-if-unmodified-since": date(lastModified + day) }, 200],
      [{ "x-amz-copy-source-if-unmodified-since": date(lastModified) }, 200],
      [{ "x-amz-copy-source-if-unmodified-since": date(lastModified - day) }, 412],
      // As S3: an If-Match that holds makes If-Unmodified-Since moot; an If-None-Match that fails decides.
      [{ "x-amz-copy-source-if-match": etag, "x-amz-copy-source-if-unmodified-since": date(lastModified - day) }, 200],
      [{ "x-amz-copy-source-if-none-match": etag, "x-amz-copy-source-if-modified-since": date(lastModified - day) }, 412],
    ];
    for (const [i, [headers, status]] of cases.entries()) {
      const res = await copy(`cond-${i}.csv`, "cond.csv", headers);
      const body = await res.text();
      expect({ headers, status: res.status, code: codeIn(body) ?? null }).toEqual({ headers, status, code: status === 412 ? "PreconditionFailed" : null });
      expect((await signed(alice.key, "HEAD", path(`cond-${i}.csv`))).status).toBe(status === 200 ? 200 : 404);
    }
  });

  test("UploadPartCopy: parts copied by range answer CopyPartResult; the object is the source's bytes; no traffic is charged for them", async () => {
    const bytes = randomBytes(11 * MiB + 5);
    await bucketClient(alice.key).write("copies/big.bin", bytes);
    const created = await signed(alice.key, "POST", path("big-copy.bin"), { query: { uploads: "" }, headers: { "content-type": "application/x-big" } });
    const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(await created.text())?.[1] as string;
    const ranges = [[0, 5 * MiB - 1], [5 * MiB, 10 * MiB - 1], [10 * MiB, bytes.byteLength - 1]] as const;
    const tags: string[] = [];
    const before = moved.in;
    for (const [i, [first, last]] of ranges.entries()) {
      const res = await signed(alice.key, "PUT", path("big-copy.bin"), { query: { partNumber: String(i + 1), uploadId }, headers: { "x-amz-copy-source": "dfs/copies/big.bin", "x-amz-copy-source-range": `bytes=${first}-${last}` } });
      const xml = await res.text();
      expect(res.status).toBe(200);
      expect(xml).toContain("<CopyPartResult");
      expect(xml).toMatch(/<LastModified>\d{4}-\d\d-\d\dT[\d:.]+Z<\/LastModified>/);
      const etag = /<ETag>&quot;([0-9a-f]{32})&quot;<\/ETag>/.exec(xml)?.[1];
      expect(etag).toBe(createHash("md5").update(bytes.subarray(first, last + 1)).digest("hex"));
      tags.push(`"${etag}"`);
    }
    const done = await signed(alice.key, "POST", path("big-copy.bin"), { query: { uploadId }, body: `<CompleteMultipartUpload>${tags.map((t, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${t}</ETag></Part>`).join("")}</CompleteMultipartUpload>` });
    expect(await done.text()).toContain("<CompleteMultipartUploadResult");
    expect(moved.in).toBe(before); // copied, not sent: no byte came over the wire
    const back = await signed(alice.key, "GET", path("big-copy.bin"));
    expect(back.headers.get("content-type")).toBe("application/x-big");
    expect(Buffer.from(await back.arrayBuffer()).equals(bytes)).toBe(true);
    // A whole-object part copy (no range), and the range errors S3 answers.
    const again = await signed(alice.key, "POST", path("small-copy.bin"), { query: { uploads: "" } });
    const id2 = /<UploadId>([^<]+)<\/UploadId>/.exec(await again.text())?.[1] as string;
    for (const [range, code] of [["bytes=0-", "InvalidArgument"], [`bytes=10-${bytes.byteLength}`, "InvalidArgument"], ["bytes=5-4", "InvalidArgument"]] as const) {
      const res = await signed(alice.key, "PUT", path("small-copy.bin"), { query: { partNumber: "1", uploadId: id2 }, headers: { "x-amz-copy-source": "dfs/copies/big.bin", "x-amz-copy-source-range": range } });
      expect([range, res.status, codeIn(await res.text())]).toEqual([range, 400, code]);
    }
    const whole = await signed(alice.key, "PUT", path("small-copy.bin"), { query: { partNumber: "1", uploadId: id2 }, headers: { "x-amz-copy-source": "dfs/copies/big.bin" } });
    expect(await whole.text()).toContain(createHash("md5").update(bytes).digest("hex"));
    const failed = await signed(alice.key, "PUT", path("small-copy.bin"), { query: { partNumber: "2", uploadId: id2 }, headers: { "x-amz-copy-source": "dfs/copies/big.bin", "x-amz-copy-source-if-match": '"nope"' } });
    expect([failed.status, codeIn(await failed.text())]).toEqual([412, "PreconditionFailed"]);
    const parts = await (await signed(alice.key, "GET", path("small-copy.bin"), { query: { uploadId: id2 } })).text();
    expect(parts.match(/<Part>/g)?.length).toBe(1);
    expect((await signed(alice.key, "DELETE", path("small-copy.bin"), { query: { uploadId: id2 } })).status).toBe(204);
  });
});

describe("multipart parts are metered as they arrive", () => {
  /** CreateMultipartUpload by hand: the UploadId. */
  async function createUpload(key: Minted, path: string): Promise<Response> {
    return signed(key, "POST", path, { query: { uploads: "" } });
  }
  const uploadIdOf = async (res: Response) => /<UploadId>([^<]+)<\/UploadId>/.exec(await res.text())?.[1] as string;

  /** An UploadPart whose `size` random bytes are made only as the server reads them (unsigned payload). */
  async function streamedPart(key: Minted, path: string, uploadId: string, partNumber: number, size: number): Promise<{ status: number; code?: string }> {
    const url = new URL(path, s3.url);
    const signer = new SignatureV4({ service: "s3", region: "us-east-1", credentials: key, sha256: Sha256, uriEscapePath: false });
    const query = { partNumber: String(partNumber), uploadId };
    const req = await signer.sign({ method: "PUT", protocol: "http:", hostname: url.hostname, port: Number(url.port), path: url.pathname, query, headers: { host: url.host, "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "content-length": String(size) } });
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent >= size) return c.close();
        const n = Math.min(256 * 1024, size - sent);
        sent += n;
        c.enqueue(randomBytes(n));
      },
    });
    try {
      const res = await fetch(`${s3.url}${url.pathname}?${new URLSearchParams(query)}`, { method: "PUT", headers: req.headers as Record<string, string>, body });
      return { status: res.status, code: codeIn(await res.text()) };
    } catch {
      return { status: 0 }; // the server answered and closed while the client was still sending
    }
  }

  /** Bytes of blob-store objects that were not there at the start, sampled every 20 ms until stopped: the peak. */
  function sampleBlobs() {
    const store = blobStoreOf(gw.dataDir);
    let peak = 0;
    let running = true;
    const known = new Set<string>();
    const sizes = new Map<string, number>();
    const ready = (async () => {
      for await (const k of store.list("")) known.add(k);
    })();
    const loop = (async () => {
      await ready;
      while (running) {
        let total = 0;
        for await (const k of store.list("")) {
          if (known.has(k)) continue;
          let n = sizes.get(k);
          if (n === undefined) {
            n = (await store.stat(k)) ?? 0;
            sizes.set(k, n);
          }
          total += n;
        }
        peak = Math.max(peak, total);
        await Bun.sleep(20);
      }
    })();
    return {
      ready,
      async stop() {
        running = false;
        await loop;
        return peak;
      },
    };
  }

  test("a 1 MB account's 200 MB part, and eight at once, are refused with no more than a few MiB past the 1 MB ever stored", async () => {
    const poor = await account({ space: 1_000_000 });
    const limit = 1_000_000 + 4 * MiB;
    for (const parallel of [1, 8]) {
      const ids = await Promise.all(Array.from({ length: parallel }, async (_, i) => uploadIdOf(await createUpload(poor.key, `/dfs/attack-${parallel}-${i}.bin`))));
      const sampler = sampleBlobs();
      await sampler.ready;
      const before = intoDfs.bytes;
      const answers = await Promise.all(ids.map((id, i) => streamedPart(poor.key, `/dfs/attack-${parallel}-${i}.bin`, id, 1, 200 * 1_000_000)));
      const peak = await sampler.stop();
      const taken = intoDfs.bytes - before;
      console.log(`${parallel} part(s) of 200 MB against a 1 MB pool: ${(taken / MiB).toFixed(2)} MiB reached the back-end, ${(peak / MiB).toFixed(2)} MiB at peak in the blob store`);
      for (const a of answers) if (a.status !== 0) expect([a.status, a.code]).toEqual([403, "QuotaExceeded"]);
      // Each part gets at most what was free when it started (and the read in flight) before a
      // check that counts the others' holds refuses it; none of it is ever stored.
      expect(taken).toBeLessThan(parallel * (1_000_000 + 256 * 1024));
      expect(peak).toBeLessThan(limit);
      for (const [i, id] of ids.entries()) {
        const parts = await signed(poor.key, "GET", `/dfs/attack-${parallel}-${i}.bin`, { query: { uploadId: id } });
        expect(await parts.text()).not.toContain("<Part>");
      }
    }
    // Nothing of it is held: the whole pool is free again.
    expect(await meter?.record(poor.account.address, `did:ethr:0x${gw.config.chainId.toString(16)}:${poor.account.address}`, "space")).toMatchObject({ SizeByte: 1_000_000 });
  }, 120_000);

  test("an account with no space is refused a part before its first byte reaches the back-end", async () => {
    const none = await account({ space: 0 });
    const id = await uploadIdOf(await createUpload(none.key, "/dfs/nothing.bin"));
    const before = intoDfs.bytes;
    const part = await signed(none.key, "PUT", "/dfs/nothing.bin", { query: { partNumber: "1", uploadId: id }, body: randomBytes(64 * 1024) });
    expect([part.status, codeIn(await part.text())]).toEqual([403, "QuotaExceeded"]);
    expect(intoDfs.bytes - before).toBe(0);
  });

  test(`the ${MAX_OPEN_UPLOADS + 1}th open multipart upload of an account is refused; aborting one makes room`, async () => {
    const busy = await account({ space: MiB });
    const ids: string[] = [];
    for (let i = 0; i < MAX_OPEN_UPLOADS; i += 50) {
      const batch = await Promise.all(Array.from({ length: Math.min(50, MAX_OPEN_UPLOADS - i) }, async (_, j) => {
        const res = await createUpload(busy.key, `/dfs/many/${i + j}.bin`);
        expect(res.status).toBe(200);
        return uploadIdOf(res);
      }));
      ids.push(...batch);
    }
    const refused = await createUpload(busy.key, "/dfs/many/one-more.bin");
    expect(refused.status).toBe(400);
    const text = await refused.text();
    expect(codeIn(text)).toBe("InvalidRequest");
    expect(text).toContain("complete or abort");
    // Another account is not affected.
    expect((await createUpload(alice.key, "/dfs/many/alice.bin")).status).toBe(200);
    expect((await signed(busy.key, "DELETE", "/dfs/many/0.bin", { query: { uploadId: ids[0] as string } })).status).toBe(204);
    expect((await createUpload(busy.key, "/dfs/many/one-more.bin")).status).toBe(200);
  }, 120_000);

  test("an account's open parts are capped across its uploads: a new part past the cap is refused, a part sent again is not", async () => {
    const capped = await startS3Api({ hostname: "127.0.0.1", port: 0, maxBody: gw.config.maxBody, log: gw.log, sql: gw.database.sql, chainId: gw.config.chainId, direct, findAccessKey: (id) => findAccessKey({ sql: gw.database.sql, secretsKey: gw.secrets.secretsKey, resolver: gw.resolver, chainId: gw.config.chainId }, id), multipartLimits: { parts: 3 } });
    try {
      const who = await account({ space: MiB });
      const at = (path: string, o: Parameters<typeof signed>[3] = {}) => signedAt(capped.url, who.key, o.query && "uploads" in o.query ? "POST" : "PUT", path, o);
      const a = await uploadIdOf(await at("/dfs/a.bin", { query: { uploads: "" } }));
      const b = await uploadIdOf(await at("/dfs/b.bin", { query: { uploads: "" } }));
      for (const [path, id, n] of [["/dfs/a.bin", a, "1"], ["/dfs/a.bin", a, "2"], ["/dfs/b.bin", b, "1"]] as const) expect((await at(path, { query: { partNumber: n, uploadId: id }, body: "x" })).status).toBe(200);
      const over = await at("/dfs/b.bin", { query: { partNumber: "2", uploadId: b }, body: "y" });
      expect([over.status, codeIn(await over.text())]).toEqual([400, "InvalidRequest"]);
      expect((await at("/dfs/b.bin", { query: { partNumber: "1", uploadId: b }, body: "z" })).status).toBe(200);
      const parts = await signedAt(capped.url, who.key, "GET", "/dfs/b.bin", { query: { uploadId: b } });
      expect((await parts.text()).match(/<PartNumber>/g)?.length).toBe(1);
    } finally {
      await capped.stop();
    }
  });
});

describe("every write path meters alike", () => {
  type Account = Awaited<ReturnType<typeof account>>;
  const didOf = (a: Account) => `did:ethr:0x${gw.config.chainId.toString(16)}:${a.account.address}`;
  const left = async (a: Account, pool: "space" | "traffic") => (await meter?.record(a.account.address, didOf(a), pool))?.SizeByte ?? -1;
  const N = MiB + 123;

  /** Each way a file arrives: whether it was refused for quota (in its API's words), or stored. */
  const paths: [string, (a: Account, name: string, bytes: Uint8Array) => Promise<"quota" | "stored">][] = [
    ["HTTP upload to dfs", (a, name, bytes) => a.client.upload("dfs", bytes, { name }).then(() => "stored" as const, (e: { status?: number; body?: { Code?: string } }) => (e.status === 402 && e.body?.Code === "PaymentRequired" ? "quota" : Promise.reject(e)))],
    ["HTTP upload to ipfs", (a, name, bytes) => a.client.upload("ipfs", bytes, { name }).then(() => "stored" as const, (e: { status?: number; body?: { Code?: string } }) => (e.status === 402 && e.body?.Code === "PaymentRequired" ? "quota" : Promise.reject(e)))],
    ["S3 PutObject", async (a, name, bytes) => s3Outcome(await signed(a.key, "PUT", `/dfs/${name}`, { body: bytes }))],
    [
      "S3 multipart",
      async (a, name, bytes) => {
        const created = await signed(a.key, "POST", `/dfs/${name}`, { query: { uploads: "" } });
        const id = /<UploadId>([^<]+)<\/UploadId>/.exec(await created.text())?.[1] as string;
        const part = await signed(a.key, "PUT", `/dfs/${name}`, { query: { partNumber: "1", uploadId: id }, body: bytes });
        if (part.status !== 200) return s3Outcome(part);
        const etag = part.headers.get("etag") as string;
        const done = await signed(a.key, "POST", `/dfs/${name}`, { query: { uploadId: id }, body: `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>${etag}</ETag></Part></CompleteMultipartUpload>` });
        const text = await done.text();
        return codeIn(text) === "QuotaExceeded" ? "quota" : text.includes("<CompleteMultipartUploadResult") ? "stored" : Promise.reject(new Error(text));
      },
    ],
    [
      "S3 CopyObject (from ipfs: new content)",
      // The source is the account's already (stored before the pools are read): the copy needs room for its bytes once more.
      async (a, name) => s3Outcome(await signed(a.key, "PUT", `/dfs/${name}`, { headers: { "x-amz-copy-source": "/ipfs/source.bin" } })),
    ],
    [
      "S3 UploadPartCopy (from ipfs: new content)",
      async (a, name) => {
        const created = await signed(a.key, "POST", `/dfs/${name}`, { query: { uploads: "" } });
        const id = /<UploadId>([^<]+)<\/UploadId>/.exec(await created.text())?.[1] as string;
        const part = await signed(a.key, "PUT", `/dfs/${name}`, { query: { partNumber: "1", uploadId: id }, headers: { "x-amz-copy-source": "/ipfs/source.bin" } });
        if (part.status !== 200) return s3Outcome(part);
        const etag = /<ETag>([^<]+)<\/ETag>/.exec(await part.text())?.[1]?.replace(/&quot;/g, '"') as string;
        const done = await signed(a.key, "POST", `/dfs/${name}`, { query: { uploadId: id }, body: `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>${etag}</ETag></Part></CompleteMultipartUpload>` });
        const text = await done.text();
        return codeIn(text) === "QuotaExceeded" ? "quota" : text.includes("<CompleteMultipartUploadResult") ? "stored" : Promise.reject(new Error(text));
      },
    ],
  ];

  async function s3Outcome(res: Response): Promise<"quota" | "stored"> {
    if (res.status === 200) return "stored";
    const code = codeIn(await res.text());
    if (res.status === 403 && code === "QuotaExceeded") return "quota";
    throw new Error(`answered ${res.status} ${code}`);
  }

  test.each(paths)("%s: refused for the same over-quota file, keeping nothing; the same file fits and counts its size (and its traffic)", async (label, write) => {
    const copy = label.includes("Copy");
    const bytes = randomBytes(N);
    // Free space half the file (past the source a copy has stored already).
    const tight = await account({ space: (copy ? N : 0) + Math.floor(N / 2) });
    if (copy) await tight.client.upload("ipfs", bytes, { name: "source.bin" });
    const before = await left(tight, "space");
    expect(await write(tight, "over.bin", bytes)).toBe("quota");
    expect(await left(tight, "space")).toBe(before);
    expect((await signed(tight.key, "HEAD", "/dfs/over.bin")).status).toBe(404);
    // Room for it: it is stored, and its size counts against the space pool, the same on every path.
    const roomy = await account({ space: (copy ? N : 0) + 4 * N });
    if (copy) await roomy.client.upload("ipfs", bytes, { name: "source.bin" });
    const [room, traffic] = [await left(roomy, "space"), await left(roomy, "traffic")];
    expect(await write(roomy, "fits.bin", bytes)).toBe("stored");
    expect(room - (await left(roomy, "space"))).toBe(N);
    // Bytes that crossed the wire count as traffic once; a server-side copy moved none.
    expect(traffic - (await left(roomy, "traffic"))).toBe(copy ? 0 : N);
  }, 60_000);
});
