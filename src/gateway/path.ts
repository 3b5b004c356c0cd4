/**
 * The path gateway for public content (D25): `GET|HEAD /ipfs/<cid>[/<path>]` of content that is
 * public and free in this gateway's directory answers the file itself, with no voucher — what a
 * browser or curl expects of an IPFS gateway. The same content, the same budget as the trustless
 * gateway (D17): a block is public when a free public entry's DAG holds it, and its bytes are paid
 * from the owner's daily allowance by the operator and limited per client address.
 *
 * - A file: Range (206, 416), ETag (its CID) and If-None-Match (304), HEAD.
 * - A directory: `/ipfs/<cid>/dir` is sent to `…/dir/` (301, so relative links work); there it is
 *   a plain HTML listing (listing.ts). On the site origin a directory with an `index.html` is that
 *   page: a site.
 * - On the gateway's own origin nothing runs (D23, http/user-content.ts): nosniff, the sandbox, active
 *   types as attachments. On the site origin (STOWAGE_GATEWAY_ORIGIN, site.ts) files are served as
 *   they are, so sites work there and only there.
 * - Not public: a private entry and an unknown CID get one 404 (so the answer tells nothing of
 *   private content); an entry that is sold or for chosen readers — the directory says so in
 *   public — a 403. Each says how to read it: a voucher (`stowage get`, a `stowage link`).
 * - Blocked (the denylist, D25): 410, for the CID, its path, every CID on the way, and a block
 *   only blocked content holds.
 *
 * @example
 *   const answer = await path.serve({ cid, path: "/docs/a.pdf", search: "", head: false, client, range: null, ifNoneMatch: null, query, site: false, base: `/ipfs/${cid}` })
 */
import { CID } from "multiformats/cid";
import type { BlobStore } from "../blob/index.ts";
import type { Sql } from "../db/sql.ts";
import { ContentBlocked, type Denylist } from "../denylist/index.ts";
import { storageError, StorageError } from "../http/errors.ts";
import { parseRange } from "../http/range.ts";
import { blockKey, readBlock } from "../storage/ipfs/blocks.ts";
import { rootsOfBlock } from "../storage/ipfs/pins.ts";
import { NodeCache, readContent } from "../storage/ipfs/read.ts";
import { blockSize, closedEntries, publicName, publicOwners } from "./access.ts";
import { directoryListing } from "./listing.ts";
import { entryNamed, listDirectory, PathNotFound, PathUnsupported, resolvePath, targetAt, type Blocks, type Target } from "./resolve.ts";
import { typeOfName, userContentHeaders, USER_CONTENT_POLICY } from "../http/user-content.ts";

/** Immutable content (the path gateway specification's Cache-Control). */
const IMMUTABLE = "public, max-age=29030400, immutable";
/** Entries a listing shows at most. */
export const LISTING_MAX = 1000;

/** What counts the bytes of one answer (egress.ts's charge with the client's limit): `pay`
 * before sending n bytes (throws the 429), `close` when done. */
export interface Payment {
  pay(n: number): Promise<void>;
  close(): Promise<void>;
}

export interface PathDeps {
  sql: Sql;
  store: BlobStore;
  /** 0: public reads are off. */
  allowance: number;
  denylist?: Pick<Denylist, "check" | "blocking" | "servable">;
  /** A payment for bytes of `owners`' content sent to `client`. */
  payment(owners: readonly string[], client: string): Payment;
}

export interface PathRequest {
  /** The CID as the URL gave it. */
  cid: string;
  /** The path below the CID as the URL has it (percent-encoded): "" or "/…". */
  path: string;
  /** The URL's query, "?…" or "": kept on redirects. */
  search: string;
  head: boolean;
  /** The client's address (the per-client limit). */
  client: string;
  range: string | null;
  ifNoneMatch: string | null;
  /** `?filename=` (the saved name, and the type) and `?download=true` (always an attachment). */
  filename?: string;
  download?: boolean;
  /** On the site origin: files as they are, a directory's index.html. */
  site: boolean;
  /** The URL path of the CID's root on this origin: `/ipfs/<cid>`, or "" on a subdomain gateway. */
  base: string;
}

export interface PathAnswer {
  status: 200 | 206 | 301 | 304 | 416;
  headers: Record<string, string>;
  body?: Uint8Array | ReadableStream<Uint8Array>;
}

const textOf = (s: string) => new TextEncoder().encode(s);

/** The 404 or 403 of content that is not public here: the spec's error shape, saying how to read it. */
async function refusal(sql: Sql, cid: string): Promise<StorageError> {
  const closed = await closedEntries(sql, cid);
  const fetchIt = `download it with a voucher: \`stowage get ${cid}\` (or open a link its reader made with \`stowage link ${cid}\`)`;
  if (closed.some((e) => e.priced)) {
    return storageError.forbidden(`This file is published for sale, not free to read: buy read access in the directory (the SDK's buyRead), then ${fetchIt}`);
  }
  if (closed.length > 0) return storageError.forbidden(`This file is published for readers its owner chose: if you are one, ${fetchIt}`);
  return storageError.notFound(`Not public on this gateway: no free public file here has this CID. If it is yours, or its owner let you read it, ${fetchIt}`);
}

/** The path's segments, decoded; a malformed escape is the client's 400. */
function segmentsOf(path: string): string[] {
  try {
    return path
      .split("/")
      .filter((s) => s !== "")
      .map((s) => decodeURIComponent(s));
  } catch {
    throw storageError.badRequest("the path is not percent-encoded");
  }
}

/** An entity tag without its weakness mark: If-None-Match compares weakly (RFC 9110 13.1.2). */
const opaque = (tag: string) => tag.trim().replace(/^W\//, "");

/** Whether an If-None-Match names `etag` (or `*`). */
const matches = (header: string | null, etag: string) => (header ?? "").split(",").some((t) => opaque(t) === opaque(etag) || t.trim() === "*");

export function createPathGateway(deps: PathDeps) {
  const { sql, store } = deps;
  const nodes = new NodeCache();
  const blocks: Blocks = {
    read: (cid) => readBlock(store, cid),
    size: (cid) => blockSize(sql, blockKey(cid)),
  };

  /** A stream of `source` whose every chunk is paid before it goes out; the first is read and
   * paid before this returns, so a refusal is still a status. */
  async function paid(source: ReadableStream<Uint8Array>, payment: Payment): Promise<ReadableStream<Uint8Array>> {
    const reader = source.getReader();
    const end = async (reason?: unknown) => {
      await reader.cancel(reason).catch(() => {});
      await payment.close().catch(() => {});
    };
    let first: Awaited<ReturnType<typeof reader.read>>;
    try {
      first = await reader.read();
      if (!first.done) await payment.pay(first.value.byteLength);
    } catch (err) {
      await end(err);
      throw err;
    }
    let held: Awaited<ReturnType<typeof reader.read>> | undefined = first;
    return new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          try {
            const next = held ?? (await reader.read());
            const fresh = held === undefined;
            held = undefined;
            if (next.done) {
              await payment.close();
              return controller.close();
            }
            if (fresh) await payment.pay(next.value.byteLength);
            controller.enqueue(next.value);
          } catch (err) {
            await end(err);
            controller.error(err);
          }
        },
        cancel: (reason) => end(reason),
      },
      { highWaterMark: 0 },
    );
  }

  /** Headers every answer of content carries. */
  function contentHeaders(input: PathRequest, visited: readonly CID[]): Record<string, string> {
    return {
      "cache-control": IMMUTABLE,
      "x-ipfs-path": `/ipfs/${input.cid}${input.path}`,
      "x-ipfs-roots": visited.map(String).join(","),
    };
  }

  /** The answer of a file (or an identity CID's bytes). */
  async function file(input: PathRequest, target: Extract<Target, { kind: "file" | "inline" }>, name: string, owners: readonly string[], visited: readonly CID[]): Promise<PathAnswer> {
    const size = target.kind === "file" ? target.size : target.bytes.byteLength;
    const type = typeOfName(name);
    const headers: Record<string, string> = {
      ...(input.site ? siteHeaders(type) : userContentHeaders({ name, type, attachment: input.download ? "always" : "active" })),
      ...contentHeaders(input, visited),
      etag: `"${target.cid}"`,
      "accept-ranges": "bytes",
    };
    if (input.site && input.download) headers["content-disposition"] = userContentHeaders({ name, type, attachment: "always" })["content-disposition"] as string;
    if (matches(input.ifNoneMatch, headers.etag as string)) return { status: 304, headers };
    const range = parseRange(input.range, size);
    if (range === "unsatisfiable") return { status: 416, headers: { ...headers, "content-range": `bytes */${size}` } };
    const length = range ? range.end - range.start + 1 : size;
    headers["content-length"] = String(length);
    if (range) headers["content-range"] = `bytes ${range.start}-${range.end}/${size}`;
    const status = range ? 206 : 200;
    if (input.head || length === 0) return { status, headers, body: input.head ? undefined : new Uint8Array(0) };
    if (target.kind === "inline") {
      // Its bytes are in the CID: nothing of ours is read or sent, so nothing is counted.
      return { status, headers, body: range ? target.bytes.subarray(range.start, range.end + 1) : target.bytes };
    }
    const source = readContent({ store, nodes, pinnedSize: async () => size }, target.cid.toString(), range);
    return { status, headers, body: await paid(source, deps.payment(owners, input.client)) };
  }

  /** A directory's listing (our own HTML: shown inline on either origin, under the sandbox). */
  async function listing(input: PathRequest, dir: Extract<Target, { kind: "directory" }>, owners: readonly string[], visited: readonly CID[]): Promise<PathAnswer> {
    // Weak: the page also shows the path it was reached by, so two paths to one directory differ in bytes.
    const etag = `W/"${dir.cid}.listing"`;
    const headers: Record<string, string> = {
      "content-type": "text/html; charset=utf-8",
      "x-content-type-options": "nosniff",
      "content-security-policy": USER_CONTENT_POLICY,
      ...contentHeaders(input, visited),
      etag,
    };
    if (matches(input.ifNoneMatch, etag)) return { status: 304, headers };
    const { entries, more } = await listDirectory(blocks.read, dir, LISTING_MAX);
    const html = textOf(
      directoryListing({
        title: `/ipfs/${input.cid}${input.path}`,
        parent: input.path.replace(/\/+$/, "") !== "",
        entries,
        more,
        // On a subdomain gateway another CID is another origin, which this page does not know: not linked.
        cidHref: input.base === "" ? undefined : (c) => `/ipfs/${c}`,
      }),
    );
    headers["content-length"] = String(html.byteLength);
    if (input.head) return { status: 200, headers };
    const payment = deps.payment(owners, input.client);
    try {
      await payment.pay(html.byteLength);
    } finally {
      await payment.close();
    }
    return { status: 200, headers, body: html };
  }

  async function serve(input: PathRequest): Promise<PathAnswer> {
    let cid: CID;
    try {
      cid = CID.parse(input.cid);
    } catch {
      throw storageError.badRequest("not a Cid");
    }
    const segments = segmentsOf(input.path);
    const pathText = segments.join("/");
    // Blocked before anything else is read, whoever asks (D25).
    deps.denylist?.check(cid, "path", pathText);
    if (deps.allowance <= 0) throw storageError.forbidden(`Public reads are off on this gateway: download with a voucher (\`stowage get ${input.cid}\`)`);
    const key = blockKey(cid);
    // A block that only blocked content holds (a leaf, a directory of a blocked tree) is blocked too.
    if (deps.denylist && !(await deps.denylist.servable(cid, "path", (n) => rootsOfBlock(sql, key, n)))) throw new ContentBlocked(input.cid);
    const owners = await publicOwners(sql, key);
    if (owners.length === 0) throw await refusal(sql, cid.toV1().toString());

    let resolved: Awaited<ReturnType<typeof resolvePath>>;
    try {
      resolved = await resolvePath(blocks, cid, segments);
    } catch (err) {
      if (err instanceof PathNotFound) throw storageError.notFound(`No such path: ${err.message}`);
      if (err instanceof PathUnsupported) throw storageError.notAcceptable(err.message);
      throw err;
    }
    let { target } = resolved;
    const visited = [...resolved.visited];
    for (const c of visited.slice(1)) deps.denylist?.check(c, "path");

    if (target.kind === "directory") {
      if (!input.path.endsWith("/")) {
        const location = `${input.base}${input.path}/${input.search}`;
        return { status: 301, headers: { location, "cache-control": IMMUTABLE, "content-length": "0" } };
      }
      const index = input.site ? await entryNamed(blocks, target, "index.html") : undefined;
      const page = index && (await targetAt(blocks, index));
      if (!page || page.kind === "directory") return listing(input, target, owners, visited);
      deps.denylist?.check(page.cid, "path");
      visited.push(page.cid);
      target = page;
      return file(input, target, "index.html", owners, visited);
    }
    const name = input.filename || segments.at(-1) || (await publicName(sql, cid.toV1().toString())) || input.cid;
    return file(input, target, name, owners, visited);
  }

  return { serve };
}

/** On the site origin: the file as it is (a site's HTML and scripts run there), never sniffed. */
function siteHeaders(type: string): Record<string, string> {
  return { "content-type": type, "x-content-type-options": "nosniff" };
}

export type PathGateway = ReturnType<typeof createPathGateway>;
