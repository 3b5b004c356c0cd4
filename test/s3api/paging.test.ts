/**
 * How the S3 API's listings page, as S3's own clients page them: ListParts (`max-parts`,
 * `part-number-marker`), ListMultipartUploads (`max-uploads`, `key-marker` and
 * `upload-id-marker`, `prefix`, `delimiter`), ListBuckets (`prefix`, `max-buckets`,
 * `continuation-token`), and ListObjectsV2's continuation tokens (only the ones it issued).
 * Runs on both databases and on the S3 blob pass.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { codeIn, s3Harness } from "./harness.ts";

const h = await s3Harness();
let alice: Awaited<ReturnType<typeof h.account>>;
beforeAll(async () => {
  alice = await h.account();
});

const all = (xml: string, tag: string) => [...xml.matchAll(new RegExp(`<${tag}>([^<]*)</${tag}>`, "g"))].map((m) => m[1] as string);
const one = (xml: string, tag: string) => all(xml, tag)[0];
const get = async (path: string, query: Record<string, string>) => {
  const res = await h.signed(alice.key, "GET", path, { query });
  return { status: res.status, xml: await res.text() };
};

async function create(key: string): Promise<string> {
  const res = await h.signed(alice.key, "POST", `/dfs/${key}`, { query: { uploads: "" } });
  expect(res.status).toBe(200);
  return one(await res.text(), "UploadId") as string;
}

describe("ListParts", () => {
  let id: string;
  const path = "/dfs/pages/parts.bin";
  beforeAll(async () => {
    id = await create("pages/parts.bin");
    for (const n of [1, 2, 3, 5, 8]) expect((await h.signed(alice.key, "PUT", path, { query: { uploadId: id, partNumber: String(n) }, body: `part ${n}` })).status).toBe(200);
  });

  test("max-parts and part-number-marker page the parts; NextPartNumberMarker resumes", async () => {
    const first = await get(path, { uploadId: id, "max-parts": "2" });
    expect(first.status).toBe(200);
    expect(all(first.xml, "PartNumber")).toEqual(["1", "2"]);
    expect([one(first.xml, "MaxParts"), one(first.xml, "IsTruncated"), one(first.xml, "NextPartNumberMarker")]).toEqual(["2", "true", "2"]);

    const second = await get(path, { uploadId: id, "max-parts": "2", "part-number-marker": "2" });
    expect(all(second.xml, "PartNumber")).toEqual(["3", "5"]);
    expect([one(second.xml, "PartNumberMarker"), one(second.xml, "IsTruncated"), one(second.xml, "NextPartNumberMarker")]).toEqual(["2", "true", "5"]);

    const last = await get(path, { uploadId: id, "max-parts": "2", "part-number-marker": "5" });
    expect(all(last.xml, "PartNumber")).toEqual(["8"]);
    expect([one(last.xml, "IsTruncated"), one(last.xml, "NextPartNumberMarker")]).toEqual(["false", "8"]);
  });

  test("the default page is 1000 parts, and a larger max-parts is capped there", async () => {
    const plain = await get(path, { uploadId: id });
    expect([one(plain.xml, "MaxParts"), one(plain.xml, "IsTruncated"), all(plain.xml, "PartNumber").length]).toEqual(["1000", "false", 5]);
    expect(one((await get(path, { uploadId: id, "max-parts": "5000" })).xml, "MaxParts")).toBe("1000");
    // A marker past every part lists nothing.
    expect(all((await get(path, { uploadId: id, "part-number-marker": "8" })).xml, "PartNumber")).toEqual([]);
  });

  test("a max-parts or part-number-marker that is not a whole number is InvalidArgument", async () => {
    for (const query of [{ "max-parts": "-1" }, { "max-parts": "two" }, { "part-number-marker": "1.5" }, { "part-number-marker": "-3" }] as Record<string, string>[]) {
      const res = await get(path, { uploadId: id, ...query });
      expect([query, res.status, codeIn(res.xml)]).toEqual([query, 400, "InvalidArgument"]);
    }
  });
});

describe("ListMultipartUploads", () => {
  // Two uploads of one key, so upload-id-marker has something to page within.
  const keys = ["up/a.bin", "up/b.bin", "up/b.bin", "up/c/1.bin", "up/c/2.bin", "up/d.bin", "other.bin"];
  const ids = new Map<string, string[]>();
  beforeAll(async () => {
    for (const k of keys) ids.set(k, [...(ids.get(k) ?? []), await create(k)]);
  });
  const uploads = (query: Record<string, string>) => get("/dfs", { uploads: "", ...query });

  test("max-uploads pages by key, then upload id: key-marker and upload-id-marker resume where the last page ended", async () => {
    const seen: [string, string][] = [];
    const markers: Record<string, string> = {};
    for (let page = 0; page < 10; page++) {
      const { status, xml } = await uploads({ prefix: "up/", "max-uploads": "2", ...markers });
      expect(status).toBe(200);
      expect(one(xml, "MaxUploads")).toBe("2");
      const got = all(xml, "Key").map((k, i): [string, string] => [k, all(xml, "UploadId")[i] as string]);
      expect(got.length).toBeLessThanOrEqual(2);
      seen.push(...got);
      if (one(xml, "IsTruncated") !== "true") break;
      markers["key-marker"] = one(xml, "NextKeyMarker") as string;
      markers["upload-id-marker"] = one(xml, "NextUploadIdMarker") as string;
    }
    const b = [...(ids.get("up/b.bin") as string[])].sort();
    const expected = ["up/a.bin", "up/b.bin", "up/b.bin", "up/c/1.bin", "up/c/2.bin", "up/d.bin"];
    expect(seen.map(([k]) => k)).toEqual(expected);
    expect(seen.filter(([k]) => k === "up/b.bin").map(([, i]) => i).sort()).toEqual(b);
  });

  test("key-marker alone starts after every upload of that key; prefix limits the keys", async () => {
    const { xml } = await uploads({ prefix: "up/", "key-marker": "up/b.bin" });
    expect(all(xml, "Key")).toEqual(["up/c/1.bin", "up/c/2.bin", "up/d.bin"]);
    expect(one(xml, "KeyMarker")).toBe("up/b.bin");
  });

  test("a delimiter folds keys into CommonPrefixes, each counted once across pages", async () => {
    const whole = await uploads({ prefix: "up/", delimiter: "/" });
    expect(all(whole.xml, "Key")).toEqual(["up/a.bin", "up/b.bin", "up/b.bin", "up/d.bin"]);
    expect(all(whole.xml, "Prefix").filter((p) => p !== "up/")).toEqual(["up/c/"]);
    // A page that ends on the folded prefix: the next starts past all of its keys.
    const first = await uploads({ prefix: "up/", delimiter: "/", "max-uploads": "4" });
    expect([all(first.xml, "Key").length, all(first.xml, "Prefix").filter((p) => p !== "up/")]).toEqual([3, ["up/c/"]]);
    expect([one(first.xml, "IsTruncated"), one(first.xml, "NextKeyMarker")]).toEqual(["true", "up/c/"]);
    const next = await uploads({ prefix: "up/", delimiter: "/", "max-uploads": "4", "key-marker": "up/c/", "upload-id-marker": one(first.xml, "NextUploadIdMarker") ?? "" });
    expect([all(next.xml, "Key"), one(next.xml, "IsTruncated")]).toEqual([["up/d.bin"], "false"]);
  });

  test("a max-uploads that is not a whole number is InvalidArgument; a larger one is capped at 1000", async () => {
    const bad = await uploads({ "max-uploads": "x" });
    expect([bad.status, codeIn(bad.xml)]).toEqual([400, "InvalidArgument"]);
    const big = await uploads({ "max-uploads": "5000", prefix: "up/" });
    expect([one(big.xml, "MaxUploads"), all(big.xml, "Key").length]).toEqual(["1000", 6]);
  });
});

describe("ListObjectsV2 continuation tokens", () => {
  beforeAll(async () => {
    for (const k of ["tok/a.txt", "tok/b.txt", "tok/c.txt"]) expect((await h.signed(alice.key, "PUT", `/dfs/${k}`, { body: k })).status).toBe(200);
  });
  const list = (query: Record<string, string>) => get("/dfs", { "list-type": "2", prefix: "tok/", ...query });

  test("a token the gateway issued resumes the listing; it is not the key itself", async () => {
    const first = await list({ "max-keys": "2" });
    const token = one(first.xml, "NextContinuationToken") as string;
    expect(all(first.xml, "Key")).toEqual(["tok/a.txt", "tok/b.txt"]);
    expect(token).not.toContain("tok/");
    const next = await list({ "max-keys": "2", "continuation-token": token });
    expect([next.status, all(next.xml, "Key"), one(next.xml, "ContinuationToken")]).toEqual([200, ["tok/c.txt"], token]);
  });

  test("a token it did not issue is 400 InvalidArgument, a key name included", async () => {
    for (const token of ["tok/a.txt", "garbage", "c3Rvd2FnZTpidWNrZXRzOmRmcw", "%%%"]) {
      const res = await list({ "continuation-token": token });
      expect([token, res.status, codeIn(res.xml)]).toEqual([token, 400, "InvalidArgument"]);
      expect(res.xml).toContain("The continuation token provided is incorrect");
    }
  });
});

describe("ListBuckets", () => {
  const buckets = (query: Record<string, string>) => get("/", query);

  test("prefix lists only the buckets that start with it, and is given back", async () => {
    const { status, xml } = await buckets({ prefix: "ip" });
    expect([status, all(xml, "Name"), one(xml, "Prefix")]).toEqual([200, ["ipfs"], "ip"]);
    expect(all((await buckets({ prefix: "nothing" })).xml, "Name")).toEqual([]);
  });

  test("max-buckets pages them with a continuation token", async () => {
    const first = await buckets({ "max-buckets": "1" });
    expect(all(first.xml, "Name")).toEqual(["dfs"]);
    const token = one(first.xml, "ContinuationToken") as string;
    expect(token).toBeDefined();
    const next = await buckets({ "max-buckets": "1", "continuation-token": token });
    expect([all(next.xml, "Name"), one(next.xml, "ContinuationToken")]).toEqual([["ipfs"], undefined]);
    expect(one((await buckets({ "max-buckets": "2" })).xml, "ContinuationToken")).toBeUndefined();
  });

  test("a max-buckets out of 1 to 10000, or a token not issued here, is InvalidArgument", async () => {
    for (const query of [{ "max-buckets": "0" }, { "max-buckets": "10001" }, { "max-buckets": "x" }, { "continuation-token": "dfs" }] as Record<string, string>[]) {
      const res = await buckets(query);
      expect([query, res.status, codeIn(res.xml)]).toEqual([query, 400, "InvalidArgument"]);
    }
  });
});
