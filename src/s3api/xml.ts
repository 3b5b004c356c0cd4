/**
 * The S3 API's XML, both ways: results and errors rendered from plain data (an element tree of
 * strings), and the two request documents clients send (Delete, CompleteMultipartUpload) read
 * back. Those request documents are flat and fixed, so a few patterns read them; no XML parser
 * is needed, and nothing in them (entities, namespaces, DTDs) is ever expanded beyond the five
 * predefined entities and numeric references.
 */
import { S3Error, s3Error } from "./errors.ts";

const NS = "http://s3.amazonaws.com/doc/2006-03-01/";

/** An element's content: text, child elements (an array of entries keeps repeats and order), or nothing. */
export type Node = string | number | boolean | undefined | null | [string, Node][];

export function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c] as string);
}

/** `name` may carry attributes after a space (`Grantee xsi:type="CanonicalUser"`), written as they are. */
function render(name: string, node: Node): string {
  if (node === undefined || node === null) return "";
  const close = name.split(" ", 1)[0];
  if (Array.isArray(node)) return `<${name}>${node.map(([n, v]) => render(n, v)).join("")}</${close}>`;
  return `<${name}>${escapeXml(String(node))}</${close}>`;
}

/** A whole document: the root element in S3's namespace. */
export function xmlDocument(root: string, children: [string, Node][]): string {
  const inner = children.map(([n, v]) => render(n, v)).join("");
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${root} xmlns="${NS}">${inner}</${root}>`;
}

export function xmlResponse(root: string, children: [string, Node][], init: { status?: number; headers?: Record<string, string> } = {}): Response {
  return new Response(xmlDocument(root, children), { status: init.status ?? 200, headers: { "content-type": "application/xml", ...init.headers } });
}

/** An S3 error document (no namespace, as S3 sends it). */
export function errorXml(err: S3Error, resource: string, requestId: string): string {
  const fields = Object.entries(err.extra.fields ?? {}).map(([n, v]) => render(n, v)).join("");
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Error>${render("Code", err.code)}${render("Message", err.message)}${fields}${render("Resource", resource)}${render("RequestId", requestId)}</Error>`;
}

export function errorResponse(err: S3Error, resource: string, requestId: string, head = false): Response {
  const headers = { "content-type": "application/xml", "x-amz-request-id": requestId, ...err.extra.headers };
  return new Response(head ? null : errorXml(err, resource, requestId), { status: err.status, headers });
}

/** XML 1.0's Char: what a character reference may name (no NUL and most controls, no surrogate,
 * no U+FFFE/U+FFFF, nothing past U+10FFFF). */
const isXmlChar = (c: number) => c === 0x9 || c === 0xa || c === 0xd || (c >= 0x20 && c <= 0xd7ff) || (c >= 0xe000 && c <= 0xfffd) || (c >= 0x10000 && c <= 0x10ffff);

function unescapeXml(s: string): string {
  return s.replace(/&(#x[0-9a-fA-F]+|#\d+|amp|lt|gt|quot|apos);/g, (_, e: string) => {
    if (e[0] === "#") {
      // Parsed as written, however long: a number past the range is refused, never rounded into it.
      const code = e[1] === "x" ? Number.parseInt(e.slice(2), 16) : Number(e.slice(1));
      if (!isXmlChar(code)) throw malformed();
      return String.fromCodePoint(code);
    }
    return ({ amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" } as Record<string, string>)[e] as string;
  });
}

/** The text of each `<tag>…</tag>` inside `xml`, in order. */
function texts(xml: string, tag: string): string[] {
  return [...xml.matchAll(new RegExp(`<${tag}(?:\\s[^>]*)?>([\\s\\S]*?)</${tag}>`, "g"))].map((m) => unescapeXml(m[1] as string));
}

const malformed = () => s3Error("MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema");

/** A key a DeleteObjects body names, with the conditions and version it states for it (absent
 * when not stated): `<ETag>` (If-Match), `<Size>`, `<LastModifiedTime>`, `<VersionId>`. */
export interface DeleteEntry {
  key: string;
  versionId?: string;
  etag?: string;
  size?: string;
  lastModified?: string;
}

/** A DeleteObjects body: the keys (with what each states), and whether only errors are wanted back (Quiet). */
export function parseDelete(xml: string): { objects: DeleteEntry[]; quiet: boolean } {
  if (!/<Delete[\s>]/.test(xml)) throw malformed();
  const bodies = [...xml.matchAll(/<Object(?:\s[^>]*)?>([\s\S]*?)<\/Object>/g)].map((m) => m[1] as string);
  const objects = bodies.map((o): DeleteEntry => {
    const key = texts(o, "Key")[0];
    if (key === undefined) throw malformed();
    const [versionId, etag, size, lastModified] = ["VersionId", "ETag", "Size", "LastModifiedTime"].map((t) => texts(o, t)[0]?.trim());
    return { key, versionId, etag, size, lastModified };
  });
  if (objects.length === 0 || objects.length > 1000) throw malformed();
  return { objects, quiet: texts(xml, "Quiet")[0]?.trim() === "true" };
}

/** A part a CompleteMultipartUpload names: its number, the ETag the client holds for it, and the
 * flexible checksums it gives (`CRC32` → its value, from `<ChecksumCRC32>`). */
export interface NamedPart {
  partNumber: number;
  etag: string;
  checksums: Record<string, string>;
}

/** A CompleteMultipartUpload body: the parts named, with the ETags (and checksums) the client holds for them. */
export function parseComplete(xml: string): NamedPart[] {
  if (!/<CompleteMultipartUpload[\s>]/.test(xml)) throw malformed();
  const parts = [...xml.matchAll(/<Part(?:\s[^>]*)?>([\s\S]*?)<\/Part>/g)].map((m) => {
    const n = texts(m[1] as string, "PartNumber")[0]?.trim();
    const etag = texts(m[1] as string, "ETag")[0]?.trim();
    if (n === undefined || !/^\d{1,5}$/.test(n) || etag === undefined) throw malformed();
    const checksums: Record<string, string> = {};
    for (const c of (m[1] as string).matchAll(/<Checksum([A-Z0-9]+)>([^<]*)<\/Checksum\1>/g)) checksums[c[1] as string] = (c[2] as string).trim();
    return { partNumber: Number(n), etag: etag.replace(/^"|"$/g, ""), checksums };
  });
  if (parts.length === 0) throw malformed();
  return parts;
}
