/**
 * The headers that keep the path gateway's files from running on the gateway's own origin (D23),
 * where the console and the account API live: the type sent is the type used (`nosniff`); a
 * document made of these bytes has an opaque origin, runs no script and loads nothing
 * (`Content-Security-Policy: sandbox; default-src 'none'`); whatever a browser would render as a
 * document or run (HTML, SVG, XML, JavaScript, PDF, CSS, …: anything not known to be passive) is
 * an attachment; and a script's bytes never go out with a script type (`<script src>` and
 * workers ignore both the attachment and the sandbox; only a non-script type under `nosniff`
 * stops them). Passive types (raster images, audio, video, fonts, plain text, JSON) show inline.
 *
 * One function, the same contract as the shared helper for every answer of user bytes, so the
 * path gateway moves to that helper by a rename.
 *
 * @example
 *   userBytesHeaders({ name: "page.html" })
 *   // content-type text/html, content-disposition attachment, nosniff, the sandbox
 */
import { contentDisposition } from "../http/range.ts";

/** What a document made of user bytes may do: nothing. */
export const USER_BYTES_POLICY = "sandbox; default-src 'none'";

/** Scripts' types (WHATWG MIME Sniffing's JavaScript MIME type essences). */
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
const PASSIVE_TYPES = new Set(["text/plain", "text/csv", "application/json", "application/octet-stream"]);
const PASSIVE_FAMILIES = ["image/", "audio/", "video/", "font/"];

const essence = (type: string) => (type.split(";")[0] as string).trim().toLowerCase();

/** Whether a browser could render bytes of this type as a document, or run them. SVG is an
 * image type that is a document (scripts, links): active. */
export function isActiveType(type: string): boolean {
  const e = essence(type);
  if (e.endsWith("+xml") || e.endsWith("/xml")) return true;
  return !(PASSIVE_TYPES.has(e) || PASSIVE_FAMILIES.some((f) => e.startsWith(f)));
}

/** The type of a file by its name (unknown: application/octet-stream). */
export const typeOfName = (name: string) => Bun.file(name).type || "application/octet-stream";

/** Content-Type, nosniff, the sandbox, and an attachment for an active type (`always`: for any). */
export function userBytesHeaders({ name, type = typeOfName(name), attachment = "active" }: { name: string; type?: string; attachment?: "always" | "active" }): Record<string, string> {
  const headers: Record<string, string> = {
    "content-type": SCRIPT_TYPES.has(essence(type)) ? "text/plain; charset=utf-8" : type,
    "x-content-type-options": "nosniff",
    "content-security-policy": USER_BYTES_POLICY,
  };
  if (attachment === "always" || isActiveType(type)) headers["content-disposition"] = contentDisposition(name);
  return headers;
}
