/**
 * Multipart uploads (D18), the simplest correct way: an upload is a database row (any gateway of
 * a cluster can take its parts or complete it), each part is stored as it arrives as content of
 * the upload's back-end holding one reference (storage/pipeline.ts `stash`, which chunks it as it
 * arrives). Completion makes the file from the parts' chunks without reading them back when every
 * part but the last is a whole number of 1 MiB chunks (pipeline `compose`: aws-cli's 8 MiB parts,
 * rclone's 5 MiB ones); otherwise it streams the parts in order through the pipeline's
 * ordinary put. Either way the file's quota check and catalog row are those of any upload, and
 * the parts' references go after the file's row commits. Completion can take
 * a while for a large object, so its 200 answer starts at once and whitespace keeps the
 * connection alive until the result (or an S3 error document) follows, as S3 itself does.
 * Uploads not completed expire after 24 h; `expire()` aborts them.
 */
import { createHash } from "node:crypto";
import type { Queryable, Sql } from "../db/sql.ts";
import type { Did } from "../identity/did.ts";
import type { Logger } from "../log.ts";
import type { BackendKind } from "../storage/backend.ts";
import type { DirectStorage } from "../storage/direct.ts";
import type { FileRow } from "../storage/files.ts";
import { writeCondition } from "./conditions.ts";
import { S3Error, s3Error, toS3Error } from "./errors.ts";
import { copyRange } from "./copy.ts";
import { metadataOf, storedMetadata } from "./metadata.ts";
import { checkKey, etagOf } from "./objects.ts";
import type { BodyChecksum, Payload } from "./auth.ts";
import { algorithmOf, checkedAtEnd, composite, contentMd5, fullObject, running, storedChecksum, upperName, type Algorithm } from "./checksums.ts";
import { encodeParts } from "./part-sizes.ts";
import { folding, foldedPage, nameEncoder, pageMarker, pageSize, pastPrefix } from "./listing.ts";
import { errorXml, parseComplete, xmlDocument, xmlResponse, type NamedPart, type Node } from "./xml.ts";

export const UPLOAD_TTL_MS = 24 * 3600_000;
/** S3's smallest part but the last. */
const MIN_PART = 5 * 1024 * 1024;
const MAX_PARTS = 10_000;
/** Live multipart uploads one account may have open at once: each is a row and up to 24 h of
 * held parts, so a key must not be able to open them without end. */
export const MAX_OPEN_UPLOADS = 1_000;
/** Parts one account may hold across its open uploads: two uploads of S3's 10,000 parts at once.
 * A part may be empty, so its bytes alone (the space pool) do not bound how many rows it makes. */
export const MAX_OPEN_PARTS = 2 * MAX_PARTS;
/** How often a completion in progress sends a space to keep its connection open. */
const KEEP_ALIVE_MS = 5_000;

interface UploadRow {
  id: string;
  did: string;
  backend: BackendKind;
  name: string;
  reservation: number | null;
  expiresAt: number;
  metadata: string | null;
  checksumAlgorithm: Algorithm | null;
  checksumType: ChecksumType | null;
}
interface PartRow {
  partNumber: number;
  cid: string;
  size: number;
  md5: string;
  createdAt: number;
  /** Copied from a stored object (UploadPartCopy), not sent: no traffic at completion. */
  copied: boolean | number | null;
  checksum: string | null;
}
type ChecksumType = "COMPOSITE" | "FULL_OBJECT";

const INSERT_UPLOAD = "INSERT INTO s3_uploads (id, did, backend, name, content_type, metadata, reservation, created_at, expires_at, checksum_algorithm, checksum_type) VALUES ($1, $2, $3, $4, $5, $6, NULL, $7, $8, $9, $10)";
const UPLOAD = `SELECT id, did, backend, name, reservation, expires_at AS "expiresAt", metadata, checksum_algorithm AS "checksumAlgorithm", checksum_type AS "checksumType" FROM s3_uploads WHERE id = $1`;
const PARTS_SIZE = "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) AS n FROM s3_parts WHERE upload_id = $1";
const RESERVATION = "SELECT reservation FROM s3_uploads WHERE id = $1";
const SET_RESERVATION = "UPDATE s3_uploads SET reservation = $2 WHERE id = $1";
const DROP_PART = "DELETE FROM s3_parts WHERE upload_id = $1 AND part_number = $2 RETURNING cid";
const INSERT_PART = "INSERT INTO s3_parts (upload_id, part_number, cid, size, md5, created_at, copied, checksum) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
const PARTS = `SELECT part_number AS "partNumber", cid, size, md5, created_at AS "createdAt", copied, checksum FROM s3_parts WHERE upload_id = $1 ORDER BY part_number`;
const PARTS_PAGE = `SELECT part_number AS "partNumber", cid, size, md5, created_at AS "createdAt", copied, checksum FROM s3_parts WHERE upload_id = $1 AND part_number > $2 ORDER BY part_number LIMIT $3`;
const DROP_PARTS = "DELETE FROM s3_parts WHERE upload_id = $1 RETURNING cid";
const DROP_UPLOAD = "DELETE FROM s3_uploads WHERE id = $1 RETURNING reservation";
const EXPIRED = "SELECT id, backend FROM s3_uploads WHERE expires_at <= $1 LIMIT 100";
const OPEN_UPLOADS = "SELECT COUNT(*) AS n FROM s3_uploads WHERE did = $1 AND expires_at > $2";
const OPEN_PARTS = "SELECT COUNT(*) AS n FROM s3_parts p JOIN s3_uploads u ON u.id = p.upload_id WHERE u.did = $1 AND u.expires_at > $2";
// Byte order of names (PostgreSQL's name column is COLLATE "C", SQLite compares bytes), then ids:
// after a key (key-marker alone), or after one upload of a key (with upload-id-marker).
const LIVE_COLUMNS = `SELECT id, name, created_at AS "createdAt" FROM s3_uploads WHERE did = $1 AND backend = $2 AND expires_at > $3 AND substr(name, 1, length($4)) = $4`;
const LIVE_AFTER_KEY = `${LIVE_COLUMNS} AND name > $5 ORDER BY name, id LIMIT $6`;
const LIVE_AFTER_UPLOAD = `${LIVE_COLUMNS} AND (name > $5 OR (name = $5 AND id > $7)) ORDER BY name, id LIMIT $6`;

/**
 * The object's checksum from its parts' (the upload's algorithm and type), as files.ts stores it;
 * undefined when the upload named none (or a part has none: one stored by a gateway that kept
 * none). A checksum the Complete sends as a header must be the same.
 */
function objectChecksum(upload: UploadRow, parts: readonly PartRow[], headers: Headers): string | undefined {
  const algorithm = upload.checksumAlgorithm;
  if (!algorithm || parts.some((p) => p.checksum === null)) return undefined;
  const sums = parts.map((p) => ({ checksum: p.checksum as string, size: p.size }));
  const value = upload.checksumType === "FULL_OBJECT" ? fullObject(algorithm, sums) : composite(algorithm, sums.map((p) => p.checksum));
  const sent = headers.get(`x-amz-checksum-${algorithm}`);
  const bare = (v: string) => v.replace(/-\d+$/, "");
  if (sent !== null && bare(sent.trim()) !== bare(value)) throw s3Error("BadDigest", `The ${upperName(algorithm)} you specified did not match the calculated checksum.`);
  return `${algorithm}:${value}`;
}

/** A key as a URL path, each segment URI-encoded as S3 encodes it (`/` kept). */
const keyPath = (key: string) => key.split("/").map((s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)).join("/");

/**
 * The object's URL, as S3's Location gives it: absolute, on the host the request was sent to
 * (the signed Host header), https when a proxy in front says the client used it.
 */
function locationOf(bucket: string, key: string, headers: Headers): string {
  const path = `/${bucket}/${keyPath(key)}`;
  const host = headers.get("host");
  if (!host) return path;
  const scheme = headers.get("x-forwarded-proto")?.split(",")[0]?.trim().toLowerCase() === "https" ? "https" : "http";
  return `${scheme}://${host}${path}`;
}

/** CompleteMultipartUploadResult's elements for the object made (with its checksum, if it has one). */
function completed(bucket: string, key: string, row: FileRow, headers: Headers): [string, Node][] {
  const out: [string, Node][] = [["Location", locationOf(bucket, key, headers)], ["Bucket", bucket], ["Key", key], ["ETag", etagOf(row)]];
  const sum = storedChecksum(row.checksum);
  if (sum) out.push([`Checksum${upperName(sum.algorithm)}`, sum.value], ["ChecksumType", sum.type]);
  return out;
}

/**
 * The parts a CompleteMultipartUpload names, in ascending order. A part named twice in a row (a
 * client that sent it again while the first was in flight, and lists both answers): the later
 * entry is the one that counts, as on Ceph's RGW.
 */
function namedParts(xml: string): NamedPart[] {
  const wanted: NamedPart[] = [];
  for (const w of parseComplete(xml)) {
    const before = wanted.at(-1);
    if (before && w.partNumber < before.partNumber) throw s3Error("InvalidPartOrder", "The list of parts was not in ascending order. The parts list must be specified in order by part number.");
    if (before?.partNumber === w.partNumber) wanted.pop();
    wanted.push(w);
  }
  return wanted;
}

/** A multipart object's ETag, as S3 makes it: the MD5 of its parts' MD5s, and their count. */
const multipartTag = (md5s: string[]) => `${createHash("md5").update(Buffer.concat(md5s.map((m) => Buffer.from(m, "hex")))).digest("hex")}-${md5s.length}`;

const noSuchUpload = (id: string) => s3Error("NoSuchUpload", "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.", { UploadId: id });

const tooManyUploads = (max: number) => s3Error("InvalidRequest", `This account has ${max} multipart uploads open, the most it may: complete or abort some (ListMultipartUploads names them) before starting another`);
const tooManyParts = (max: number) => s3Error("InvalidRequest", `This account's open multipart uploads hold ${max} parts, the most they may: complete or abort an upload before sending more parts`);

/** How many uploads and parts one account may have open (tests lower them). */
export interface MultipartLimits {
  uploads: number;
  parts: number;
}

export function createMultipart(deps: { sql: Sql; direct: DirectStorage; log: Logger; now?: () => number; limits?: Partial<MultipartLimits> }) {
  const { sql, direct, log } = deps;
  const limits: MultipartLimits = { uploads: MAX_OPEN_UPLOADS, parts: MAX_OPEN_PARTS, ...deps.limits };
  const now = deps.now ?? Date.now;

  /** The upload `id` of this account, bucket and key, if it is live. */
  async function find(did: Did, kind: BackendKind, key: string, id: string): Promise<UploadRow> {
    const row = await sql.get<UploadRow>(UPLOAD, [id]);
    if (!row || row.did !== did.canonical || row.backend !== kind || row.name !== key || row.expiresAt <= now()) throw noSuchUpload(id);
    return row;
  }

  /**
   * CreateMultipartUpload: the request's metadata (metadata.ts) is kept for the completed object.
   * x-amz-checksum-algorithm names the checksum every part carries (computed
   * here when a part comes without it); x-amz-checksum-type says whether the object's is COMPOSITE
   * (of the parts' checksums; the default, as on S3, but for CRC64NVME) or FULL_OBJECT (a CRC of
   * the whole, combined from the parts').
   */
  async function create(did: Did, kind: BackendKind, bucket: string, key: string, headers: Headers): Promise<Response> {
    checkKey(key);
    direct.kind(kind);
    const metadata = metadataOf(headers);
    const algorithm = algorithmOf(headers.get("x-amz-checksum-algorithm")) ?? null;
    const rawType = headers.get("x-amz-checksum-type")?.trim().toUpperCase();
    if (rawType !== undefined && rawType !== "COMPOSITE" && rawType !== "FULL_OBJECT") throw s3Error("InvalidRequest", "x-amz-checksum-type is COMPOSITE or FULL_OBJECT");
    if (rawType !== undefined && !algorithm) throw s3Error("InvalidRequest", "x-amz-checksum-type needs x-amz-checksum-algorithm");
    const type: ChecksumType | null = algorithm ? ((rawType as ChecksumType | undefined) ?? (algorithm === "crc64nvme" ? "FULL_OBJECT" : "COMPOSITE")) : null;
    if (type === "FULL_OBJECT" && (algorithm === "sha1" || algorithm === "sha256")) throw s3Error("InvalidRequest", `The FULL_OBJECT checksum type takes CRC32, CRC32C or CRC64NVME, not ${upperName(algorithm)}`);
    if (type === "COMPOSITE" && algorithm === "crc64nvme") throw s3Error("InvalidRequest", "CRC64NVME is a FULL_OBJECT checksum only");
    const id = Buffer.from(crypto.getRandomValues(new Uint8Array(24))).toString("base64url");
    // The count and the insert in one serializable transaction: two creates at once cannot both
    // take the last place (the database retries the one that would).
    await sql.tx(
      async (tx) => {
        const open = Number((await tx.get<{ n: number | string }>(OPEN_UPLOADS, [did.canonical, now()]))?.n ?? 0);
        if (open >= limits.uploads) throw tooManyUploads(limits.uploads);
        await tx.run(INSERT_UPLOAD, [id, did.canonical, kind, key, metadata["content-type"] ?? null, storedMetadata(metadata), now(), now() + UPLOAD_TTL_MS, algorithm, type]);
      },
      { isolation: "serializable" },
    );
    const answer = algorithm && type ? { "x-amz-checksum-algorithm": upperName(algorithm), "x-amz-checksum-type": type } : undefined;
    return xmlResponse("InitiateMultipartUploadResult", [["Bucket", bucket], ["Key", key], ["UploadId", id]], { headers: answer });
  }

  function partNumberOf(raw: string | null): number {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1 || n > MAX_PARTS) throw s3Error("InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive");
    return n;
  }

  /**
   * UploadPart. The part's bytes go through the account's quota meter as they arrive, as an
   * upload's do: a full pool refuses before the first byte, and a part that outgrows what is free
   * stops there, so no more than the free space (and the chunk in flight) ever reaches the
   * back-end. Its holds then become part of the upload's lasting hold (see `record`).
   */
  async function uploadPart(did: Did, kind: BackendKind, key: string, id: string, partRaw: string | null, payload: (want?: Algorithm) => Payload, md5Header: string | null = null): Promise<Response> {
    const n = partNumberOf(partRaw);
    const verify = contentMd5(md5Header);
    const upload = await find(did, kind, key, id);
    // The upload's algorithm is every part's: computed when the part came without it.
    const body = payload(upload.checksumAlgorithm ?? undefined);
    const part = await storePart(did, kind, upload, n, () => body, false, verify);
    const sum = part.checksum;
    return new Response(null, { status: 200, headers: { etag: `"${part.md5}"`, ...(sum ? { [`x-amz-checksum-${sum.algorithm}`]: sum.value } : {}) } });
  }

  /**
   * UploadPartCopy: the part's bytes are the source's (or `x-amz-copy-source-range` of them),
   * stored as a part sent would be — the same quota meter and hold — but counting no traffic when
   * the upload completes, as a copy crossed no wire. In an upload with a checksum algorithm the
   * part's checksum is computed as its bytes are copied, as for a part sent without one, and
   * CopyPartResult gives it back: so the object gets its checksum whether its parts were sent or
   * copied.
   */
  async function uploadPartCopy(did: Did, kind: BackendKind, key: string, id: string, partRaw: string | null, source: FileRow, rangeHeader: string | null): Promise<Response> {
    const n = partNumberOf(partRaw);
    const upload = await find(did, kind, key, id);
    const range = copyRange(rangeHeader, source.size);
    const declared = range ? range.end - range.start + 1 : source.size;
    const algorithm = upload.checksumAlgorithm;
    const body = () => {
      const stream = direct.readContent(source.backend, source.cid, range);
      if (!algorithm) return { stream, declared };
      let sum: BodyChecksum | undefined;
      const summed = checkedAtEnd(stream, running(algorithm), (value) => void (sum = { algorithm, value }));
      return { stream: summed, declared, checksum: () => sum };
    };
    const part = await storePart(did, kind, upload, n, body, true);
    const sum = part.checksum;
    return xmlResponse("CopyPartResult", [["LastModified", new Date(part.at).toISOString()], ["ETag", `"${part.md5}"`], ...(sum ? [[`Checksum${upperName(sum.algorithm)}`, sum.value] as [string, string]] : [])]);
  }

  /** Stores part `n` of `upload` from `body` (opened once the part's hold is in place); its MD5 and
   * when it was recorded. `verify` sees the part's MD5 before it is recorded (a Content-MD5 that
   * differs): throwing keeps nothing. */
  async function storePart(did: Did, kind: BackendKind, upload: UploadRow, n: number, body: () => { stream: ReadableStream<Uint8Array>; declared?: number; checksum?: () => BodyChecksum | undefined }, copied: boolean, verify?: (md5: string) => void): Promise<{ md5: string; at: number; checksum?: BodyChecksum }> {
    const id = upload.id;
    const hold = await direct.spaceHold(did);
    const { stream, declared, checksum: sumOf } = body();
    const part = await direct.stash(did, kind, stream, { declared });
    const at = now();
    const sum = sumOf?.();
    // Kept in the upload's algorithm only: the object's checksum is made of those.
    const checksum = upload.checksumAlgorithm && sum?.algorithm === upload.checksumAlgorithm ? sum.value : null;
    // A part sent again replaces the earlier one; the replaced content's reference goes. The
    // upload's space hold grows to its parts' total in the same transaction, after the account's
    // quota lock (D16), taking over the holds the part's bytes took as they came: parts sent in
    // parallel are counted one after the other. The account's open parts are counted under the
    // same lock (serializable without a quota, which has no lock to take).
    let replaced: string | undefined;
    try {
      verify?.(part.md5);
      replaced = await sql.tx(
        async (tx: Queryable) => {
          await hold?.lock(tx);
          const current = await tx.get<{ reservation: number | null }>(RESERVATION, [id]);
          if (!current) throw noSuchUpload(id); // aborted or completed meanwhile
          const old = await tx.get<{ cid: string }>(DROP_PART, [id, n]);
          if (!old) {
            const open = Number((await tx.get<{ n: number | string }>(OPEN_PARTS, [did.canonical, now()]))?.n ?? 0);
            if (open >= limits.parts) throw tooManyParts(limits.parts);
          }
          await tx.run(INSERT_PART, [id, n, part.cid, part.size, part.md5, at, copied ? true : null, checksum]);
          if (hold) {
            const total = (await tx.get<{ n: number }>(PARTS_SIZE, [id]))?.n ?? 0;
            await tx.run(SET_RESERVATION, [id, await hold.set(tx, total, upload.expiresAt, current.reservation, part.holds())]);
          }
          return old?.cid;
        },
        { isolation: hold ? "read committed" : "serializable" },
      );
      part.handedOver();
    } catch (err) {
      await direct.unstash(kind, part.cid); // a refused part is not kept
      throw err;
    } finally {
      await part.release();
    }
    if (replaced) await direct.unstash(kind, replaced);
    return { md5: part.md5, at, checksum: sum };
  }

  /**
   * ListParts, a page at a time as S3 pages it: the parts after `part-number-marker`, at most
   * `max-parts` of them (default and at most 1000), and where the next page starts.
   */
  async function listParts(did: Did, kind: BackendKind, bucket: string, key: string, id: string, q: URLSearchParams): Promise<Response> {
    const max = pageSize(q.get("max-parts"), "max-parts");
    const marker = pageMarker(q.get("part-number-marker"), "part-number-marker");
    const upload = await find(did, kind, key, id);
    const rows = max === 0 ? [] : await sql.all<PartRow>(PARTS_PAGE, [id, marker, max + 1]);
    const parts = rows.slice(0, max);
    const next = parts.at(-1)?.partNumber ?? marker;
    const entries: [string, Node][] = [["Bucket", bucket], ["Key", key], ["UploadId", id], ["PartNumberMarker", marker], ["NextPartNumberMarker", next], ["MaxParts", max], ["IsTruncated", rows.length > max]];
    const algorithm = upload.checksumAlgorithm;
    if (algorithm) entries.push(["ChecksumAlgorithm", upperName(algorithm)], ["ChecksumType", upload.checksumType]);
    for (const p of parts) {
      const sum: [string, Node][] = algorithm && p.checksum ? [[`Checksum${upperName(algorithm)}`, p.checksum]] : [];
      entries.push(["Part", [["PartNumber", p.partNumber], ["LastModified", new Date(p.createdAt).toISOString()], ["ETag", `"${p.md5}"`], ["Size", p.size], ...sum]]);
    }
    return xmlResponse("ListPartsResult", entries);
  }

  /** Drops an upload's rows, then its parts' references (each once, whoever else aborts it too). */
  async function drop(id: string, kind: BackendKind): Promise<boolean> {
    const { cids, existed, reservation } = await sql.tx(async (tx) => {
      const rows = await tx.all<{ cid: string }>(DROP_PARTS, [id]);
      const gone = await tx.get<{ reservation: number | null }>(DROP_UPLOAD, [id]);
      return { cids: rows.map((r) => r.cid), existed: gone !== undefined, reservation: gone?.reservation ?? null };
    });
    await direct.dropHold(reservation);
    for (const cid of cids) await direct.unstash(kind, cid);
    return existed;
  }

  async function abort(did: Did, kind: BackendKind, key: string, id: string): Promise<Response> {
    await find(did, kind, key, id);
    await drop(id, kind);
    return new Response(null, { status: 204 });
  }

  /** The parts a completion names, checked against those stored: order, ETags (and checksums, in the upload's algorithm), sizes. */
  async function chosenParts(id: string, xml: string, upload: UploadRow): Promise<PartRow[]> {
    const wanted = namedParts(xml);
    const stored = new Map((await sql.all<PartRow>(PARTS, [id])).map((p) => [p.partNumber, p]));
    const algorithm = upload.checksumAlgorithm;
    const chosen = wanted.map((w) => {
      const p = stored.get(w.partNumber);
      const sent = algorithm ? w.checksums[upperName(algorithm)] : undefined;
      if (!p || p.md5 !== w.etag.toLowerCase() || (sent !== undefined && sent !== p.checksum)) throw s3Error("InvalidPart", "One or more of the specified parts could not be found. The part might not have been uploaded, or the specified entity tag might not have matched the part's entity tag.", { PartNumber: String(w.partNumber) });
      return p;
    });
    chosen.slice(0, -1).forEach((p) => {
      if (p.size < MIN_PART) throw s3Error("EntityTooSmall", "Your proposed upload is smaller than the minimum allowed object size.", { PartNumber: String(p.partNumber) });
    });
    return chosen;
  }

  /**
   * A Complete sent again after its upload completed (a client retrying a lost answer): the object
   * the parts it names made, if it is still the key's. S3 answers that 200 again; the upload
   * itself is gone, so the object's ETag — the parts' own digest — is what identifies it.
   */
  async function completedAlready(did: Did, kind: BackendKind, key: string, xml: string) {
    let md5s: string[];
    try {
      md5s = namedParts(xml).map((p) => p.etag.toLowerCase());
    } catch {
      return undefined;
    }
    if (!md5s.every((m) => /^[0-9a-f]{32}$/.test(m))) return undefined;
    const row = await direct.named(did, kind, key);
    return row && row.etag === multipartTag(md5s) ? row : undefined;
  }

  /** The parts' bytes one after the other. */
  function concatenated(kind: BackendKind, parts: PartRow[]): ReadableStream<Uint8Array> {
    let i = 0;
    let current: { read(): Promise<{ done: boolean; value?: Uint8Array }>; cancel(reason?: unknown): Promise<void> } | undefined;
    return new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          for (;;) {
            if (!current) {
              const p = parts[i++];
              if (!p) return controller.close();
              current = direct.readContent(kind, p.cid).getReader();
            }
            const { value, done } = await current.read();
            if (!done && value) return controller.enqueue(value);
            if (!done) continue;
            current = undefined;
          }
        },
        cancel: (reason) => current?.cancel(reason),
      },
      { highWaterMark: 0 },
    );
  }

  /**
   * CompleteMultipartUpload. The checks that need no work answer a plain error; then a 200 starts,
   * spaces flow while the parts are stored as one file, and the result (or an error document,
   * which clients read from a 200 too) ends it.
   */
  async function complete(did: Did, kind: BackendKind, bucket: string, key: string, id: string, xml: string, headers: Headers): Promise<Response> {
    const expect = writeCondition(headers, key, etagOf);
    let upload: UploadRow;
    try {
      upload = await find(did, kind, key, id);
    } catch (err) {
      const done = await completedAlready(did, kind, key, xml);
      if (!done) throw err;
      return xmlResponse("CompleteMultipartUploadResult", completed(bucket, key, done, headers));
    }
    const parts = await chosenParts(id, xml, upload);
    const checksum = objectChecksum(upload, parts, headers);
    if (expect) expect(await direct.named(did, kind, key));
    // The file's own upload checks the space now: the parts' hold would count them twice.
    if (upload.reservation !== null) {
      await sql.run(SET_RESERVATION, [id, null]);
      await direct.dropHold(upload.reservation);
    }
    const tag = multipartTag(parts.map((p) => p.md5));
    const total = parts.reduce((n, p) => n + p.size, 0);
    // Only the parts that were sent count as traffic; copied ones crossed no wire.
    const moved = parts.reduce((n, p) => n + (p.copied ? 0 : p.size), 0);
    const stored = { metadata: upload.metadata, moved };
    // Parts that line up on chunks become the file without a byte read back; others stream.
    // The parts' sizes, and their checksums when the object has one (each part is read by number).
    const sums = checksum ? parts.map((p) => p.checksum as string) : undefined;
    const layout = parts.length > 1 || sums ? encodeParts(parts.map((p) => p.size), sums) : undefined;
    const fields = { ...stored, expect, checksum: () => checksum, parts: layout };
    const work = (async () => (await direct.compose(did, kind, key, parts.map((p) => p.cid), { etag: tag, ...fields })) ?? (await direct.put(did, kind, key, concatenated(kind, parts), { declared: total, etag: () => tag, ...fields })))();
    const enc = new TextEncoder();
    let timer: Timer | undefined;
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(enc.encode('<?xml version="1.0" encoding="UTF-8"?>\n'));
        timer = setInterval(() => controller.enqueue(enc.encode(" ")), KEEP_ALIVE_MS);
        try {
          const row = await work;
          await drop(id, kind);
          const doc = xmlDocument("CompleteMultipartUploadResult", completed(bucket, key, row, headers));
          controller.enqueue(enc.encode(doc.slice(doc.indexOf("\n") + 1)));
        } catch (err) {
          const e = toS3Error(err);
          if (!e) log.error("completing a multipart upload failed", { id, err: err instanceof Error ? (err.stack ?? err.message) : String(err) });
          const xmlErr = errorXml(e ?? new S3Error("InternalError", "We encountered an internal error. Please try again."), `/${bucket}/${key}`, id);
          controller.enqueue(enc.encode(xmlErr.slice(xmlErr.indexOf("\n") + 1)));
        } finally {
          clearInterval(timer);
          controller.close();
        }
      },
      cancel: () => clearInterval(timer),
    });
    return new Response(body, { status: 200, headers: { "content-type": "application/xml" } });
  }

  /**
   * ListMultipartUploads as S3 pages it: the account's live uploads in this bucket by key (byte
   * order) then upload id, after `key-marker` (and, for that key, after `upload-id-marker`), under
   * `prefix`, keys with `delimiter` past the prefix folded into CommonPrefixes, at most
   * `max-uploads` entries (default and at most 1000) counting uploads and prefixes alike.
   */
  async function listUploads(did: Did, kind: BackendKind, bucket: string, q: URLSearchParams): Promise<Response> {
    const prefix = q.get("prefix") ?? "";
    const delimiter = q.get("delimiter") ?? "";
    const max = pageSize(q.get("max-uploads"), "max-uploads");
    const keyMarker = q.get("key-marker") ?? "";
    // S3 ignores an upload-id-marker without a key-marker.
    const idMarker = keyMarker ? (q.get("upload-id-marker") ?? "") : "";
    const urlEncoded = q.get("encoding-type") === "url";
    const foldOf = folding(prefix, delimiter);
    // A key-marker that is a folded prefix was answered already: resume past all of its keys.
    const start = keyMarker !== "" && foldOf(keyMarker) === keyMarker ? { key: pastPrefix(keyMarker), id: "" } : { key: keyMarker, id: idMarker };
    const page = await foldedPage({
      max,
      fold: foldOf,
      start,
      fetch: (after, limit) => {
        const base = [did.canonical, kind, now(), prefix, after.key, limit];
        return sql.all<{ id: string; name: string; createdAt: number }>(after.id ? LIVE_AFTER_UPLOAD : LIVE_AFTER_KEY, after.id ? [...base, after.id] : base);
      },
      cursorOf: (row) => ({ key: row.name, id: row.id }),
      pastFold: (p) => ({ key: pastPrefix(p), id: "" }),
    });
    const { rows: uploads, prefixes, truncated } = page;
    const last = { key: page.last?.name ?? "", id: page.last?.row?.id ?? "" };
    const enc = nameEncoder(urlEncoded);
    const entries: [string, Node][] = [
      ["Bucket", bucket],
      ["KeyMarker", enc(keyMarker)],
      ["UploadIdMarker", idMarker],
      ["NextKeyMarker", enc(last.key)],
      ["NextUploadIdMarker", last.id],
      ["Prefix", enc(prefix)],
    ];
    if (delimiter) entries.push(["Delimiter", enc(delimiter)]);
    entries.push(["MaxUploads", max], ["IsTruncated", truncated]);
    if (urlEncoded) entries.push(["EncodingType", "url"]);
    for (const r of uploads) entries.push(["Upload", [["Key", enc(r.name)], ["UploadId", r.id], ["Initiated", new Date(r.createdAt).toISOString()], ["StorageClass", "STANDARD"]]]);
    for (const p of prefixes) entries.push(["CommonPrefixes", [["Prefix", enc(p)]]]);
    return xmlResponse("ListMultipartUploadsResult", entries);
  }

  /** Aborts uploads whose 24 h are up (any gateway may run it: each upload is dropped once). */
  async function expire(): Promise<number> {
    const rows = await sql.all<{ id: string; backend: BackendKind }>(EXPIRED, [now()]);
    let n = 0;
    for (const r of rows) {
      try {
        if (await drop(r.id, r.backend)) n++;
      } catch (err) {
        log.warn("expiring a multipart upload failed", { id: r.id, err: (err as Error).message });
      }
    }
    return n;
  }

  return { create, uploadPart, uploadPartCopy, listParts, listUploads, abort, complete, expire };
}

export type Multipart = ReturnType<typeof createMultipart>;
