/**
 * What S3's listings share (ListObjects, ListMultipartUploads, ListParts, GetObjectAttributes'
 * parts): their page sizes and part-number markers as query values, folding names into
 * CommonPrefixes under a delimiter, resuming past a folded prefix, and `encoding-type=url`.
 *
 * @example
 *   const fold = folding(prefix, delimiter)
 *   const common = fold("photos/2024/a.jpg")   // "photos/" with prefix "" and delimiter "/"
 *   after = pastPrefix(common)                  // the next query skips every name under it
 */
import { s3Error } from "./errors.ts";

/** The most entries one page holds (S3's own). */
export const PAGE_MAX = 1000;

/** A page's size (max-parts, max-uploads): a whole number, a larger one capped at PAGE_MAX as S3
 * caps it; PAGE_MAX when absent. */
export function pageSize(raw: string | null, name: string): number {
  if (raw === null) return PAGE_MAX;
  if (!/^\d{1,9}$/.test(raw.trim())) throw s3Error("InvalidArgument", `${name} must be a whole number (at most ${PAGE_MAX} are listed at once)`, { ArgumentName: name, ArgumentValue: raw });
  return Math.min(Number(raw.trim()), PAGE_MAX);
}

/** A part-number marker: a whole number (0, the start, when absent or empty). */
export function pageMarker(raw: string | null, name: string): number {
  if (raw === null || raw.trim() === "") return 0;
  if (!/^\d{1,9}$/.test(raw.trim())) throw s3Error("InvalidArgument", `${name} must be a whole number`, { ArgumentName: name, ArgumentValue: raw });
  return Number(raw.trim());
}

/** The prefix a name folds into under `delimiter` past `prefix` (through the delimiter), if it does. */
export function folding(prefix: string, delimiter: string): (name: string) => string | undefined {
  return (name) => {
    if (!delimiter || !name.startsWith(prefix)) return undefined;
    const at = name.indexOf(delimiter, prefix.length);
    return at < 0 ? undefined : name.slice(0, at + delimiter.length);
  };
}

/** A name after every name that starts with `p` (in byte order, as listings sort): names after a
 * folded prefix sort after it only once they no longer start with it. */
export const pastPrefix = (p: string) => `${p}\u{10FFFF}`;

/** How a listing spells names back: as they are, or URI-encoded (`encoding-type=url`, `/` kept). */
export const nameEncoder = (urlEncoded: boolean) => (s: string) => (urlEncoded ? encodeURIComponent(s).replace(/%2F/g, "/") : s);

/**
 * One page of a listing in name order, at most `max` entries counting rows and folded prefixes
 * alike. `fetch` reads up to `limit` rows after a cursor (`start`, then the last row's
 * `cursorOf`, or `pastFold` of a prefix just folded, so the next read skips every name under it).
 * Answers the rows and prefixes, whether more follow, and the page's last entry: a folded
 * prefix's name, or a row's.
 */
export async function foldedPage<R extends { name: string }, C>(o: {
  max: number;
  fold: (name: string) => string | undefined;
  start: C;
  fetch: (after: C, limit: number) => Promise<R[]>;
  cursorOf: (row: R) => C;
  pastFold: (prefix: string) => C;
}): Promise<{ rows: R[]; prefixes: string[]; truncated: boolean; last?: { name: string; row?: R } }> {
  const rows: R[] = [];
  const prefixes: string[] = [];
  let last: { name: string; row?: R } | undefined;
  let after = o.start;
  outer: while (o.max > 0) {
    const limit = Math.min(PAGE_MAX, o.max + 1);
    const batch = await o.fetch(after, limit);
    for (const row of batch) {
      if (rows.length + prefixes.length >= o.max) return { rows, prefixes, truncated: true, last };
      const common = o.fold(row.name);
      if (common !== undefined) {
        prefixes.push(common);
        last = { name: common };
        after = o.pastFold(common);
        continue outer; // the names under `common` are skipped by the next read
      }
      rows.push(row);
      last = { name: row.name, row };
      after = o.cursorOf(row);
    }
    if (batch.length < limit) break;
  }
  return { rows, prefixes, truncated: false, last };
}
