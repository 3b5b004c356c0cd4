/**
 * The S3 API through the compiled binary, driven by the real clients, unchanged: Debian's aws-cli
 * (`mb` refused, `ls`, `cp` up and down including a 40 MiB multipart upload, `sync` of a folder
 * tree, `rm` on dfs, a `presign`ed URL fetched with curl), rclone (`copy`, `check`, `cat --offset`)
 * and Bun's S3Client; object metadata and copies (aws-cli `cp` between S3 paths in parts, rclone's
 * mtime, boto3's copy_object and upload_part_copy); a wrong secret, another account's key, an account over quota and a revoked
 * key, each as the client reports it. Keys are minted through POST /v2/keys (the SDK), quota
 * granted with `stowage admin grant`.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { S3Client } from "bun";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, readdirSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { keysClient } from "../../src/sdk/keys.ts";
import { connectStorage } from "../../src/sdk/storage.ts";
import { runBinary, startBinary, type RunningBinary } from "../support/binary.ts";
import { freePort } from "../support/procs.ts";
import { awsCli, boto3Python, boto3Script, ensureS3Clients, rclone, resultOf, type Credentials } from "../support/s3-clients.ts";
import { tempDir } from "../support/tmp.ts";
import { until } from "../support/until.ts";

const MiB = 1024 * 1024;
const work = tempDir("s3-clients");
const dataDir = join(work, "data");
let server: RunningBinary;
let endpoint: string;

await ensureS3Clients();
// Each aws-cli run starts a Python interpreter (≈ 1 s): the tests run several.
setDefaultTimeout(120_000);

beforeAll(async () => {
  const port = freePort();
  server = await startBinary(["serve", "--port", "0", "--host", "127.0.0.1", "--data-dir", dataDir], { STOWAGE_S3_API_PORT: String(port) });
  endpoint = /stowage S3 API listening on (http:\/\/\S+)/.exec(server.output())?.[1] as string;
  expect(endpoint).toBe(`http://127.0.0.1:${port}`);
});
afterAll(async () => {
  await server?.stop();
});

/** A new account with free quota granted by the operator's command line, and a key. */
async function account(o: { space?: string; traffic?: string } = {}) {
  const store = await connectStorage({ baseUrl: server.url, account: privateKeyToAccount(generatePrivateKey()) });
  await store.login();
  for (const [kind, bytes] of [["--space", o.space ?? "512MiB"], ["--traffic", o.traffic ?? "2GiB"]] as const) {
    const grant = await runBinary(["admin", "grant", "--did", store.did, kind, bytes, "--data-dir", dataDir]);
    expect(grant.code).toBe(0);
  }
  // The gateway reads quota records at most 1 s old.
  await until("the grants", async () => [(await store.space()).SizeByte, (await store.traffic()).SizeByte], (v) => v.every((n) => n > 0), 5000, 100);
  const keys = keysClient({ baseUrl: server.url, store });
  const key: Credentials = await keys.create();
  return { store, keys, key };
}

const md5 = (b: Uint8Array) => createHash("md5").update(b).digest("hex");

/** Every file under `dir`, by relative path, with its bytes' MD5. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    out[relative(dir, path)] = md5(readFileSync(path));
  }
  return out;
}

let alice: Awaited<ReturnType<typeof account>>;
let aws: ReturnType<typeof awsCli>;
beforeAll(async () => {
  alice = await account();
  aws = awsCli(endpoint, alice.key);
});

describe("aws-cli", () => {
  test("ls shows the two buckets; mb is refused, clearly", async () => {
    const buckets = await aws(["s3", "ls"]);
    expect(buckets.code).toBe(0);
    expect(buckets.stdout).toMatch(/ dfs\n.* ipfs\n$/s);
    const other = await aws(["s3", "mb", "s3://newbucket"]);
    expect(other.code).not.toBe(0);
    expect(other.stderr).toContain("AccessDenied");
    const dfs = await aws(["s3", "mb", "s3://dfs"]);
    expect(dfs.code).not.toBe(0);
    expect(dfs.stderr).toContain("BucketAlreadyOwnedByYou");
  });

  test("cp up and down, ls; a 40 MiB cp goes multipart and reads back byte-exact", async () => {
    const small = randomBytes(300_000);
    const big = randomBytes(40 * MiB);
    writeFileSync(join(work, "small.bin"), small);
    writeFileSync(join(work, "big.bin"), big);
    expect((await aws(["s3", "cp", join(work, "small.bin"), "s3://dfs/docs/small.bin"])).code).toBe(0);
    const up = await aws(["s3", "cp", join(work, "big.bin"), "s3://dfs/docs/big.bin"]);
    expect(up.stderr).toBe("");
    expect(up.code).toBe(0);
    const ls = await aws(["s3", "ls", "s3://dfs/docs/"]);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toMatch(/\s300000 small\.bin/);
    expect(ls.stdout).toMatch(new RegExp(`\\s${40 * MiB} big\\.bin`));
    const head = await aws(["s3api", "head-object", "--bucket", "dfs", "--key", "docs/big.bin"]);
    expect(JSON.parse(head.stdout).ETag).toMatch(/^"[0-9a-f]{32}-5"$/); // 8 MiB parts
    // No user metadata was given: none shows (the Cid is the gateway's own x-stowage-cid header).
    expect(JSON.parse(head.stdout).Metadata).toEqual({});
    expect((await aws(["s3", "cp", "s3://dfs/docs/big.bin", join(work, "big.back")])).code).toBe(0);
    expect(md5(readFileSync(join(work, "big.back")))).toBe(md5(big));
    expect((await aws(["s3", "cp", "s3://dfs/docs/small.bin", join(work, "small.back")])).code).toBe(0);
    expect(md5(readFileSync(join(work, "small.back")))).toBe(md5(small));
  }, 120_000);

  test("sync of a folder tree up, back down, and again (nothing to do)", async () => {
    const src = join(work, "tree");
    for (const f of ["a.txt", "sub/b.txt", "sub/deeper/c.bin", "sub/deeper/d e.txt", "z/ü.txt"]) {
      mkdirSync(join(src, f, ".."), { recursive: true });
      writeFileSync(join(src, f), randomBytes(1000 + f.length));
      // Written a minute ago: S3 listings (ours and AWS's) give LastModified in whole seconds, and
      // aws-cli uploads again a file whose mtime is later than that — one made in the same second
      // as its upload would be sent again by any S3, a race this test is not about.
      const past = new Date(Date.now() - 60_000);
      utimesSync(join(src, f), past, past);
    }
    const up = await aws(["s3", "sync", src, "s3://dfs/tree/"]);
    expect(up.code).toBe(0);
    const down = join(work, "tree-back");
    expect((await aws(["s3", "sync", "s3://dfs/tree/", down])).code).toBe(0);
    expect(tree(down)).toEqual(tree(src));
    const again = await aws(["s3", "sync", src, "s3://dfs/tree/"]);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe("");
  }, 60_000);

  test("rm on dfs; on ipfs it is refused", async () => {
    writeFileSync(join(work, "gone.txt"), "soon gone");
    expect((await aws(["s3", "cp", join(work, "gone.txt"), "s3://dfs/gone.txt"])).code).toBe(0);
    expect((await aws(["s3", "rm", "s3://dfs/gone.txt"])).code).toBe(0);
    expect((await aws(["s3", "ls", "s3://dfs/gone.txt"])).stdout).toBe("");
    expect((await aws(["s3", "cp", join(work, "gone.txt"), "s3://ipfs/kept.txt"])).code).toBe(0);
    const rm = await aws(["s3", "rm", "s3://ipfs/kept.txt"]);
    expect(rm.code).not.toBe(0);
    expect(rm.stderr).toContain("MethodNotAllowed");
    // --recursive deletes through DeleteObjects.
    writeFileSync(join(work, "r1.txt"), "r1");
    for (const k of ["gone/r1.txt", "gone/deeper/r2.txt"]) expect((await aws(["s3", "cp", join(work, "r1.txt"), `s3://dfs/${k}`])).code).toBe(0);
    const recursive = await aws(["s3", "rm", "--recursive", "s3://dfs/gone/"]);
    expect(recursive.code).toBe(0);
    expect(recursive.stdout).toContain("delete: s3://dfs/gone/deeper/r2.txt");
    expect((await aws(["s3", "ls", "--recursive", "s3://dfs/gone/"])).stdout).toBe("");
  }, 60_000);

  test("a presigned URL, fetched with curl", async () => {
    writeFileSync(join(work, "pre.txt"), "presigned bytes\n");
    expect((await aws(["s3", "cp", join(work, "pre.txt"), "s3://dfs/pre.txt"])).code).toBe(0);
    const url = (await aws(["s3", "presign", "s3://dfs/pre.txt", "--expires-in", "300"])).stdout.trim();
    const curl = Bun.spawn(["curl", "-sS", "-f", url], { stdout: "pipe", stderr: "pipe" });
    expect(await new Response(curl.stdout).text()).toBe("presigned bytes\n");
    expect(await curl.exited).toBe(0);
  });

  test("s3api put-object-acl --acl private and get-object-acl work; put-object-tagging and an open ACL are refused; the bytes stay", async () => {
    const bytes = randomBytes(50_000);
    writeFileSync(join(work, "acl.bin"), bytes);
    expect((await aws(["s3", "cp", join(work, "acl.bin"), "s3://dfs/acl.bin"])).code).toBe(0);
    expect((await aws(["s3api", "put-object-acl", "--bucket", "dfs", "--key", "acl.bin", "--acl", "private"])).code).toBe(0);
    const acl = await aws(["s3api", "get-object-acl", "--bucket", "dfs", "--key", "acl.bin"]);
    expect(acl.code).toBe(0);
    expect(JSON.parse(acl.stdout).Grants).toEqual([{ Grantee: { ID: alice.store.did, DisplayName: alice.store.did, Type: "CanonicalUser" }, Permission: "FULL_CONTROL" }]);
    const open = await aws(["s3api", "put-object-acl", "--bucket", "dfs", "--key", "acl.bin", "--acl", "public-read"]);
    expect(open.code).not.toBe(0);
    expect(open.stderr).toContain("NotImplemented");
    const tags = await aws(["s3api", "put-object-tagging", "--bucket", "dfs", "--key", "acl.bin", "--tagging", "TagSet=[{Key=k,Value=v}]"]);
    expect(tags.code).not.toBe(0);
    expect(tags.stderr).toContain("NotImplemented");
    expect((await aws(["s3", "cp", "s3://dfs/acl.bin", join(work, "acl.back")])).code).toBe(0);
    expect(md5(readFileSync(join(work, "acl.back")))).toBe(md5(bytes));
  });

  test("a wrong secret → SignatureDoesNotMatch", async () => {
    const wrong = awsCli(endpoint, { ...alice.key, secretAccessKey: `${alice.key.secretAccessKey}x` });
    const res = await wrong(["s3", "ls", "s3://dfs/"]);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain("SignatureDoesNotMatch");
  });

  test("another account's key sees none of the first's files", async () => {
    const bob = await account();
    const res = await awsCli(endpoint, bob.key)(["s3", "ls", "--recursive", "s3://dfs/"]);
    expect(res.code).toBe(0);
    expect(res.stdout).toBe("");
    const get = await awsCli(endpoint, bob.key)(["s3", "cp", "s3://dfs/docs/small.bin", join(work, "stolen.bin")]);
    expect(get.code).not.toBe(0);
  });

  test("over quota → an S3 error, nothing stored", async () => {
    const poor = await account({ space: "1MiB" });
    const cli = awsCli(endpoint, poor.key);
    writeFileSync(join(work, "two.bin"), randomBytes(2 * MiB));
    const res = await cli(["s3", "cp", join(work, "two.bin"), "s3://dfs/two.bin"]);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain("QuotaExceeded");
    expect((await cli(["s3", "ls", "--recursive", "s3://dfs/"])).stdout).toBe("");
    expect((await poor.store.list("dfs")).Object).toEqual([]);
  });

  test("a revoked key is refused", async () => {
    const k = await alice.keys.create();
    const cli = awsCli(endpoint, k);
    expect((await cli(["s3", "ls", "s3://dfs/"])).code).toBe(0);
    await alice.keys.revoke(k.accessKeyId);
    const res = await cli(["s3", "ls", "s3://dfs/"]);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain("InvalidAccessKeyId");
  });
});

describe("rclone", () => {
  test("copy, check, cat --offset", async () => {
    const rc = rclone(endpoint, alice.key);
    const src = join(work, "rc");
    mkdirSync(join(src, "inner"), { recursive: true });
    writeFileSync(join(src, "one.txt"), "0123456789abcdefghij");
    writeFileSync(join(src, "inner", "two.bin"), randomBytes(3 * MiB + 5));
    const copy = await rc(["copy", src, "stow:dfs/rc"]);
    expect(copy.stderr).not.toContain("ERROR");
    expect(copy.code).toBe(0);
    const check = await rc(["check", src, "stow:dfs/rc"]);
    expect(check.code).toBe(0);
    expect(check.stderr).toContain("0 differences found");
    expect(check.stderr).toMatch(/2 matching files/);
    const cat = await rc(["cat", "--offset", "5", "--count", "7", "stow:dfs/rc/one.txt"]);
    expect(cat.code).toBe(0);
    expect(cat.stdout).toBe("56789ab");
  }, 60_000);
});

describe("Bun's S3Client", () => {
  test("put, get, list", async () => {
    const c = new S3Client({ ...alice.key, endpoint, bucket: "dfs", region: "us-east-1" });
    const bytes = randomBytes(2 * MiB + 3);
    await c.write("bun/obj.bin", bytes);
    expect(md5(new Uint8Array(await c.file("bun/obj.bin").arrayBuffer()))).toBe(md5(bytes));
    expect((await c.list({ prefix: "bun/" })).contents?.map((o) => o.key)).toEqual(["bun/obj.bin"]);
  });
});

describe("metadata and copies through the clients", () => {
  test("aws-cli: cp keeps --content-type, --cache-control and --metadata; s3api copy-object REPLACE retypes in place", async () => {
    writeFileSync(join(work, "meta.dat"), "metadata bytes");
    const up = await aws(["s3", "cp", join(work, "meta.dat"), "s3://dfs/meta/meta.dat", "--content-type", "text/csv", "--cache-control", "max-age=600", "--content-language", "en", "--metadata", "origin=lab,mtime=1700000000"]);
    expect(up.code).toBe(0);
    const head = JSON.parse((await aws(["s3api", "head-object", "--bucket", "dfs", "--key", "meta/meta.dat"])).stdout);
    expect({ type: head.ContentType, cache: head.CacheControl, lang: head.ContentLanguage, meta: head.Metadata }).toEqual({ type: "text/csv", cache: "max-age=600", lang: "en", meta: { origin: "lab", mtime: "1700000000" } });
    const self = await aws(["s3api", "copy-object", "--bucket", "dfs", "--key", "meta/meta.dat", "--copy-source", "dfs/meta/meta.dat"]);
    expect(self.code).not.toBe(0);
    expect(self.stderr).toContain("InvalidRequest");
    const retype = await aws(["s3api", "copy-object", "--bucket", "dfs", "--key", "meta/meta.dat", "--copy-source", "dfs/meta/meta.dat", "--metadata-directive", "REPLACE", "--content-type", "application/json", "--metadata", "stage=clean"]);
    expect(retype.code).toBe(0);
    const after = JSON.parse((await aws(["s3api", "head-object", "--bucket", "dfs", "--key", "meta/meta.dat"])).stdout);
    expect({ type: after.ContentType, meta: after.Metadata, etag: after.ETag }).toEqual({ type: "application/json", meta: { stage: "clean" }, etag: head.ETag });
  });

  test("aws-cli: cp s3://dfs/a s3://dfs/b of a 20 MiB object copies it in parts (UploadPartCopy), byte-exact, metadata kept", async () => {
    const big = randomBytes(20 * MiB);
    writeFileSync(join(work, "twenty.bin"), big);
    expect((await aws(["s3", "cp", join(work, "twenty.bin"), "s3://dfs/copy/a.bin", "--content-type", "application/x-twenty", "--metadata", "origin=lab"])).code).toBe(0);
    const cp = await aws(["s3", "cp", "s3://dfs/copy/a.bin", "s3://dfs/copy/b.bin"]);
    expect(cp.stderr).toBe("");
    expect(cp.code).toBe(0);
    const head = JSON.parse((await aws(["s3api", "head-object", "--bucket", "dfs", "--key", "copy/b.bin"])).stdout);
    expect({ etag: head.ETag, size: head.ContentLength, type: head.ContentType, meta: head.Metadata }).toEqual({ etag: expect.stringMatching(/^"[0-9a-f]{32}-3"$/), size: 20 * MiB, type: "application/x-twenty", meta: { origin: "lab" } });
    expect((await aws(["s3", "cp", "s3://dfs/copy/b.bin", join(work, "twenty.back")])).code).toBe(0);
    expect(md5(readFileSync(join(work, "twenty.back")))).toBe(md5(big));
    // mv across buckets: the same copy, then the source goes.
    const mv = await aws(["s3", "mv", "s3://dfs/copy/b.bin", "s3://ipfs/moved.bin"]);
    expect(mv.code).toBe(0);
    expect((await aws(["s3", "ls", "s3://dfs/copy/b.bin"])).stdout).toBe("");
    expect(JSON.parse((await aws(["s3api", "head-object", "--bucket", "ipfs", "--key", "moved.bin"])).stdout).ContentLength).toBe(20 * MiB);
  }, 180_000);

  test("rclone: a file's mtime round-trips through x-amz-meta-mtime; a server-side copy keeps it", async () => {
    const rc = rclone(endpoint, alice.key);
    const src = join(work, "rc-mtime");
    mkdirSync(src, { recursive: true });
    writeFileSync(join(src, "dated.txt"), "from the past");
    const past = new Date("2021-03-04T05:06:07.250Z");
    utimesSync(join(src, "dated.txt"), past, past);
    expect((await rc(["copy", src, "stow:dfs/rc-mtime"])).code).toBe(0);
    const lsl = await rc(["lsl", "stow:dfs/rc-mtime"]);
    expect(lsl.stdout).toContain("2021-03-04 05:06:07.250000000 dated.txt");
    expect((await rc(["copyto", "stow:dfs/rc-mtime/dated.txt", "stow:dfs/rc-mtime/again.txt"])).code).toBe(0);
    expect((await rc(["lsl", "stow:dfs/rc-mtime/again.txt"])).stdout).toContain("2021-03-04 05:06:07.250000000 again.txt");
    const down = join(work, "rc-mtime-back");
    expect((await rc(["copy", "stow:dfs/rc-mtime", down])).code).toBe(0);
    expect(statSync(join(down, "dated.txt")).mtime.toISOString()).toBe(past.toISOString());
  }, 60_000);

  test("boto3: metadata (non-ASCII too, RFC 2047-encoded) round-trips; copy_object COPY and REPLACE; upload_part_copy by range", async () => {
    const py = boto3Script(await boto3Python(), endpoint, alice.key);
    const res = await py(`
# botocore sends only ASCII metadata: non-ASCII text goes as an RFC 2047 word, as S3 answers it.
s3.put_object(Bucket="dfs", Key="boto/a.txt", Body=b"x" * 6_000_000, ContentType="text/markdown", ContentDisposition='attachment; filename="a.md"', Metadata={"city": "=?UTF-8?Q?Z=C3=BCrich?=", "plain": "yes"})
h = s3.head_object(Bucket="dfs", Key="boto/a.txt")
s3.copy_object(Bucket="dfs", Key="boto/b.txt", CopySource={"Bucket": "dfs", "Key": "boto/a.txt"})
b = s3.head_object(Bucket="dfs", Key="boto/b.txt")
s3.copy_object(Bucket="dfs", Key="boto/c.txt", CopySource={"Bucket": "dfs", "Key": "boto/a.txt"}, MetadataDirective="REPLACE", ContentType="text/plain", Metadata={"k": "v"})
c = s3.head_object(Bucket="dfs", Key="boto/c.txt")
try:
    s3.copy_object(Bucket="dfs", Key="boto/d.txt", CopySource={"Bucket": "dfs", "Key": "boto/a.txt"}, CopySourceIfNoneMatch=h["ETag"])
    refused = None
except s3.exceptions.ClientError as e:
    refused = e.response["Error"]["Code"]
up = s3.create_multipart_upload(Bucket="dfs", Key="boto/parts.txt", ContentType="text/x-parts")
p1 = s3.upload_part_copy(Bucket="dfs", Key="boto/parts.txt", UploadId=up["UploadId"], PartNumber=1, CopySource={"Bucket": "dfs", "Key": "boto/a.txt"}, CopySourceRange="bytes=0-5242879")
p2 = s3.upload_part_copy(Bucket="dfs", Key="boto/parts.txt", UploadId=up["UploadId"], PartNumber=2, CopySource={"Bucket": "dfs", "Key": "boto/a.txt"}, CopySourceRange="bytes=5242880-5999999")
s3.complete_multipart_upload(Bucket="dfs", Key="boto/parts.txt", UploadId=up["UploadId"], MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p1["CopyPartResult"]["ETag"]}, {"PartNumber": 2, "ETag": p2["CopyPartResult"]["ETag"]}]})
p = s3.head_object(Bucket="dfs", Key="boto/parts.txt")
g = s3.get_object(Bucket="dfs", Key="boto/a.txt", ResponseContentType="application/octet-stream", ResponseContentDisposition="inline")
out({"a": [h["ContentType"], h["ContentDisposition"], h["Metadata"]], "b": [b["ContentType"], b["Metadata"]], "c": [c["ContentType"], c["Metadata"]], "refused": refused,
     "parts": [p["ContentType"], p["ContentLength"], p["ETag"]], "get": [g["ContentType"], g["ContentDisposition"], len(g["Body"].read())]})
`);
    expect(res.stderr).toBe("");
    const zurich = `=?UTF-8?B?${Buffer.from("Zürich").toString("base64")}?=`;
    expect(resultOf(res)).toEqual({
      a: ["text/markdown", 'attachment; filename="a.md"', { city: zurich, plain: "yes" }],
      b: ["text/markdown", { city: zurich, plain: "yes" }],
      c: ["text/plain", { k: "v" }],
      refused: "PreconditionFailed",
      parts: ["text/x-parts", 6_000_000, expect.stringMatching(/^"[0-9a-f]{32}-2"$/)],
      get: ["application/octet-stream", "inline", 6_000_000],
    });
  }, 60_000);

  test("Bun's S3Client: type and Content-Disposition written are what stat and a read see", async () => {
    const c = new S3Client({ ...alice.key, endpoint, bucket: "dfs", region: "us-east-1" });
    await c.write("bun/typed.dat", "typed", { type: "application/x-typed", contentDisposition: 'attachment; filename="t.dat"' });
    expect((await c.file("bun/typed.dat").stat()).type).toBe("application/x-typed");
    const res = await fetch(c.file("bun/typed.dat").presign({ expiresIn: 60 }));
    expect([res.headers.get("content-type"), res.headers.get("content-disposition"), await res.text()]).toEqual(["application/x-typed", 'attachment; filename="t.dat"', "typed"]);
  });
});

describe("boto3", () => {
  // One script per test: boto3's own checks (a GET's checksum validated against its bytes, a
  // multipart transfer's parts and their CRCs) raise, and the script prints what it saw as JSON.
  let py: ReturnType<typeof boto3Script>;
  beforeAll(async () => {
    py = boto3Script(await boto3Python(), endpoint, alice.key);
  });
  const json = async (script: string) => {
    const out = await py(script, work);
    expect(out.stderr).toBe("");
    expect(out.code).toBe(0);
    return JSON.parse(out.stdout);
  };

  test("put_object with its default checksum, head and get with ChecksumMode: the CRC comes back and boto3 validates the bytes", async () => {
    const r = await json(`
import zlib, base64
body = b"boto3 bytes " * 10000
put = s3.put_object(Bucket="dfs", Key="boto/one.bin", Body=body, ChecksumAlgorithm="CRC32")
head = s3.head_object(Bucket="dfs", Key="boto/one.bin", ChecksumMode="ENABLED")
got = s3.get_object(Bucket="dfs", Key="boto/one.bin", ChecksumMode="ENABLED")
data = got["Body"].read()
crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
print(json.dumps({"put": put.get("ChecksumCRC32"), "head": head.get("ChecksumCRC32"), "type": head["ResponseMetadata"]["HTTPHeaders"].get("x-amz-checksum-type"), "get": got.get("ChecksumCRC32"), "same": data == body, "crc": crc}))
`);
    expect(r).toEqual({ put: r.crc, head: r.crc, type: "FULL_OBJECT", get: r.crc, same: true, crc: r.crc });
  });

  test("upload_file of 20 MiB goes multipart with CRC32 parts, downloads byte-exact; get_object PartNumber=2 is the second part", async () => {
    writeFileSync(join(work, "boto-big.bin"), randomBytes(20 * MiB));
    const r = await json(`
from boto3.s3.transfer import TransferConfig
cfg = TransferConfig(multipart_threshold=8 * 1024 * 1024, multipart_chunksize=8 * 1024 * 1024)
s3.upload_file("boto-big.bin", "dfs", "boto/big.bin", Config=cfg, ExtraArgs={"ChecksumAlgorithm": "CRC32"})
s3.download_file("dfs", "boto/big.bin", "boto-big.back", Config=cfg)
head = s3.head_object(Bucket="dfs", Key="boto/big.bin", ChecksumMode="ENABLED")
part = s3.get_object(Bucket="dfs", Key="boto/big.bin", PartNumber=2)
data = open("boto-big.bin", "rb").read()
print(json.dumps({"same": open("boto-big.back", "rb").read() == data, "etag": head["ETag"], "crc": head.get("ChecksumCRC32"), "type": head["ResponseMetadata"]["HTTPHeaders"].get("x-amz-checksum-type"), "parts": part.get("PartsCount"), "part": part["Body"].read() == data[8 * 1024 * 1024:16 * 1024 * 1024]}))
`);
    expect(r.same).toBe(true);
    expect(r.etag).toMatch(/^"[0-9a-f]{32}-3"$/);
    expect(r.crc).toMatch(/-3$/);
    expect(r.type).toBe("COMPOSITE");
    expect([r.parts, r.part]).toEqual([3, true]);
  }, 120_000);

  test("conditional writes and reads: IfNoneMatch='*' once, then PreconditionFailed; IfMatch; IfModifiedSince answers 304", async () => {
    const r = await json(`
# As headers (boto3 before 1.35 has no IfNoneMatch/IfMatch parameters on put_object).
extra = {}
def add_headers(request, **kw):
    for k, v in extra.items():
        request.headers[k] = v
s3.meta.events.register("before-sign.s3.PutObject", add_headers)
def code(f, headers={}):
    extra.clear()
    extra.update(headers)
    try:
        f()
        return "ok"
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"]
    finally:
        extra.clear()
put = lambda body: lambda: s3.put_object(Bucket="dfs", Key="boto/lock", Body=body)
first = code(put(b"mine"), {"If-None-Match": "*"})
second = code(put(b"yours"), {"If-None-Match": "*"})
etag = s3.head_object(Bucket="dfs", Key="boto/lock")["ETag"]
swap = code(put(b"next"), {"If-Match": etag})
stale = code(put(b"late"), {"If-Match": etag})
modified = s3.head_object(Bucket="dfs", Key="boto/lock")["LastModified"]
cached = code(lambda: s3.get_object(Bucket="dfs", Key="boto/lock", IfModifiedSince=modified))
body = s3.get_object(Bucket="dfs", Key="boto/lock")["Body"].read().decode()
print(json.dumps([first, second, swap, stale, cached, body]))
`);
    expect(r).toEqual(["ok", "PreconditionFailed", "ok", "PreconditionFailed", "304", "next"]);
  });
});
