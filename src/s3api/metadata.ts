/**
 * An S3 object's metadata: the headers a client stores with it (PutObject, CreateMultipartUpload,
 * CopyObject with `REPLACE`) and gets back on GetObject and HeadObject — Content-Type,
 * Cache-Control, Expires, Content-Disposition, Content-Encoding, Content-Language and the user's
 * own `x-amz-meta-*` (rclone keeps a file's mtime there). Kept as one JSON text in the file's row
 * (storage `files.metadata`): lower-case header names to values, as Unicode.
 *
 * Header values travel as bytes, and Node's and Bun's servers hand them over as Latin-1. A value
 * whose bytes are UTF-8 (what boto3 and aws-cli send for non-ASCII text) is read as UTF-8; an RFC
 * 2047 encoded word (`=?UTF-8?B?…?=`) is decoded. A value that is not plain ASCII goes back RFC
 * 2047-encoded, as S3 sends it: a header must be ASCII to pass every proxy and client.
 *
 * User metadata is bounded as on S3: 2 KB, counting the UTF-8 bytes of each name (after
 * `x-amz-meta-`) and value; more is refused with MetadataTooLarge.
 */
import { s3Error } from "./errors.ts";

/** Lower-case header name → value. */
export type Metadata = Record<string, string>;

/** The standard headers S3 stores with an object, and the `response-*` override of each. */
const STANDARD = ["content-type", "cache-control", "expires", "content-disposition", "content-encoding", "content-language"] as const;
const USER_PREFIX = "x-amz-meta-";
/** S3's bound on user metadata. */
export const MAX_USER_METADATA = 2048;

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** A header value as the text its client meant (see the module's comment). */
export function headerText(raw: string): string {
  let text = raw;
  // Latin-1 code units are the bytes that came: UTF-8 when they decode as such.
  if (/[\u0080-\u00ff]/.test(raw) && !/[^\u0000-\u00ff]/.test(raw)) {
    try {
      text = utf8.decode(Buffer.from(raw, "latin1"));
    } catch {
      // Not UTF-8: the bytes were Latin-1 after all.
    }
  }
  return decodeWords(text);
}

/** RFC 2047 encoded words (`=?charset?B|Q?text?=`) in UTF-8 or Latin-1 decoded; anything else left as it is. */
function decodeWords(text: string): string {
  if (!text.includes("=?")) return text;
  // Whitespace between two encoded words is not part of the text (RFC 2047 §6.2).
  return text.replace(/(=\?[^?\s]+\?[bBqQ]\?[^?\s]*\?=)\s+(?==\?)/g, "$1").replace(/=\?([^?\s]+)\?([bBqQ])\?([^?\s]*)\?=/g, (word, charset: string, mode: string, body: string) => {
    const cs = charset.toLowerCase().split("*")[0];
    if (cs !== "utf-8" && cs !== "iso-8859-1" && cs !== "us-ascii") return word;
    const bytes = mode.toUpperCase() === "B" ? Buffer.from(body, "base64") : Buffer.from(body.replace(/_/g, " ").replace(/=([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16))), "latin1");
    try {
      return cs === "utf-8" ? utf8.decode(bytes) : bytes.toString("latin1");
    } catch {
      return word;
    }
  });
}

/** A value as a header carries it: as it is when printable ASCII, else one RFC 2047 word in UTF-8 base64 (as S3 sends it). */
export function headerValue(text: string): string {
  if (/^[\u0020-\u007e]*$/.test(text)) return text;
  return `=?UTF-8?B?${Buffer.from(text, "utf8").toString("base64")}?=`;
}

/**
 * Content-Encoding as stored: `aws-chunked` names how the request's body was framed (SigV4
 * streaming), not the object's encoding, so S3 drops it from the list.
 */
function storedEncoding(value: string): string | undefined {
  const rest = value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "" && s.toLowerCase() !== "aws-chunked");
  return rest.length > 0 ? rest.join(", ") : undefined;
}

/** The metadata a write request gives its object; MetadataTooLarge past S3's 2 KB of user metadata. */
export function metadataOf(headers: Headers): Metadata {
  const out: Metadata = {};
  for (const name of STANDARD) {
    const raw = headers.get(name);
    if (raw === null) continue;
    const value = name === "content-encoding" ? storedEncoding(raw) : headerText(raw);
    if (value !== undefined) out[name] = value;
  }
  let userBytes = 0;
  headers.forEach((raw, name) => {
    if (!name.startsWith(USER_PREFIX)) return;
    const value = headerText(raw);
    out[name] = value;
    userBytes += Buffer.byteLength(name.slice(USER_PREFIX.length)) + Buffer.byteLength(value);
  });
  if (userBytes > MAX_USER_METADATA) throw s3Error("MetadataTooLarge", `Your metadata headers exceed the maximum allowed metadata size: at most ${MAX_USER_METADATA} bytes of x-amz-meta-* names and values`, { Size: String(userBytes), MaxSizeAllowed: String(MAX_USER_METADATA) });
  return out;
}

/** The JSON text a file row keeps (null for none). */
export const storedMetadata = (m: Metadata): string | null => (Object.keys(m).length > 0 ? JSON.stringify(m) : null);

/** A file row's metadata; a row without any (or one not written by this module) has none. */
export function readMetadata(text: string | null | undefined): Metadata {
  if (!text) return {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return {};
    const out: Metadata = {};
    for (const [k, v] of Object.entries(parsed)) if (typeof v === "string") out[k] = v;
    return out;
  } catch {
    return {};
  }
}

/** The headers a GET or HEAD answers for stored metadata (the content headers among them are the caller's to vet). */
export function metadataHeaders(m: Metadata): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(m)) out[name] = headerValue(value);
  return out;
}

/**
 * GetObject's `response-content-type`, `response-cache-control`, … : the headers to answer in
 * place of the stored ones (a presigned download link names the file and type it saves as).
 */
export function responseOverrides(q: URLSearchParams): Metadata {
  const out: Metadata = {};
  for (const name of STANDARD) {
    const value = q.get(`response-${name}`);
    if (value !== null) out[name] = value;
  }
  return out;
}
