/**
 * S3's conditional requests. Reads (GET/HEAD) weigh If-Match, If-Unmodified-Since, If-None-Match
 * and If-Modified-Since as RFC 7232 and S3 do: an If-Match that holds makes If-Unmodified-Since
 * moot, an If-None-Match that fails makes If-Modified-Since moot; a failed If-Match or
 * If-Unmodified-Since answers 412, a failed If-None-Match or If-Modified-Since 304. Writes (PUT,
 * CompleteMultipartUpload) take `If-None-Match: *` (create only) and `If-Match: <etag>` (replace
 * only that version): checked once before any byte is taken, which spares a doomed upload, and
 * again under the account's lock as the file row is written (storage/files.ts Expectation), which
 * is what makes two conditional writes of one name at once end with exactly one winner. Deletes
 * (DeleteObject, and each key of DeleteObjects) take If-Match (`*`: the object exists) and the
 * object's size and last-modified time, tested in the transaction that removes the row.
 */
import type { FileRow } from "../storage/files.ts";
import { S3Error, s3Error } from "./errors.ts";

/** Whether an If-Match / If-None-Match list names this ETag (quoted, as shown) or is `*`. */
export function etagListMatches(header: string, etag: string): boolean {
  return header.split(",").some((t) => {
    const tag = t.trim().replace(/^W\//, "");
    return tag === "*" || tag === etag || `"${tag}"` === etag;
  });
}

/** An HTTP date in whole seconds; undefined when it is not one (S3, like HTTP, then ignores the header). */
function seconds(header: string | null): number | undefined {
  if (header === null) return undefined;
  const ms = Date.parse(header);
  return Number.isNaN(ms) ? undefined : Math.floor(ms / 1000);
}

const failed = (condition: string) => new S3Error("PreconditionFailed", "At least one of the pre-conditions you specified did not hold", { fields: { Condition: condition } });

/**
 * The read conditions under `prefix` ("" for a GET's, "x-amz-copy-source-" for a copy's source)
 * weighed against the object's ETag (as shown, quoted) and modification time, as RFC 9110 and S3
 * do: an If-Match that holds makes If-Unmodified-Since moot, and an If-None-Match present decides
 * alone (the ETag outranks the date). A failed If-Match or If-Unmodified-Since is a thrown 412;
 * answers the condition that says "not modified" (If-None-Match or If-Modified-Since), if one does.
 */
function weigh(headers: Headers, prefix: string, etag: string, modTime: number): "If-None-Match" | "If-Modified-Since" | undefined {
  const modified = Math.floor(modTime / 1000);
  const ifMatch = headers.get(`${prefix}if-match`);
  if (ifMatch !== null) {
    if (!etagListMatches(ifMatch, etag)) throw failed(`${prefix}If-Match`);
  } else {
    const since = seconds(headers.get(`${prefix}if-unmodified-since`));
    if (since !== undefined && modified > since) throw failed(`${prefix}If-Unmodified-Since`);
  }
  const ifNoneMatch = headers.get(`${prefix}if-none-match`);
  if (ifNoneMatch !== null) return etagListMatches(ifNoneMatch, etag) ? "If-None-Match" : undefined;
  const since = seconds(headers.get(`${prefix}if-modified-since`));
  return since !== undefined && modified <= since ? "If-Modified-Since" : undefined;
}

/** A read's preconditions: "proceed", "not-modified" (answer 304), or a thrown 412 PreconditionFailed. */
export function readCondition(headers: Headers, etag: string, modTime: number): "proceed" | "not-modified" {
  return weigh(headers, "", etag, modTime) ? "not-modified" : "proceed";
}

/** A copy's source conditions (`x-amz-copy-source-if-*`), weighed as a read's; each that fails is a
 * 412 PreconditionFailed, "not modified" included. */
export function copySourceCondition(headers: Headers, modTime: number, etag: string): void {
  const notModified = weigh(headers, "x-amz-copy-source-", etag, modTime);
  if (notModified) throw failed(`x-amz-copy-source-${notModified}`);
}

/**
 * A write's precondition on the object it would replace, tested with what is stored now (undefined:
 * no object of that name); undefined when the request states none. `etagOf` is how an object's
 * ETag shows. If-Match on a name with no object is 404 NoSuchKey, as on S3.
 */
export function writeCondition(headers: Headers, key: string, etagOf: (row: FileRow) => string): ((current: FileRow | undefined) => void) | undefined {
  const ifNoneMatch = headers.get("if-none-match");
  const ifMatch = headers.get("if-match");
  if (ifNoneMatch === null && ifMatch === null) return undefined;
  if (ifNoneMatch !== null && ifNoneMatch.trim() !== "*") throw s3Error("NotImplemented", "If-None-Match on a write takes only '*' (create the object only if there is none)");
  if (ifNoneMatch !== null && ifMatch !== null) throw s3Error("InvalidRequest", "A write takes If-Match or If-None-Match, not both");
  return (current) => {
    if (ifNoneMatch !== null) {
      if (current) throw failed("If-None-Match");
      return;
    }
    if (!current) throw s3Error("NoSuchKey", "The specified key does not exist.", { Key: key });
    if (!etagListMatches(ifMatch as string, etagOf(current))) throw failed("If-Match");
  };
}

/** What a conditional delete states of the object it would remove: its ETag (If-Match, `*` for
 * any), size in bytes, last-modified time; each absent when not stated. */
export interface DeleteConditions {
  ifMatch?: string;
  size?: string;
  lastModified?: string;
}

/**
 * A delete's precondition on the object it would remove, tested with what is stored (undefined:
 * none), as S3 does: If-Match on a name with no object is 404 NoSuchKey, an ETag that differs 412;
 * a size or last-modified time (whole seconds) that differs is 412, and with no object holds (the
 * delete of nothing is the usual 204). Undefined when none is stated; a size or time that is not
 * one is refused before anything is read.
 */
export function deleteCondition(c: DeleteConditions, key: string, etagOf: (row: FileRow) => string): ((current: FileRow | undefined) => void) | undefined {
  const { ifMatch } = c;
  if (ifMatch === undefined && c.size === undefined && c.lastModified === undefined) return undefined;
  const size = c.size === undefined ? undefined : c.size.trim();
  if (size !== undefined && !/^\d{1,16}$/.test(size)) throw s3Error("InvalidArgument", "x-amz-if-match-size must be a whole number of bytes", { ArgumentName: "x-amz-if-match-size", ArgumentValue: c.size as string });
  const at = c.lastModified === undefined ? undefined : Date.parse(c.lastModified);
  if (at !== undefined && Number.isNaN(at)) throw s3Error("InvalidArgument", "x-amz-if-match-last-modified-time must be a date", { ArgumentName: "x-amz-if-match-last-modified-time", ArgumentValue: c.lastModified as string });
  return (current) => {
    if (ifMatch !== undefined) {
      if (!current) throw s3Error("NoSuchKey", "The specified key does not exist.", { Key: key });
      if (!etagListMatches(ifMatch, etagOf(current))) throw failed("If-Match");
    }
    if (!current) return;
    if (size !== undefined && Number(size) !== Number(current.size)) throw failed("x-amz-if-match-size");
    if (at !== undefined && Math.floor(at / 1000) !== Math.floor(Number(current.modTime) / 1000)) throw failed("x-amz-if-match-last-modified-time");
  };
}
