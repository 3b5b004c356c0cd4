/**
 * The S3 operations on buckets and objects (D18) over the storage service's direct entry
 * (src/storage/direct.ts): buckets are the back-ends `dfs` and `ipfs`, each showing the key's own
 * account's files; an object key is a file name. Each operation reads its request's S3 parameters
 * and answers S3's response shape; storing, reading, quota and deleting are the storage service's.
 */
import type { FileRow } from "../storage/files.ts";
import type { DirectStorage, Stored } from "../storage/direct.ts";
import type { BackendKind } from "../storage/backend.ts";
import { parseRange } from "../http/range.ts";
import { userContentHeaders } from "../http/user-content.ts";
import type { Did } from "../identity/did.ts";
import type { Payload } from "./auth.ts";
import { contentMd5, storedChecksum, upperName, type Algorithm } from "./checksums.ts";
import { copySourceCondition, deleteCondition, readCondition, writeCondition, type DeleteConditions } from "./conditions.ts";
import { partList, partRange } from "./part-sizes.ts";
import { folding, foldedPage, nameEncoder, PAGE_MAX, pageMarker, pageSize, pastPrefix } from "./listing.ts";
import { s3Error, S3Error, toS3Error } from "./errors.ts";
import { metadataDirective } from "./copy.ts";
import { headerValue, metadataHeaders, metadataOf, readMetadata, responseOverrides, storedMetadata, type Metadata } from "./metadata.ts";
import { issueToken, readToken } from "./tokens.ts";
import { parseDelete, xmlResponse, type Node } from "./xml.ts";

/** Object keys are file names: `/` allowed, no empty, `.` or `..` segment, no control characters, ≤ 1024 bytes. */
export function checkKey(key: string): void {
  if (Buffer.byteLength(key) > 1024) throw s3Error("KeyTooLongError", "Your key is too long: at most 1024 bytes");
  if (key === "" || /[\u0000-\u001f\u007f]/.test(key)) throw s3Error("InvalidArgument", "Object keys are file names: no control characters, not empty");
  if (key.split("/").some((s) => s === "." || s === "..")) throw s3Error("InvalidArgument", "Object keys are file names: no '.' or '..' segments");
}

/** The ETag a file shows: its MD5 (or multipart tag), or — for a file stored without one — its Cid, which is not hex, so no client takes it for an MD5. */
export const etagOf = (row: FileRow) => `"${row.etag ?? row.cid}"`;

const httpDate = (ms: number) => new Date(ms).toUTCString();
const isoDate = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, ".000Z");

/** The gateway's own header naming an object's Cid (user metadata, `x-amz-meta-*`, is the client's alone). */
export const CID_HEADER = "x-stowage-cid";

/**
 * An object's headers: its stored metadata (metadata.ts), with `overrides` (GET's `response-*`)
 * in place of what they name. A type never stored follows from the name, as for a file uploaded
 * over HTTP.
 */
function objectHeaders(row: FileRow, overrides: Metadata = {}): Record<string, string> {
  const { "content-type": type, "content-disposition": disposition, ...rest } = { ...readMetadata(row.metadata), ...overrides };
  return {
    etag: etagOf(row),
    "last-modified": httpDate(row.modTime),
    ...metadataHeaders(rest),
    // Type, nosniff, the sandbox, and an attachment for a type a browser would render or run (a
    // presigned URL opens in a browser), whatever disposition was stored or asked for: what
    // every answer of user bytes carries.
    ...userContentHeaders({
      name: row.name.slice(row.name.lastIndexOf("/") + 1),
      type: type ? headerValue(type) : undefined,
      disposition: disposition === undefined ? undefined : headerValue(disposition),
      attachment: "active",
    }),
    "accept-ranges": "bytes",
    [CID_HEADER]: row.cid,
  };
}

/** How many parts a file was uploaded in: N of a multipart ETag `<md5>-N`, else 1. */
const partsOf = (row: FileRow) => Number(/-(\d+)$/.exec(row.etag ?? "")?.[1] ?? 1);

/** GetObjectAttributes' ObjectParts of a multipart object: its count, then a page of its parts when they were recorded. */
function objectParts(row: FileRow, algorithm: Algorithm | undefined, paging: { maxParts: string | null; marker: string | null }): [string, Node][] {
  const count = row.parts ? partRange(row.parts, 0).count : partsOf(row);
  if (!row.parts) return [["PartsCount", count]];
  const maxParts = pageSize(paging.maxParts, "x-amz-max-parts");
  const marker = pageMarker(paging.marker, "x-amz-part-number-marker");
  const page = maxParts === 0 ? [] : partList(row.parts, marker + 1, marker + maxParts);
  const truncated = marker + page.length < count;
  const next = page.at(-1)?.partNumber ?? marker;
  return [
    ["PartNumberMarker", marker],
    ["NextPartNumberMarker", next],
    ["MaxParts", maxParts],
    ["IsTruncated", truncated],
    ...page.map((p): [string, Node] => ["Part", [["PartNumber", p.partNumber], ["Size", p.size], ...(algorithm && p.checksum ? [[`Checksum${upperName(algorithm)}`, p.checksum] as [string, Node]] : [])]]),
    ["PartsCount", count],
  ];
}

/**
 * GET/HEAD ?partNumber=: part `n`'s byte range (inclusive), its checksum when the object has one,
 * and the object's part count. An object of one part is its own part 1 (an object put whole: its
 * checksum is the part's); a multipart object's parts are as its row records them (one stored
 * without that record answers NotImplemented rather than a wrong range).
 */
function partOf(row: FileRow, n: number): { start: number; end: number; count: number; checksum?: string } {
  const count = partsOf(row);
  if (count === 1) {
    if (n !== 1) throw s3Error("InvalidPartNumber", "The requested partnumber is not satisfiable", { PartNumberRequested: String(n), ActualPartCount: "1" });
    const whole = row.parts ? undefined : storedChecksum(row.checksum);
    return { start: 0, end: row.size - 1, count, checksum: row.parts ? partRange(row.parts, 1).checksum : whole?.type === "FULL_OBJECT" ? whole.value : undefined };
  }
  if (!row.parts) throw s3Error("NotImplemented", "This object's part sizes were not recorded when it was uploaded: ask for its byte Range instead");
  const { range, checksum } = partRange(row.parts, n);
  if (!range) throw s3Error("InvalidPartNumber", "The requested partnumber is not satisfiable", { PartNumberRequested: String(n), ActualPartCount: String(count) });
  return { ...range, count, checksum };
}

/** The headers that give back a stored checksum (PutObject's answer). */
export function checksumHeaders(row: FileRow): Record<string, string> {
  const sum = storedChecksum(row.checksum);
  return sum ? { [`x-amz-checksum-${sum.algorithm}`]: sum.value, "x-amz-checksum-type": sum.type } : {};
}

/** The one grant every object and bucket has: its owner's full control (ACLs cannot open anything here). */
function ownerOnlyAcl(did: Did): Response {
  const owner: [string, Node][] = [["ID", did.canonical], ["DisplayName", did.canonical]];
  return xmlResponse("AccessControlPolicy", [
    ["Owner", owner],
    ["AccessControlList", [["Grant", [['Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser"', owner], ["Permission", "FULL_CONTROL"]]]]],
  ]);
}

/**
 * PutObjectAcl / PutBucketAcl: only what changes nothing is accepted — a canned owner-only ACL in
 * `x-amz-acl` (the router has refused any other) and no ACL document. A document could grant
 * others access, which this gateway has no way to give, so it is refused whatever it says.
 */
function acceptOwnerOnlyAcl(body: string): Response {
  if (body.trim() !== "") throw s3Error("NotImplemented", "ACL documents are not supported: every object is its owner's alone; send x-amz-acl: private, or nothing");
  return new Response(null, { status: 200 });
}

const OBJECT_ATTRIBUTES = new Set(["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]);

/** Whether a PutObject asks for its body to be imported as a CAR (`x-amz-meta-import: car`). */
export const importsCar = (headers: Headers) => headers.get("x-amz-meta-import")?.trim().toLowerCase() === "car";

export function createObjects(direct: DirectStorage) {
  async function mustFind(did: Did, kind: BackendKind, key: string): Promise<FileRow> {
    const row = await direct.named(did, kind, key);
    if (!row) throw s3Error("NoSuchKey", "The specified key does not exist.", { Key: key });
    return row;
  }

  /**
   * GetObject and HeadObject: conditions, then Range (or `partNumber`), then the bytes (GET only,
   * the account's traffic paying). A single-part object is its own part 1, as on S3; a multipart
   * object's parts are served one by one, each with its own checksum when asked for.
   */
  async function get(did: Did, kind: BackendKind, key: string, request: Request, partNumber: string | null = null): Promise<Response> {
    const row = await mustFind(did, kind, key);
    direct.readable(row);
    let part: ReturnType<typeof partOf> | undefined;
    if (partNumber !== null) {
      if (!/^\d{1,5}$/.test(partNumber) || Number(partNumber) < 1 || Number(partNumber) > 10000) throw s3Error("InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive", { ArgumentName: "partNumber", ArgumentValue: partNumber });
      if (request.headers.has("range")) throw s3Error("InvalidRequest", "Cannot specify both Range header and partNumber query parameter");
      part = partOf(row, Number(partNumber));
    }
    const headers = objectHeaders(row, responseOverrides(new URL(request.url).searchParams));
    if (readCondition(request.headers, headers.etag as string, row.modTime) === "not-modified") return new Response(null, { status: 304, headers: { etag: headers.etag as string, "last-modified": headers["last-modified"] as string } });
    const range = part ? (part.end >= part.start ? { start: part.start, end: part.end } : undefined) : parseRange(request.headers.get("range"), row.size);
    if (range === "unsatisfiable") throw new S3Error("InvalidRange", "The requested range is not satisfiable", { fields: { ActualObjectSize: String(row.size) }, headers: { "content-range": `bytes */${row.size}` } });
    const length = part ? Math.max(0, part.end - part.start + 1) : range ? range.end - range.start + 1 : row.size;
    headers["content-length"] = String(length);
    if (range) headers["content-range"] = `bytes ${range.start}-${range.end}/${row.size}`;
    if (part && part.count > 1) headers["x-amz-mp-parts-count"] = String(part.count);
    // When asked for: the whole object's checksum for the whole object, a part's for a part (S3
    // gives none for a byte range).
    const sum = storedChecksum(row.checksum);
    if (sum && request.headers.get("x-amz-checksum-mode")?.toUpperCase() === "ENABLED") {
      if (part?.checksum) headers[`x-amz-checksum-${sum.algorithm}`] = part.checksum;
      else if (!part && !range) {
        headers[`x-amz-checksum-${sum.algorithm}`] = sum.value;
        headers["x-amz-checksum-type"] = sum.type;
      }
    }
    const status = range && !(part && part.count === 1) ? 206 : 200;
    if (request.method === "HEAD") return new Response(null, { status, headers });
    if (length === 0) return new Response(new Uint8Array(0), { status, headers });
    return new Response(await direct.read(did, row, range), { status, headers });
  }

  /** PutObject: stores the body as the file `key` with the request's metadata; ETag = MD5 of the bytes (checked against Content-MD5 when sent), and the flexible checksum the client sent. */
  async function put(did: Did, kind: BackendKind, key: string, body: Payload, headers: Headers): Promise<Response> {
    checkKey(key);
    const metadata = storedMetadata(metadataOf(headers));
    const expect = writeCondition(headers, key, etagOf);
    if (expect) expect(await direct.named(did, kind, key));
    const verify = contentMd5(headers.get("content-md5"));
    const checksum = () => {
      const c = body.checksum();
      return c && `${c.algorithm}:${c.value}`;
    };
    const row = await direct.put(did, kind, key, body.stream, { declared: body.declared, verify, metadata, expect, checksum });
    return new Response(null, { status: 200, headers: { etag: etagOf(row), [CID_HEADER]: row.cid, ...checksumHeaders(row) } });
  }

  /** A copy's source: the account's file, if the request's `x-amz-copy-source-if-*` hold for it. */
  async function copySource(did: Did, source: { kind: BackendKind; key: string }, headers: Headers): Promise<FileRow> {
    const from = await mustFind(did, source.kind, source.key);
    copySourceCondition(headers, from.modTime, etagOf(from));
    return from;
  }

  /**
   * PutObject with `x-amz-meta-import: car` (Filebase's convention) into the ipfs bucket: the body
   * is a CAR, imported (every block checked, all or nothing) as the file `key` when it has one
   * root, else as `key/<cid>` for each. Content-MD5 is the CAR's. Answers the roots' Cids.
   */
  async function importCar(did: Did, kind: BackendKind, key: string, body: { stream: ReadableStream<Uint8Array>; declared?: number }, md5Header: string | null): Promise<Response> {
    checkKey(key);
    const verify = contentMd5(md5Header);
    const rows = await direct.importCar(did, kind, key, body.stream, { declared: body.declared, verify });
    const first = rows[0] as FileRow;
    return new Response(null, { status: 200, headers: { etag: etagOf(first), [CID_HEADER]: rows.map((r) => r.cid).join(",") } });
  }

  /**
   * CopyObject within the account, metered as an upload (space checked, its file row recorded the
   * same way) but no traffic: nothing crossed the wire. Metadata is the source's (COPY) or the
   * request's (REPLACE); a copy onto itself must change it, as on S3. Within one bucket whose
   * back-end composes (dfs) the new name gets one more reference to the same content, with the
   * source's ETag, and no byte is read or written; otherwise the source's bytes are stored again.
   * If-Match / If-None-Match: * hold for the destination as on PutObject.
   */
  async function copy(did: Did, kind: BackendKind, key: string, source: { kind: BackendKind; key: string }, headers: Headers): Promise<Response> {
    checkKey(key);
    const directive = metadataDirective(headers);
    const replaced = directive === "REPLACE" ? storedMetadata(metadataOf(headers)) : undefined;
    // If-Match / If-None-Match are the destination's (the source's are x-amz-copy-source-if-*):
    // checked before the copy starts, and again as its row is written, as PutObject's are.
    const expect = writeCondition(headers, key, etagOf);
    const from = await copySource(did, source, headers);
    if (source.kind === kind && source.key === key && directive === "COPY") throw s3Error("InvalidRequest", "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.");
    if (expect) expect(await direct.named(did, kind, key));
    const stored: Stored = { encryption: from.encryption, metadata: replaced === undefined ? from.metadata : replaced, expect };
    // The same bytes: the same checksum. A composite one (and the part sizes) only where the
    // copy keeps the source's multipart ETag too.
    const same = source.kind === kind ? await direct.compose(did, kind, key, [from.cid], { etag: from.etag ?? undefined, moved: 0, ...stored, checksum: () => from.checksum ?? undefined, parts: from.parts ?? undefined }) : undefined;
    const whole = storedChecksum(from.checksum)?.type === "FULL_OBJECT" ? (from.checksum ?? undefined) : undefined;
    const row = same ?? (await direct.put(did, kind, key, direct.readContent(source.kind, from.cid), { declared: from.size, moved: 0, ...stored, checksum: () => whole }));
    return xmlResponse("CopyObjectResult", [["LastModified", isoDate(row.modTime)], ["ETag", etagOf(row)]], { headers: { [CID_HEADER]: row.cid } });
  }

  /**
   * DeleteObject, where the bucket's back-end deletes (the storage refuses it on ipfs); a missing
   * key is no error, as on S3. Its conditions (conditions.ts `deleteCondition`) are tested in the
   * transaction that removes the row, so a write of the name in between is never deleted unseen.
   */
  async function removeIf(did: Did, kind: BackendKind, key: string, conditions: DeleteConditions): Promise<void> {
    await direct.remove(did, kind, key, deleteCondition(conditions, key, etagOf));
  }

  /** DeleteObject: If-Match, x-amz-if-match-size and x-amz-if-match-last-modified-time hold, or nothing is deleted. */
  async function remove(did: Did, kind: BackendKind, key: string, headers: Headers): Promise<Response> {
    const header = (name: string) => headers.get(name) ?? undefined;
    await removeIf(did, kind, key, { ifMatch: header("if-match"), size: header("x-amz-if-match-size"), lastModified: header("x-amz-if-match-last-modified-time") });
    return new Response(null, { status: 204 });
  }

  /**
   * DeleteObjects: each key as DeleteObject, with the conditions its entry states (`<ETag>`,
   * `<Size>`, `<LastModifiedTime>`), each failure reported per key. A `<VersionId>` other than
   * `null` names a version that never exists here (versioning is never on): NoSuchVersion.
   */
  async function removeMany(did: Did, kind: BackendKind, xml: string): Promise<Response> {
    const { objects, quiet } = parseDelete(xml);
    const out: [string, Node][] = [];
    for (const o of objects) {
      const version: [string, Node][] = o.versionId === undefined ? [] : [["VersionId", o.versionId]];
      try {
        if (o.versionId !== undefined && o.versionId !== "null") throw s3Error("NoSuchVersion", "The specified version does not exist: versioning is never enabled here (the only version is null)");
        await removeIf(did, kind, o.key, { ifMatch: o.etag, size: o.size, lastModified: o.lastModified });
        if (!quiet) out.push(["Deleted", [["Key", o.key], ...version]]);
      } catch (err) {
        const e = toS3Error(err) ?? s3Error("InternalError", "We encountered an internal error. Please try again.");
        out.push(["Error", [["Key", o.key], ...version, ["Code", e.code], ["Message", e.message]]]);
      }
    }
    return xmlResponse("DeleteResult", out);
  }

  /**
   * ListObjectsV2 (and V1): byte order, `prefix`, `delimiter` folding names into CommonPrefixes,
   * `max-keys` ≤ 1000, and the last key (or folded prefix) as continuation (V2: in a token of
   * ours, tokens.ts), so `aws s3 sync` merges.
   */
  async function list(did: Did, kind: BackendKind, bucket: string, q: URLSearchParams): Promise<Response> {
    const v2 = q.get("list-type") === "2";
    const prefix = q.get("prefix") ?? "";
    const delimiter = q.get("delimiter") ?? "";
    const urlEncoded = q.get("encoding-type") === "url";
    const maxRaw = q.get("max-keys");
    const maxKeys = maxRaw === null ? PAGE_MAX : Number(maxRaw);
    if (!Number.isInteger(maxKeys) || maxKeys < 0) throw s3Error("InvalidArgument", "max-keys must be a whole number");
    const max = Math.min(maxKeys, PAGE_MAX);
    const token = q.get("continuation-token");
    const startAfter = (v2 ? q.get("start-after") : q.get("marker")) ?? "";
    // Only a token this gateway issued resumes a listing (tokens.ts); an empty one is none.
    const after = v2 && token ? readToken("objects", token) : startAfter;

    const foldOf = folding(prefix, delimiter);
    // A marker (or token) that is itself a folded prefix was answered already: resume past all of
    // its names, so a prefix ending one page does not begin the next.
    const page = await foldedPage({
      max,
      fold: foldOf,
      start: after !== "" && foldOf(after) === after ? pastPrefix(after) : after,
      fetch: (from, limit) => direct.list(did, kind, { prefix, after: from, limit }),
      cursorOf: (row) => row.name,
      pastFold: pastPrefix,
    });
    const { rows: contents, prefixes, truncated } = page;
    const last = page.last?.name ?? "";

    const enc = nameEncoder(urlEncoded);
    // The request's own Prefix comes back as it was sent, encoding-type or not (as S3 does).
    const entries: [string, Node][] = [
      ["Name", bucket],
      ["Prefix", prefix],
    ];
    if (v2) {
      if (token !== null) entries.push(["ContinuationToken", token]);
      if (startAfter) entries.push(["StartAfter", enc(startAfter)]);
      entries.push(["KeyCount", contents.length + prefixes.length]);
    } else {
      entries.push(["Marker", enc(startAfter)]);
    }
    entries.push(["MaxKeys", maxKeys]);
    if (delimiter) entries.push(["Delimiter", enc(delimiter)]);
    if (urlEncoded) entries.push(["EncodingType", "url"]);
    entries.push(["IsTruncated", truncated]);
    // The last key or folded prefix listed: a marker given back resumes after it (and after its names, for a prefix).
    if (truncated) entries.push(v2 ? ["NextContinuationToken", issueToken("objects", last)] : ["NextMarker", enc(last)]);
    // V1 lists each object's owner; V2 when asked (fetch-owner).
    const owner: [string, Node][] | undefined = !v2 || q.get("fetch-owner") === "true" ? [["ID", did.canonical], ["DisplayName", did.canonical]] : undefined;
    for (const row of contents) {
      const sum = storedChecksum(row.checksum);
      const checksum: [string, Node][] = sum ? [["ChecksumAlgorithm", upperName(sum.algorithm)], ["ChecksumType", sum.type]] : [];
      entries.push(["Contents", [["Key", enc(row.name)], ["LastModified", isoDate(row.modTime)], ["ETag", etagOf(row)], ...checksum, ["Size", row.size], ...(owner ? [["Owner", owner] as [string, Node]] : []), ["StorageClass", "STANDARD"]]]);
    }
    for (const p of prefixes) entries.push(["CommonPrefixes", [["Prefix", enc(p)]]]);
    return xmlResponse("ListBucketResult", entries);
  }

  /** GetObjectAcl: the object must exist; its ACL is its owner's full control. */
  async function acl(did: Did, kind: BackendKind, key: string): Promise<Response> {
    await mustFind(did, kind, key);
    return ownerOnlyAcl(did);
  }

  /** GetObjectTagging: the object must exist; its tag set is empty (none is ever stored). */
  async function tagging(did: Did, kind: BackendKind, key: string): Promise<Response> {
    await mustFind(did, kind, key);
    return xmlResponse("Tagging", [["TagSet", []]]);
  }

  /** PutObjectAcl: the object must exist; nothing about it changes (see acceptOwnerOnlyAcl). */
  async function putAcl(did: Did, kind: BackendKind, key: string, body: string): Promise<Response> {
    await mustFind(did, kind, key);
    return acceptOwnerOnlyAcl(body);
  }

  /**
   * GetObjectAttributes: the attributes `x-amz-object-attributes` names. Checksum is the object's
   * stored one, left out when it has none (as S3 leaves out what an object lacks); ObjectParts, of
   * a multipart object, its part count and its parts (number, size, checksum) a page at a time
   * (`x-amz-max-parts`, default 1000, a larger one capped, after `x-amz-part-number-marker`).
   */
  async function attributes(did: Did, kind: BackendKind, key: string, wanted: string | null, paging: { maxParts: string | null; marker: string | null }): Promise<Response> {
    const names = (wanted ?? "").split(",").map((n) => n.trim()).filter(Boolean);
    if (names.length === 0) throw s3Error("InvalidArgument", "x-amz-object-attributes must name at least one of ETag, Checksum, ObjectParts, StorageClass, ObjectSize", { ArgumentName: "x-amz-object-attributes" });
    const unknown = names.find((n) => !OBJECT_ATTRIBUTES.has(n));
    if (unknown !== undefined) throw s3Error("InvalidArgument", `Unknown attribute ${unknown}: ask for ETag, Checksum, ObjectParts, StorageClass or ObjectSize`, { ArgumentName: "x-amz-object-attributes", ArgumentValue: unknown });
    const row = await mustFind(did, kind, key);
    const out: [string, Node][] = [];
    if (names.includes("ETag")) out.push(["ETag", etagOf(row).replace(/"/g, "")]);
    const sum = storedChecksum(row.checksum);
    if (names.includes("Checksum") && sum) out.push(["Checksum", [[`Checksum${upperName(sum.algorithm)}`, sum.value], ["ChecksumType", sum.type]]]);
    if (names.includes("ObjectParts") && (partsOf(row) > 1 || row.parts)) out.push(["ObjectParts", objectParts(row, sum?.algorithm, paging)]);
    if (names.includes("StorageClass")) out.push(["StorageClass", "STANDARD"]);
    if (names.includes("ObjectSize")) out.push(["ObjectSize", row.size]);
    return xmlResponse("GetObjectAttributesResponse", out, { headers: { "last-modified": httpDate(row.modTime) } });
  }

  /**
   * ListBuckets: the back-ends this key may see, those starting with `prefix`, after a
   * `continuation-token` of ours, at most `max-buckets` (1 to 10,000, as on S3) with a token for
   * the rest.
   */
  function buckets(did: Did, visible: string[], q: URLSearchParams): Response {
    const prefix = q.get("prefix") ?? "";
    const token = q.get("continuation-token");
    const after = token ? readToken("buckets", token) : "";
    const maxRaw = q.get("max-buckets");
    const max = maxRaw === null ? 10_000 : Number(maxRaw.trim());
    if (maxRaw !== null && (!/^\d{1,5}$/.test(maxRaw.trim()) || max < 1 || max > 10_000)) throw s3Error("InvalidArgument", "max-buckets must be a whole number from 1 to 10000", { ArgumentName: "max-buckets", ArgumentValue: maxRaw });
    const names = visible.filter((name) => name.startsWith(prefix) && name > after).sort();
    const page = names.slice(0, max);
    const entries: [string, Node][] = [
      ["Owner", [["ID", did.canonical], ["DisplayName", did.canonical]]],
      ["Buckets", page.map((name): [string, Node] => ["Bucket", [["Name", name], ["CreationDate", "2024-01-01T00:00:00.000Z"]]])],
    ];
    if (names.length > page.length) entries.push(["ContinuationToken", issueToken("buckets", page.at(-1) as string)]);
    if (q.has("prefix")) entries.push(["Prefix", prefix]);
    return xmlResponse("ListAllMyBucketsResult", entries);
  }

  return {
    get,
    put,
    importCar,
    copy,
    copySource,
    remove,
    removeMany,
    list,
    buckets,
    acl,
    putAcl,
    tagging,
    attributes,
    bucketAcl: ownerOnlyAcl,
    putBucketAcl: acceptOwnerOnlyAcl,
  };
}

export type Objects = ReturnType<typeof createObjects>;
