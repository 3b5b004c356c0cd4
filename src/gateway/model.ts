/**
 * What a trustless-gateway request asks for (D17, IPFS Trustless Gateway specification): a raw
 * block or a CAR, read from the `format` query parameter (which wins) and the Accept header, with
 * the CAR's parameters (`car-version`/`car-order`/`car-dups` queries over the Accept parameters),
 * `dag-scope` and `entity-bytes`. A request that names neither type is no trustless request at
 * all: it stays the download of spec row 5, so this answers undefined for it.
 *
 * Plain values in, a typed request out; a malformed parameter is a 400, a variant we cannot serve
 * (CAR version 2, an order other than dfs, dag-json, tar, …) a 406.
 */
import { storageError } from "../http/errors.ts";

export const RAW_TYPE = "application/vnd.ipld.raw";
export const CAR_TYPE = "application/vnd.ipld.car";

export type DagScope = "all" | "entity" | "block";

/** `entity-bytes=from:to`: integers (negative counts from the end), `to` may be `*` (the end). */
export interface EntityBytes {
  from: number;
  to: number | "*";
}

export type TrustlessRequest =
  | { format: "raw"; fromQuery: boolean }
  | { format: "car"; fromQuery: boolean; dups: "y" | "n"; scope: DagScope; entityBytes?: EntityBytes };

/** Formats of the path gateway we do not produce: asked for, they are a 406, never a download. */
const OTHER_FORMATS: Record<string, string> = {
  tar: "application/x-tar",
  "dag-json": "application/vnd.ipld.dag-json",
  "dag-cbor": "application/vnd.ipld.dag-cbor",
  json: "application/json",
  cbor: "application/cbor",
  "ipns-record": "application/vnd.ipfs.ipns-record",
};
/** Media types that only a gateway client sends (application/json and cbor are not among them:
 * an ordinary client may accept JSON, and must still get its download). */
const GATEWAY_ONLY_TYPES = new Set(["application/x-tar", "application/vnd.ipld.dag-json", "application/vnd.ipld.dag-cbor", "application/vnd.ipfs.ipns-record"]);

interface MediaRange {
  type: string;
  params: Record<string, string>;
  q: number;
}

/** An Accept header's media ranges, lower-cased, each with its parameters and q (RFC 9110 12.5.1). */
export function parseAccept(header: string | null | undefined): MediaRange[] {
  if (!header) return [];
  const ranges: MediaRange[] = [];
  for (const part of header.split(",")) {
    const [type, ...rest] = part.split(";").map((s) => s.trim());
    if (!type) continue;
    const params: Record<string, string> = {};
    for (const p of rest) {
      const eq = p.indexOf("=");
      if (eq <= 0) continue;
      params[p.slice(0, eq).trim().toLowerCase()] = p.slice(eq + 1).trim().replace(/^"(.*)"$/, "$1");
    }
    const q = params.q === undefined ? 1 : Number(params.q);
    delete params.q;
    ranges.push({ type: type.toLowerCase(), params, q: Number.isFinite(q) ? q : 0 });
  }
  return ranges;
}

/** The CAR parameters we serve: version 1, order dfs (unk or absent: we choose dfs), dups y or n. */
function carVariant(params: Record<string, string | undefined>): { dups: "y" | "n" } | undefined {
  const version = params.version ?? "1";
  const order = params.order ?? "dfs";
  const dups = params.dups ?? "n";
  if (version !== "1" || (order !== "dfs" && order !== "unk") || (dups !== "y" && dups !== "n")) return undefined;
  return { dups };
}

type Chosen = { format: "raw" } | { format: "car"; dups: "y" | "n" };

/** What one media range asks for, if we serve it. */
function chosenOf(type: string, params: Record<string, string>): Chosen | undefined {
  if (type === RAW_TYPE) return { format: "raw" };
  const variant = type === CAR_TYPE ? carVariant(params) : undefined;
  return variant && { format: "car", ...variant };
}

const SCOPES = new Set<DagScope>(["all", "entity", "block"]);
const INTEGER = /^-?\d{1,15}$/;

function parseEntityBytes(text: string): EntityBytes {
  const m = /^([^:]+):([^:]+)$/.exec(text);
  const from = m?.[1];
  const to = m?.[2];
  if (!from || !to || !INTEGER.test(from) || (to !== "*" && !INTEGER.test(to))) {
    throw storageError.badRequest("entity-bytes must be from:to, integers (negative from the end) or * for the end");
  }
  const range: EntityBytes = { from: Number(from), to: to === "*" ? "*" : Number(to) };
  // Both counted from the start: the end cannot come before the start (RFC 9110's rule).
  if (range.to !== "*" && range.from >= 0 && range.to >= 0 && range.to < range.from) throw storageError.badRequest("entity-bytes: to is before from");
  return range;
}

/**
 * The trustless request in `accept` and `query`, or undefined when there is none (a download).
 * `query` is the URL's parameters as the route parsed them.
 */
export function trustlessRequest(accept: string | null | undefined, query: Record<string, string | undefined>): TrustlessRequest | undefined {
  const ranges = parseAccept(accept).filter((r) => r.q > 0);
  const format = query.format;
  let chosen: Chosen | undefined;
  // The car-* query parameters win over the Accept header's.
  const carQuery: Record<string, string> = {};
  for (const name of ["version", "order", "dups"]) {
    const v = query[`car-${name}`];
    if (v !== undefined) carQuery[name] = v;
  }
  const withQuery = (params: Record<string, string>): Record<string, string> => ({ ...params, ...carQuery });

  if (format !== undefined) {
    if (format === "raw") chosen = { format: "raw" };
    else if (format === "car") {
      // The Accept header's CAR parameters still count (the query's own car-* ones over them).
      const fromAccept = ranges.find((r) => r.type === CAR_TYPE && carVariant(withQuery(r.params)));
      const variant = carVariant(withQuery(fromAccept?.params ?? ranges.find((r) => r.type === CAR_TYPE)?.params ?? {}));
      if (!variant) throw storageError.notAcceptable("only CAR version 1, order dfs, dups y or n are served");
      chosen = { format: "car", ...variant };
    } else if (OTHER_FORMATS[format]) {
      throw storageError.notAcceptable(`format=${format} is not served here: ask for format=raw (a block) or format=car and decode it yourself`);
    } else {
      throw storageError.badRequest("format must be raw or car");
    }
  } else {
    const wanted = ranges.filter((r) => r.type === RAW_TYPE || r.type === CAR_TYPE || GATEWAY_ONLY_TYPES.has(r.type));
    if (wanted.length === 0) return undefined;
    // Highest q first; among equals, the header's order.
    const servable = wanted
      .map((r, i) => ({ r, i }))
      .sort((a, b) => b.r.q - a.r.q || a.i - b.i)
      .map(({ r }) => chosenOf(r.type, withQuery(r.params)))
      .find((v) => v !== undefined);
    if (!servable) throw storageError.notAcceptable("none of the accepted types is served here: application/vnd.ipld.raw, or application/vnd.ipld.car; version=1; order=dfs; dups=y|n");
    chosen = servable;
  }

  const fromQuery = format !== undefined;
  if (chosen.format === "raw") return { format: "raw", fromQuery };
  const scopeText = query["dag-scope"] ?? "all";
  if (!SCOPES.has(scopeText as DagScope)) throw storageError.badRequest("dag-scope must be all, entity or block");
  const bytesText = query["entity-bytes"];
  const entityBytes = bytesText === undefined ? undefined : parseEntityBytes(bytesText);
  // entity-bytes implies dag-scope=entity.
  const scope: DagScope = entityBytes ? "entity" : (scopeText as DagScope);
  return { format: "car", fromQuery, dups: chosen.dups, scope, entityBytes };
}

/** The strong ETag of an answer: our CARs are deterministic (dfs order), so equal requests get
 * equal bytes; the tag names everything that shapes them. */
export function etagOf(cid: string, want: TrustlessRequest): string {
  if (want.format === "raw") return `"${cid}.raw"`;
  const bytes = want.entityBytes ? `.bytes-${want.entityBytes.from}:${want.entityBytes.to}` : "";
  return `"${cid}.car.v1.dfs.dups-${want.dups}.${want.scope}${bytes}"`;
}

/** The Content-Type of an answer, every CAR parameter spelled out as the specification asks. */
export function contentTypeOf(want: TrustlessRequest): string {
  return want.format === "raw" ? RAW_TYPE : `${CAR_TYPE}; version=1; order=dfs; dups=${want.dups}`;
}
