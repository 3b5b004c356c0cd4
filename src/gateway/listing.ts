/**
 * A directory's listing as the path gateway shows it: a plain HTML page of our own, with each
 * entry's name, size and CID. Every name comes from the content (anyone's), so every text is
 * escaped and every link is a relative, percent-encoded path: a name can neither close a tag nor
 * point a link elsewhere. The page has no script and no style (it is sent under
 * `default-src 'none'` like every other answer of the path gateway).
 *
 * @example
 *   directoryListing({ title: "/ipfs/bafy…/docs/", parent: true, entries, more: false, cidHref: (c) => `/ipfs/${c}` })
 */
import type { DirEntry } from "./resolve.ts";

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);

/** A relative link to a name in this directory: `./` first, so a name such as `javascript:x` or `//host` stays a path. */
const hrefOf = (name: string) => `./${encodeURIComponent(name)}`;

function sizeText(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(1)} ${units[u]}`;
}

export interface Listing {
  /** The directory's path as shown, e.g. `/ipfs/bafy…/docs/`. */
  title: string;
  /** Whether a link to the parent directory is shown (not at the root). */
  parent: boolean;
  entries: readonly DirEntry[];
  /** Entries were left out (a listing shows a bounded number). */
  more: boolean;
  /** The path gateway's URL of a CID (a link beside each entry); none: the CID is shown unlinked. */
  cidHref?: (cid: string) => string;
}

export function directoryListing(l: Listing): string {
  const rows = l.entries.map((e) => {
    const cid = e.cid.toString();
    const code = `<code>${escapeHtml(cid)}</code>`;
    const shown = l.cidHref ? `<a href="${escapeHtml(l.cidHref(cid))}">${code}</a>` : code;
    return `<tr><td><a href="${escapeHtml(hrefOf(e.name))}">${escapeHtml(e.name)}</a></td><td>${escapeHtml(sizeText(e.size))}</td><td>${shown}</td></tr>`;
  });
  const up = l.parent ? `<tr><td><a href="../">..</a></td><td></td><td></td></tr>` : "";
  const more = l.more ? `<p>Only the first ${l.entries.length} entries are shown. The whole directory is in its CAR: <code>?format=car</code>.</p>` : "";
  return `<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(l.title)}</title></head>
<body><h1>Index of <code>${escapeHtml(l.title)}</code></h1>
<table><thead><tr><th align="left">Name</th><th align="left">Size</th><th align="left">CID</th></tr></thead><tbody>
${up}${rows.join("\n")}
</tbody></table>${more}
</body></html>
`;
}
