/**
 * The headers of every answer that carries bytes a user stored — an HTTP download, S3
 * `GetObject`/`HeadObject`, the trustless gateway — so that those bytes never run in one of the
 * gateway's origins. The main port serves the console (whose `script-src 'self'` would otherwise run
 * an uploaded script) and the account API; the S3 port is the same site (cookies ignore ports).
 *
 * - `X-Content-Type-Options: nosniff`: the type sent is the type used; a browser never guesses
 *   HTML or script out of bytes sent as something else.
 * - `Content-Security-Policy: sandbox; default-src 'none'`: a document made from these bytes has
 *   an opaque origin, runs no script and loads nothing, even where a browser renders it.
 * - `Content-Disposition: attachment` for every type a browser would render as a document or run
 *   (anything not known to be passive: HTML, XHTML, SVG, XML, PDF, CSS, JavaScript, …). Passive
 *   types (raster images, audio, video, plain text) may show inline where the caller allows it.
 * - A script is never sent with a script type: `<script src>` and workers ignore both the
 *   attachment and the sandbox, and only a non-script type under `nosniff` stops them. A script's
 *   bytes go out as `text/plain` (the name, and so the saved file, keep their extension).
 *
 * @example
 *   userContentHeaders({ name: "page.html" })
 *   // { "content-type": "text/html;charset=utf-8", "content-disposition": "attachment; filename=…",
 *   //   "x-content-type-options": "nosniff", "content-security-policy": "sandbox; default-src 'none'" }
 */
import { contentDisposition } from "./range.ts";

/** What a document made of user bytes may do: nothing (an opaque origin, no script, no loads). */
export const USER_CONTENT_POLICY = "sandbox; default-src 'none'";

/** The type a script's bytes are sent as. */
const NOT_A_SCRIPT = "text/plain; charset=utf-8";

/** JavaScript MIME type essences (WHATWG MIME Sniffing): what a browser runs as a script. */
const SCRIPT_TYPES = new Set([
  "application/ecmascript",
  "application/javascript",
  "application/x-ecmascript",
  "application/x-javascript",
  "text/ecmascript",
  "text/javascript",
  "text/javascript1.0",
  "text/javascript1.1",
  "text/javascript1.2",
  "text/javascript1.3",
  "text/javascript1.4",
  "text/javascript1.5",
  "text/jscript",
  "text/livescript",
  "text/x-ecmascript",
  "text/x-javascript",
]);

/** Types a browser shows without a document of its own that could run anything. SVG is an image
 * type that is a document (scripts, links), so it is not among them. */
const PASSIVE_TYPES = new Set(["text/plain", "text/csv", "application/json", "application/octet-stream"]);
const PASSIVE_FAMILIES = ["image/", "audio/", "video/", "font/"];

/** A Content-Type's essence: the type/subtype, lower-cased, without parameters. */
const essence = (type: string) => (type.split(";")[0] as string).trim().toLowerCase();

/** Whether a browser could render bytes of this type as a document or run them: such bytes are
 * only ever sent as an attachment. */
export function isActiveType(type: string): boolean {
  const e = essence(type);
  if (e.endsWith("+xml") || e.endsWith("/xml")) return true;
  return !(PASSIVE_TYPES.has(e) || PASSIVE_FAMILIES.some((f) => e.startsWith(f)));
}

/** The type a stored file is sent as, from its name (unknown: application/octet-stream). */
export const typeOfName = (name: string) => Bun.file(name).type || "application/octet-stream";

export interface UserContent {
  /** The file's name: its type when `type` is not given, and the attachment's file name. */
  name: string;
  /** The type to send (default: from the name). */
  type?: string;
  /** `always` (default): an attachment whatever the type; `active`: only when the type is active
   * (S3 sends passive types without a disposition, as S3 does). */
  attachment?: "always" | "active";
  /** A disposition the owner stored with the file (S3 metadata): sent as it is, unless the type
   * is active and it is not an attachment — those bytes still go only as an attachment. */
  disposition?: string;
}

/** Content-Type, Content-Disposition (when one is due), nosniff and the sandbox policy. */
export function userContentHeaders({ name, type = typeOfName(name), attachment = "always", disposition }: UserContent): Record<string, string> {
  const headers: Record<string, string> = {
    "content-type": SCRIPT_TYPES.has(essence(type)) ? NOT_A_SCRIPT : type,
    "x-content-type-options": "nosniff",
    "content-security-policy": USER_CONTENT_POLICY,
  };
  const mustAttach = attachment === "always" || isActiveType(type);
  if (disposition !== undefined && (!mustAttach || /^\s*attachment\s*(;|$)/i.test(disposition))) headers["content-disposition"] = disposition;
  else if (mustAttach) headers["content-disposition"] = contentDisposition(name);
  return headers;
}
