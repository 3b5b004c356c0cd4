/**
 * The IPFS gateways' HTTP side (D17, D25). The Request is read here and nowhere below.
 *
 * - `GET|HEAD /ipfs/<cid>` is the storage routes' (a download, spec row 5); they hand it here
 *   first: asked as a raw block or a CAR (Accept or `?format=`) it is the trustless gateway's
 *   (`trustlessAnswer`); with no voucher (`size`, `sign`) it is the path gateway's (`pathAnswer`);
 *   else it stays the download.
 * - `GET|HEAD /ipfs/<cid>/<path>` is the path gateway's (`pathRoutes`).
 * - With STOWAGE_GATEWAY_ORIGIN set, every request on that origin is the path gateway's, as a site
 *   (`siteRoutes`), and a browser opening a path-gateway URL on this origin is sent there (301).
 */
import { Elysia, t } from "elysia";
import { CID } from "multiformats/cid";
import { clientIp } from "../http/client-ip.ts";
import { StorageError, storageError } from "../http/errors.ts";
import { access, storageErrors } from "../http/openapi.ts";
import type { PathAnswer, PathRequest } from "./path.ts";
import type { Gateway, TrustlessAnswer } from "./service.ts";
import { siteRequest, siteUrl } from "./site.ts";

function toResponse(answer: TrustlessAnswer | PathAnswer): Response {
  return new Response(answer.body ?? null, { status: answer.status, headers: answer.headers });
}

/** The gateway's answer, or undefined when the request is no trustless one (a download). */
export function trustlessAnswer(gateway: Gateway | undefined, request: Request, type: string, cid: string, query: Record<string, string | undefined>): Promise<Response> | undefined {
  if (!gateway || type !== "ipfs") return undefined;
  const want = gateway.wants(request.headers.get("accept"), query);
  if (!want) return undefined;
  return gateway
    .serve({ cid, want, head: request.method === "HEAD", client: clientIp(request), ifNoneMatch: request.headers.get("if-none-match"), query })
    .then(toResponse);
}

/** A browser opening a page (not a script or an image fetching it): what is sent to the site origin. */
function isNavigation(request: Request): boolean {
  const mode = request.headers.get("sec-fetch-mode");
  if (mode !== null) return mode === "navigate";
  return (request.headers.get("accept") ?? "").includes("text/html");
}

const PATH = /^\/ipfs\/([^/]+)(\/.*)?$/;

/** The path gateway's request from a URL's parts. */
function pathRequest(request: Request, url: URL, cid: string, path: string, site: boolean, base: string): PathRequest {
  const filename = url.searchParams.get("filename") ?? undefined;
  return {
    cid,
    path,
    search: url.search,
    head: request.method === "HEAD",
    client: clientIp(request),
    range: request.headers.get("range"),
    ifNoneMatch: request.headers.get("if-none-match"),
    filename,
    download: url.searchParams.get("download") === "true",
    site,
    base,
  };
}

/**
 * The path gateway's answer to `GET|HEAD /ipfs/<cid>[/<path>]` on this origin, or undefined when
 * it is not the path gateway's: another type, a voucher on `/ipfs/<cid>` (the download), or no
 * gateway. A trustless request with a path is refused (406): blocks and CARs are asked by CID.
 */
export function pathAnswer(gateway: Gateway | undefined, request: Request, query: Record<string, string | undefined>): Promise<Response> | undefined {
  if (!gateway || (request.method !== "GET" && request.method !== "HEAD")) return undefined;
  const url = new URL(request.url);
  const m = PATH.exec(url.pathname);
  if (!m) return undefined;
  const [cid, path] = [m[1] as string, m[2] ?? ""];
  if (path === "" && (query.size !== undefined || query.sign !== undefined)) return undefined;
  return (async () => {
    if (path !== "" && path !== "/" && gateway.wants(request.headers.get("accept"), query)) {
      throw storageError.notAcceptable("a raw block or a CAR is asked by its CID alone: /ipfs/<cid>?format=raw|car");
    }
    if (gateway.site && isNavigation(request)) {
      let parsed: CID;
      try {
        parsed = CID.parse(cid);
      } catch {
        throw storageError.badRequest("not a Cid");
      }
      // Sites run on their own origin, never this one (D23): the browser is sent there.
      return new Response(null, { status: 301, headers: { location: siteUrl(gateway.site, parsed, path.replace(/^\//, ""), url.search), "cache-control": "public, max-age=29030400, immutable" } });
    }
    return toResponse(await gateway.servePath(pathRequest(request, url, cid, path, false, `/ipfs/${cid}`)));
  })();
}

/** The path gateway on paths below a CID, `GET|HEAD /ipfs/<cid>/<path>`. */
export const pathRoutes = (gateway: Gateway) =>
  new Elysia({ name: "path-gateway" })
    // HEAD here too: Elysia answers a dynamic route's HEAD with its GET and then sets the (empty) body's length.
    .onRequest(({ request }) => {
      if (request.method !== "HEAD") return;
      const { pathname } = new URL(request.url);
      const m = PATH.exec(pathname);
      if (!m || (m[2] ?? "") === "") return;
      return pathAnswer(gateway, request, Object.fromEntries(new URL(request.url).searchParams));
    })
    .get("/ipfs/:cid/*", ({ request, query }) => pathAnswer(gateway, request, query) as Promise<Response>, {
      query: t.Record(t.String(), t.String()),
      detail: {
        summary:
          "Path gateway: a file or directory below a public, free CID (no voucher). Range, ETag, If-None-Match, HEAD; a directory's listing (…/dir/); ?filename= and ?download=true. Files never run on this origin: X-Content-Type-Options: nosniff, Content-Security-Policy: sandbox; default-src 'none', HTML, SVG, XML and JavaScript as attachments. With STOWAGE_GATEWAY_ORIGIN set, a browser opening it is sent there (301)",
        tags: ["ipfs"],
        ...access.public,
      },
      response: {
        200: t.Unknown({ description: "The file's bytes (a range of them for 206), or a directory's HTML listing" }),
        206: t.Unknown({ description: "A range of the file" }),
        301: t.Unknown({ description: "A directory asked without its trailing /, or a browser sent to the site origin (STOWAGE_GATEWAY_ORIGIN)" }),
        304: t.Unknown({ description: "If-None-Match named its ETag" }),
        ...storageErrors(400, 403, 404, 406, 410, 416, 429),
      },
    });

/**
 * Requests on the site origin (STOWAGE_GATEWAY_ORIGIN): every one is the path gateway's, as a
 * site — files as they are, a directory's index.html — or the trustless gateway's when asked so.
 * Nothing else of the gateway (console, account API, uploads) answers there.
 */
export const siteRoutes = (gateway: Gateway) =>
  new Elysia({ name: "site-origin" }).onRequest(async ({ request }) => {
    const site = gateway.site;
    if (!site) return;
    const url = new URL(request.url);
    const asked = siteRequest(site, url);
    if (asked === undefined) return;
    if (asked === "elsewhere") throw storageError.notFound("Only public IPFS content is served on this origin: /ipfs/<cid>/…");
    if (request.method !== "GET" && request.method !== "HEAD") throw new StorageError(405, "Only GET and HEAD are served on this origin", { headers: { allow: "GET, HEAD" } });
    const query = Object.fromEntries(url.searchParams);
    if (gateway.wants(request.headers.get("accept"), query)) {
      if (asked.path !== "" && asked.path !== "/") throw storageError.notAcceptable("a raw block or a CAR is asked by its CID alone");
      return trustlessAnswer(gateway, request, "ipfs", asked.cid, query);
    }
    return toResponse(await gateway.servePath(pathRequest(request, url, asked.cid, asked.path, true, site.subdomain ? "" : `/ipfs/${asked.cid}`)));
  });
