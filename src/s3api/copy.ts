/**
 * What CopyObject and UploadPartCopy read from their request besides the source's name and
 * conditions (objects.ts `checkCopySource`): the metadata directive (COPY keeps the
 * source's metadata, REPLACE takes the request's: the usual way to change a stored object's type
 * in place) and a part's `x-amz-copy-source-range`. The copying itself is objects.ts's and
 * multipart.ts's, through the same metered writes as an upload.
 */
import type { ByteRange } from "../http/range.ts";
import { s3Error } from "./errors.ts";

/** `x-amz-metadata-directive`: COPY (the default) or REPLACE. */
export function metadataDirective(headers: Headers): "COPY" | "REPLACE" {
  const raw = headers.get("x-amz-metadata-directive");
  if (raw === null || raw === "COPY") return "COPY";
  if (raw === "REPLACE") return "REPLACE";
  throw s3Error("InvalidArgument", "Unknown metadata directive: send COPY or REPLACE", { ArgumentName: "x-amz-metadata-directive", ArgumentValue: raw });
}

/** `x-amz-copy-source-range: bytes=first-last` within a source of `size` bytes; absent, the whole source. */
export function copyRange(header: string | null, size: number): ByteRange | undefined {
  if (header === null) return undefined;
  const m = /^bytes=(\d+)-(\d+)$/.exec(header.trim());
  if (!m) throw s3Error("InvalidArgument", "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy", { ArgumentName: "x-amz-copy-source-range", ArgumentValue: header });
  const start = Number(m[1]);
  const end = Number(m[2]);
  if (start > end || end >= size) throw s3Error("InvalidArgument", `Range specified is not valid for source object of size: ${size}`, { ArgumentName: "x-amz-copy-source-range", ArgumentValue: header });
  return { start, end };
}
