/**
 * The IPFS trustless gateway (D17) on `GET|HEAD /ipfs/<cid>`: raw blocks and CAR v1 streams of
 * content that is public and free in this gateway's directory, without a voucher. Typed input
 * (the Cid text, the parsed request, the client's address), a typed answer (status, headers,
 * body); the route turns it into HTTP (routes.ts).
 *
 * Every block served is one the block → root index places under a public root (access.ts), read
 * from the blob store and checked against its Cid. Other Cids are refused with the same 403
 * whether they exist or not, so the gateway tells nothing of private content. Bytes are paid by
 * the operator from the owner's daily allowance (egress.ts), never the owner's traffic pool, and
 * limited per client address on this gateway (client-limit.ts); over either: 429 + Retry-After.
 * A CAR is streamed as the DAG is walked (walk.ts), each block paid for before it goes out.
 * Content the denylist blocks answers 410 (D25), a block only blocked content holds included.
 *
 * The path gateway (path.ts) shares this budget and these limits: the same public content as
 * files, directories and sites.
 *
 * @example
 *   const gateway = createGateway({ sql, store: blobs.store, allowance: config.publicEgress, perClient: config.publicEgressPerClient, log })
 *   const want = gateway.wants(request.headers.get("accept"), query)   // undefined: a download
 *   const answer = await gateway.serve({ cid, want, head: false, client: clientIp(request), query })
 */
import { CID } from "multiformats/cid";
import type { BlobStore } from "../blob/index.ts";
import type { Sql } from "../db/sql.ts";
import { storageError } from "../http/errors.ts";
import { userContentHeaders } from "../http/user-content.ts";
import type { Logger } from "../log.ts";
import { blockKey, readBlock } from "../storage/ipfs/blocks.ts";
import { rootsOfBlock } from "../storage/ipfs/pins.ts";
import { ContentBlocked, type Denylist } from "../denylist/index.ts";
import { createPathGateway, type PathRequest } from "./path.ts";
import type { SiteOrigin } from "./site.ts";
import { blockSize, publicOwners } from "./access.ts";
import { carBlockPrefix, carHeader } from "./car.ts";
import { createClientLimit } from "./client-limit.ts";
import { createEgress } from "./egress.ts";
import { contentTypeOf, etagOf, trustlessRequest, type TrustlessRequest } from "./model.ts";
import { walkCar, type Block } from "./walk.ts";

export type { TrustlessRequest } from "./model.ts";

const IDENTITY = 0x00;
/** Immutable content (path gateway specification, Cache-Control). */
const IMMUTABLE = "public, max-age=29030400, immutable";

export interface GatewayDeps {
  sql: Sql;
  /** The blob store the ipfs back-end keeps its blocks in (D15). */
  store: BlobStore;
  /** STOWAGE_PUBLIC_EGRESS: bytes per owner per UTC day; 0 = public reads are off. */
  allowance: number;
  /** STOWAGE_PUBLIC_EGRESS_PER_CLIENT: bytes per client address per hour on this gateway; 0 = none. */
  perClient: number;
  log: Logger;
  /** Content this gateway blocks (D25): 410, never served. */
  denylist?: Pick<Denylist, "check" | "blocking" | "servable">;
  /** STOWAGE_GATEWAY_ORIGIN: where sites are served; browsers asking this origin are sent there. */
  site?: SiteOrigin;
  now?: () => number;
  /** Hears of bytes sent (the server's metrics count them as ipfs bytes out). */
  onSent?: (bytes: number) => void;
}

export interface TrustlessInput {
  /** The Cid as the path gave it. */
  cid: string;
  want: TrustlessRequest;
  head: boolean;
  /** The client's address (http/client-ip.ts). */
  client: string;
  /** The request's If-None-Match, if any. */
  ifNoneMatch?: string | null;
  /** The URL's query (for `filename` and Content-Location). */
  query: Record<string, string | undefined>;
}

export interface TrustlessAnswer {
  status: 200 | 304;
  headers: Record<string, string>;
  body?: Uint8Array | ReadableStream<Uint8Array>;
}

export function createGateway(deps: GatewayDeps) {
  const { sql, store, log } = deps;
  const egress = createEgress({ sql, allowance: deps.allowance, now: deps.now });
  const clients = createClientLimit({ bytesPerHour: deps.perClient, now: deps.now });

  function headersOf(cidText: string, want: TrustlessRequest, query: Record<string, string | undefined>): Record<string, string> {
    const ext = want.format === "raw" ? "bin" : "car";
    const headers: Record<string, string> = {
      // Always an attachment, with nosniff and the sandbox: what every answer of user bytes carries.
      ...userContentHeaders({ name: query.filename || `${cidText}.${ext}`, type: contentTypeOf(want) }),
      etag: etagOf(cidText, want),
      "cache-control": IMMUTABLE,
      "x-ipfs-path": `/ipfs/${cidText}`,
      "x-ipfs-roots": cidText,
      "accept-ranges": "none",
      vary: "Accept",
    };
    if (!want.fromQuery) {
      // Negotiated by Accept alone: name the URL that gives this format whatever the Accept.
      const params = new URLSearchParams({ format: want.format });
      for (const [k, v] of Object.entries(query)) if (v !== undefined && k !== "format") params.append(k, v);
      headers["content-location"] = `/ipfs/${cidText}?${params}`;
    }
    return headers;
  }

  /** A 429 for whichever limit refused. */
  const tooMuch = (retryAfter: number) => storageError.rateLimited(retryAfter);

  async function serve(input: TrustlessInput): Promise<TrustlessAnswer> {
    let cid: CID;
    try {
      cid = CID.parse(input.cid);
    } catch {
      throw storageError.badRequest("not a Cid");
    }
    if (deps.allowance <= 0) throw storageError.forbidden("Public reads are off on this gateway: download with a voucher");
    const { want } = input;
    const headers = headersOf(input.cid, want, input.query);
    const matches = (input.ifNoneMatch ?? "").split(",").some((t) => t.trim() === headers.etag || t.trim() === "*");

    // Identity Cids hold their bytes themselves (the specification's probe is bafkqaaa): nothing
    // of ours is read or sent, so nothing is counted.
    if (cid.multihash.code === IDENTITY) {
      if (matches) return { status: 304, headers };
      const body = want.format === "raw" ? cid.multihash.digest : carHeader(cid);
      if (want.format === "raw") headers["content-length"] = String(body.byteLength);
      return { status: 200, headers, body: input.head ? undefined : body };
    }

    const key = blockKey(cid);
    // Blocked (D25): the block itself, or one that only blocked content holds.
    if (deps.denylist && !(await deps.denylist.servable(cid, "trustless", (n) => rootsOfBlock(sql, key, n)))) throw new ContentBlocked(input.cid);
    const owners = await publicOwners(sql, key);
    if (owners.length === 0) throw storageError.forbidden("Permission denied: this Cid is not public here; a download needs a voucher");
    if (matches) return { status: 304, headers };

    if (want.format === "raw") {
      if (input.head) {
        const size = await blockSize(sql, key);
        if (size !== undefined) headers["content-length"] = String(size);
        return { status: 200, headers };
      }
      const bytes = await readBlock(store, cid);
      const charge = egress.charge(owners, 0);
      await pay(input.client, charge, bytes.byteLength);
      await charge.close();
      headers["content-length"] = String(bytes.byteLength);
      return { status: 200, headers, body: bytes };
    }

    if (input.head) return { status: 200, headers };
    return { status: 200, headers, body: await carStream(cid, want, input.client, owners) };
  }

  /** Counts `n` bytes about to go out against the client's and the owner's limits (or throws the
   * 429), and tells `onSent`. */
  async function pay(client: string, charge: ReturnType<typeof egress.charge>, n: number) {
    const taken = clients.take(client, n);
    if (!taken.ok) throw tooMuch(taken.retryAfter);
    if (!(await charge.spend(n))) {
      clients.giveBack(client, n);
      throw tooMuch(egress.retryAfter());
    }
    deps.onSent?.(n);
  }

  /**
   * The CAR as a stream. The header and the requested block are read and paid for before this
   * returns, so a refusal is still a status; later blocks are paid for as they go out, and a
   * refusal then cuts the stream (a client verifies CARs, and sees one cut short).
   */
  async function carStream(cid: CID, want: Extract<TrustlessRequest, { format: "car" }>, client: string, owners: string[]): Promise<ReadableStream<Uint8Array>> {
    const abort = new AbortController();
    const root: Block = { cid, bytes: await readBlock(store, cid) };
    const blocks = walkCar((c, signal) => readBlock(store, c, { signal }), root, { scope: want.scope, dups: want.dups, entityBytes: want.entityBytes, signal: abort.signal });
    const charge = egress.charge(owners);
    const end = async () => {
      abort.abort();
      await blocks.return(undefined).catch(() => {});
      await charge.close().catch((err) => log.error("giving back public egress failed", { err: (err as Error).message }));
    };
    const frames = async (b: Block) => {
      // A block blocked in its own right (the root was checked whole) ends the CAR there.
      if (deps.denylist?.blocking(b.cid)) throw new ContentBlocked(b.cid.toString());
      const prefix = carBlockPrefix(b.cid, b.bytes.byteLength);
      await pay(client, charge, prefix.byteLength + b.bytes.byteLength);
      return [prefix, b.bytes];
    };
    const header = carHeader(cid);
    let first: Uint8Array[];
    try {
      await pay(client, charge, header.byteLength);
      const next = await blocks.next();
      first = [header, ...(next.done ? [] : await frames(next.value))];
    } catch (err) {
      await end();
      throw err;
    }
    return new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          try {
            const out = first.length > 0 ? first.splice(0) : undefined;
            if (out) {
              for (const chunk of out) controller.enqueue(chunk);
              return;
            }
            const next = await blocks.next();
            if (next.done) {
              await end();
              controller.close();
              return;
            }
            for (const chunk of await frames(next.value)) controller.enqueue(chunk);
          } catch (err) {
            await end();
            controller.error(err);
          }
        },
        async cancel() {
          await end();
        },
      },
      { highWaterMark: 0 },
    );
  }

  const paths = createPathGateway({
    sql,
    store,
    allowance: deps.allowance,
    denylist: deps.denylist,
    payment(owners, client) {
      const charge = egress.charge(owners);
      return { pay: (n) => pay(client, charge, n), close: () => charge.close() };
    },
  });

  return {
    /** The trustless request in an Accept header and query, or undefined for a download (spec row 5). */
    wants: trustlessRequest,
    serve,
    /** The path gateway (path.ts): a public file, a directory's listing or a site's page. */
    servePath: (input: PathRequest) => paths.serve(input),
    site: deps.site,
    egress,
  };
}

export type Gateway = ReturnType<typeof createGateway>;
