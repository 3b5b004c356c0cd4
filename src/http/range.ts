/**
 * Download headers a route reads and writes: the one range of a `Range` header (RFC 9110) and a
 * Content-Disposition that carries any file name (RFC 6266).
 *
 * @example
 *   parseRange("bytes=0-99", 1000)   // { start: 0, end: 99 }
 *   contentDisposition("ünï.txt")    // attachment; filename="__n_.txt"; filename*=UTF-8''%C3%BC…
 */

/** Inclusive byte range, as HTTP Range gives it. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * The one range of a `Range: bytes=…` header, `"unsatisfiable"` (416), or undefined for the whole
 * body (no header, several ranges or a malformed one: RFC 9110 lets the server ignore it).
 */
export function parseRange(header: string | null, size: number): ByteRange | "unsatisfiable" | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return undefined;
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size) return "unsatisfiable";
  if (end < start) return undefined;
  return { start, end };
}

/** RFC 6266 Content-Disposition: an ASCII fallback and the exact UTF-8 name. */
export function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\%]/g, "_");
  const encoded = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}
