/**
 * The separate origin sites are served from (D23, STOWAGE_GATEWAY_ORIGIN): never the gateway's own
 * origin, where the console and the account API live and where user bytes therefore never run.
 *
 * Two forms:
 * - a subdomain gateway, `https://{cid}.ipfs.gw.example`: each CID is an origin of its own (its
 *   label is the CIDv1 in base32, which DNS names can hold), so one site cannot read another's
 *   storage or cookies. `/` of `bafy….ipfs.gw.example` is the root of that CID.
 * - a plain origin, `https://gw.example`: sites at `/ipfs/<cid>/…`, all sharing that one origin.
 *
 * Requests reach the gateway's own listener with that Host (a DNS wildcard and a proxy that keeps
 * the Host); `siteRequest` tells them apart from the gateway's own.
 *
 * @example
 *   const site = parseSiteOrigin("https://{cid}.ipfs.gw.example")
 *   siteUrl(site, CID.parse("bafy…"), "docs/", "")   // "https://bafy….ipfs.gw.example/docs/"
 *   siteRequest(site, new URL("https://bafy….ipfs.gw.example/a.html"))   // { cid: "bafy…", path: "/a.html" }
 */
import type { CID } from "multiformats/cid";

const PLACEHOLDER = "{cid}";

export interface SiteOrigin {
  /** As configured, without a trailing slash. */
  text: string;
  protocol: "http:" | "https:";
  /** true: `{cid}.` before `host`. */
  subdomain: boolean;
  /** The host (lower case, with `:port` when one is given), below the CID label for a subdomain gateway. */
  host: string;
}

/** Parses STOWAGE_GATEWAY_ORIGIN; throws with a message for the setting's error. */
export function parseSiteOrigin(raw: string): SiteOrigin {
  const text = raw.trim().replace(/\/$/, "");
  const subdomain = text.includes(PLACEHOLDER);
  const probe = subdomain ? text.replace(PLACEHOLDER, "cid") : text;
  let url: URL;
  try {
    url = new URL(probe);
  } catch {
    throw new Error("must be an origin such as https://{cid}.ipfs.gw.example or https://gw.example");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("must be an http:// or https:// origin");
  if (url.pathname !== "/" || url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "") throw new Error("must be an origin alone: no path, query or user");
  if (subdomain && !url.hostname.startsWith("cid.")) throw new Error("{cid} must be the first label of the host, such as https://{cid}.ipfs.gw.example");
  if (subdomain && text.split(PLACEHOLDER).length !== 2) throw new Error("{cid} must appear once");
  const host = subdomain ? url.host.slice("cid.".length) : url.host;
  return { text, protocol: url.protocol, subdomain, host: host.toLowerCase() };
}

/** Whether `url` (the gateway's own public URL) is on the site origin: refused, sites would then run where the console does. */
export function sameOrigin(site: SiteOrigin, url: string): boolean {
  const u = new URL(url);
  return !site.subdomain && u.protocol === site.protocol && u.host.toLowerCase() === site.host;
}

/** A CID as a DNS label: CIDv1 in base32 (lower case, ≤ 63 characters for the CIDs this gateway makes). */
export const cidLabel = (cid: CID) => cid.toV1().toString();

/** Where the site origin serves `cid` with `path` below it (no leading `/`, kept encoded) and `search`. */
export function siteUrl(site: SiteOrigin, cid: CID, path: string, search: string): string {
  if (site.subdomain) return `${site.protocol}//${cidLabel(cid)}.${site.host}/${path}${search}`;
  return `${site.text}/ipfs/${cidLabel(cid)}/${path}${search}`;
}

/**
 * What a request on `url` asks of the site origin: a CID (as its label or path segment says) and
 * the rest of the path (`/…`, still encoded); "elsewhere" for a path the site origin does not
 * serve (the plain form serves `/ipfs/…` only); undefined when `url` is not on the site origin.
 */
export function siteRequest(site: SiteOrigin, url: URL): { cid: string; path: string } | "elsewhere" | undefined {
  const host = url.host.toLowerCase();
  if (site.subdomain) {
    if (!host.endsWith(`.${site.host}`)) return undefined;
    const label = host.slice(0, -site.host.length - 1);
    if (label.includes(".")) return undefined;
    return { cid: label, path: url.pathname };
  }
  if (host !== site.host) return undefined;
  const m = /^\/ipfs\/([^/]+)(\/.*)?$/.exec(url.pathname);
  if (!m) return "elsewhere";
  return { cid: m[1] as string, path: m[2] ?? "" };
}
