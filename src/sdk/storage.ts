/**
 * SDK: the storage middleware. Logs in with a private key (EIP-712, D4), keeps the session's
 * requestIDs, computes a file's D9 Cid and then streams it up as multipart (the signed Cid, the
 * payload, must come before the file part, D5; the gateway then hashes each byte once), signs a
 * fresh traffic voucher per transfer for the file it moves (D6, D22), downloads with Range,
 * makes shareable links (a voucher in a URL), lists and deletes.
 *
 * @example
 *   const store = await connectStorage({ baseUrl: "https://gw.example", account })
 *   await store.login()
 *   const entry = await store.upload("dfs", new Blob([bytes]))   // or a path, on Bun
 *   const res = await store.download("dfs", entry.Cid, { range: [0, 1023] })
 */
import { bytesToHex, type Hex, type LocalAccount } from "viem";
import { canonicalCid } from "../cid/canonical.ts";
import { canonicalDid } from "../identity/did.ts";
import { storageDomain, storageTypes } from "../identity/eip712.ts";
import { discoverGateway, type GatewayInfo } from "./chain.ts";
import { sha256 } from "@noble/hashes/sha2.js";
import { cidOfStream } from "./cid.ts";
import { readCar } from "../cid/car.ts";
import { TrafficCounter } from "./traffic-counter.ts";
import type { DidLoginTokens, FileEntry, FileList, LoginInfo, PurchaseResult, QuotaRecord, RequestAction, StorageErrorBody, TrafficHashResult } from "./wire.ts";

// The wire types are the SDK's own (wire.ts), held equal to the server's model by a type test.
export type { DidLoginTokens, FileEntry, FileList, LoginInfo, PurchaseResult, QuotaRecord, RequestAction, StorageErrorBody, TrafficHashResult };

/** A storage type of the routes; a server may run others than the two it knows today. */
export type StorageKind = "dfs" | "ipfs" | (string & {});

/** A failed call: the storage error body (spec 7, D11) and its status; empty when the answer had
 * no JSON body (a HEAD, or a proxy's page). */
export class StorageApiError extends Error {
  override name = "StorageApiError";
  constructor(
    readonly status: number,
    readonly body: Partial<StorageErrorBody>,
  ) {
    super(`${status} ${body.Code ?? ""}: ${body.Description ?? ""}`);
  }
}

export interface StorageOptions {
  baseUrl: string;
  /**
   * Signs logins, restricted calls and vouchers: the DID's owner or a delegate key; or a session
   * key a wallet granted (D19, grants.ts), which never logs in: its grant opens its session
   * (`useSession`).
   */
  account: LocalAccount;
  /** The DID to act for (default: the account's own did:ethr). */
  did?: string;
  fetch?: typeof fetch;
  /** The account API's access token; `login()` fills it. */
  accessToken?: string;
  /** Asked for the access token before each call, instead of `accessToken`: for a client that
   * keeps its tokens fresh itself (the console refreshes them through the account API). */
  tokenProvider?: () => Promise<string>;
}

/** What a browser has and Bun's types do not declare: enough of XMLHttpRequest for an upload's progress. */
interface ProgressRequest {
  open(method: string, url: string): void;
  setRequestHeader(name: string, value: string): void;
  upload: { onprogress: ((e: { loaded: number }) => void) | null };
  onload: (() => void) | null;
  onerror: (() => void) | null;
  status: number;
  responseText: string;
  send(body: Blob): void;
}
type ProgressRequestClass = new () => ProgressRequest;

/**
 * Sends a browser upload with XMLHttpRequest: fetch reports no upload progress, and Chromium
 * streams a request body only over HTTP/2. The body is one Blob (file parts stay on disk).
 */
function sendWithProgress(Xhr: ProgressRequestClass, url: string, headers: Record<string, string>, body: Blob, onProgress: (sent: number) => void) {
  return new Promise<Response>((resolve, reject) => {
    const x = new Xhr();
    x.open("POST", url);
    // The browser sets Content-Length itself (and refuses to be told it).
    for (const [k, v] of Object.entries(headers)) if (k !== "content-length") x.setRequestHeader(k, v);
    x.upload.onprogress = (e) => onProgress(e.loaded);
    x.onload = () => resolve(new Response(x.responseText, { status: x.status, headers: { "content-type": "application/json" } }));
    x.onerror = () => reject(new TypeError("the upload failed: network error"));
    x.send(body);
  });
}

/** Bytes of known size read as a stream: what an upload needs of its source (a Blob is one; the
 * encryption SDK passes a sealing stream, read once for the hash and once for the upload). */
export interface SizedSource {
  size: number;
  stream(): ReadableStream<Uint8Array>;
}

type Source = Blob | Uint8Array | string | SizedSource;

const randomHex = (bytes: number): Hex => bytesToHex(crypto.getRandomValues(new Uint8Array(bytes)));

/**
 * What a link's voucher covers beyond its file, from the payer's count when it is made: a voucher
 * is refused once the payer's all-time count passes its size, and the payer's own transfers after
 * the link was made would otherwise leave it short. The room costs nothing: the voucher reads its
 * one file once, so it never moves more than the file's bytes. Plus a random part, so that two
 * links of one payer differ (each size is accepted once).
 */
const LINK_ROOM = 1n << 40n;
const LINK_SPREAD = 1 << 30;

/** `cid` as vouchers name it (canonical), or a TypeError before anything is signed or sent. */
function fileCid(cid: string): string {
  try {
    return canonicalCid(cid);
  } catch {
    throw new TypeError(`not a Cid: ${JSON.stringify(cid)}`);
  }
}

/** A shareable link to one file (`link`): its URL reads the file once, until `expires`. */
export interface FileLink {
  url: string;
  kind: StorageKind;
  /** The file's Cid, canonical. */
  cid: string;
  /** The file's size in bytes. */
  bytes: number;
  /** The voucher's cumulative size. */
  size: bigint;
  /** Unix seconds; 0: until it is used. */
  expires: number;
  /** Who pays the link's traffic: the key that signed it. */
  payer: string;
}

/** A path is read with Bun.file on Bun (the command line passes paths); elsewhere the caller
 * passes a Blob or bytes, so the SDK carries no runtime-only import into Node or a browser. */
export function blobOfPath(path: string): Blob {
  if (typeof Bun === "undefined") throw new TypeError(`a file path ("${path}") is read only on Bun: pass a Blob or bytes (on Node: await fs.openAsBlob(path))`);
  return Bun.file(path);
}

/** The media type of a CAR: a file part of this type is imported by the gateway. */
export const CAR_MEDIA_TYPE = "application/vnd.ipld.car";

/** A source's file name: a path's last part, a File's name, else "file". */
const nameOf = (source: Source, blob: Blob | SizedSource) => (typeof source === "string" ? (source.split("/").pop() as string) : blob instanceof File ? blob.name : "file");

/** SHA-256 of a stream, read once. */
async function sha256Of(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const hash = sha256.create();
  for await (const part of stream) hash.update(part);
  return hash.digest();
}

function toBlob(source: Source): Blob | SizedSource {
  if (typeof source === "string") return blobOfPath(source);
  // (DOM's Blob types want ArrayBuffer-backed bytes; it copies whatever it is given.)
  return source instanceof Uint8Array ? new Blob([source as Uint8Array<ArrayBuffer>]) : source;
}

/** RFC 5987 ext-value: encodeURIComponent leaves ' ( ) * as they are, which parsers refuse. */
const rfc5987 = (s: string) => encodeURIComponent(s).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** A multipart body streamed from its parts: fields first, then the file's bytes as they are read. */
function multipart(fields: Record<string, string>, file: { name: string; blob: SizedSource; type?: string }) {
  const boundary = `----stowage${randomHex(12).slice(2)}`;
  const esc = (s: string) => s.replace(/["\r\n\\]/g, "_");
  const head =
    Object.entries(fields)
      .map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`)
      .join("") +
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${esc(file.name)}"; filename*=UTF-8''${rfc5987(file.name)}\r\nContent-Type: ${file.type ?? "application/octet-stream"}\r\n\r\n`;
  const tail = `\r\n--${boundary}--\r\n`;
  const enc = new TextEncoder();
  const [h, t] = [enc.encode(head), enc.encode(tail)];
  // A stream, not `new Blob([h, file.blob, t])`: Bun drops a Bun.file() inside a composed Blob
  // (its bytes vanish and the body is the framing alone). The length is known, so it is declared.
  async function* parts() {
    yield h;
    yield* file.blob.stream();
    yield t;
  }
  const it = parts();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await it.next();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    async cancel() {
      await it.return(undefined);
    },
  });
  // In a browser a Blob of Blobs keeps the file on disk and is what XMLHttpRequest sends.
  // (DOM's Blob wants ArrayBuffer-backed bytes, which TextEncoder's are.)
  const asBlob = () => (file.blob instanceof Blob ? new Blob([h as Uint8Array<ArrayBuffer>, file.blob, t as Uint8Array<ArrayBuffer>]) : undefined);
  return { body, asBlob, type: `multipart/form-data; boundary=${boundary}`, length: h.byteLength + file.blob.size + t.byteLength };
}

/**
 * `body` passed through as it is read: `onRead` hears the bytes read so far (an upload's
 * progress), `onEnd` the total once it is read to its end, or undefined when it fails or is
 * cancelled first (a download's voucher count, traffic-counter.ts). A pull per chunk, nothing
 * read ahead.
 */
function counted(body: ReadableStream<Uint8Array>, on: { onRead?: (n: number) => void; onEnd?: (n: number | undefined) => void }): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let n = 0;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let next: Awaited<ReturnType<typeof reader.read>>;
        try {
          next = await reader.read();
        } catch (err) {
          on.onEnd?.(undefined);
          return controller.error(err);
        }
        if (next.done) {
          on.onEnd?.(n);
          return controller.close();
        }
        n += next.value.byteLength;
        on.onRead?.(n);
        controller.enqueue(next.value);
      },
      cancel(reason) {
        on.onEnd?.(undefined);
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

export async function connectStorage(opts: StorageOptions) {
  const base = opts.baseUrl.replace(/\/$/, "");
  const doFetch = opts.fetch ?? fetch;
  const info: GatewayInfo = await discoverGateway(base, { fetch: doFetch });
  const domain = storageDomain(info.chainId, info.contracts.proxy);
  const did = opts.did ?? canonicalDid(opts.account.address, info.chainId);
  const signsForOther = did.toLowerCase() !== canonicalDid(opts.account.address, info.chainId).toLowerCase();
  let accessToken = opts.accessToken;
  let session: { token: Hex; next: bigint } | undefined;

  const auth = async (): Promise<Record<string, string>> => {
    const token = opts.tokenProvider ? await opts.tokenProvider() : accessToken;
    if (!token) throw new Error("log in first: store.login()");
    return { authorization: `Bearer ${token}` };
  };
  async function call<T>(path: string, init: RequestInit = {}): Promise<T> {
    return answer<T>(await doFetch(`${base}${path}`, init));
  }
  async function answer<T>(res: Response): Promise<T> {
    const text = await res.text();
    const body = text ? JSON.parse(text) : {};
    if (!res.ok) throw new StorageApiError(res.status, body);
    return body as T;
  }

  /** Signs a restricted call (D5) with the next requestID of the session; `signer` for one that
   * `account` may not sign (a session key's client asks the wallet for an "age" replacement). */
  async function signed(action: RequestAction, payload: string, signer: Pick<LocalAccount, "signTypedData"> = opts.account) {
    if (!session) throw new Error("log in first: store.login()");
    const requestID = session.next++;
    const signature = await signer.signTypedData({ domain, types: storageTypes, primaryType: "Request", message: { did, token: session.token, requestID, action, payload } });
    return { did, token: session.token, requestID: String(requestID), payload, signature };
  }

  /**
   * Whether the server refused a transfer only because another transfer of the same payer came
   * first: one of this client's, counted before it, left its voucher short; or one of another
   * device's (a second client of the same wallet) spent a voucher of the very same size, which the
   * random part of `voucher` makes rare, not impossible (1 in 1,024 per pair of transfers). The
   * server refused it before keeping anything, so signing again is safe.
   */
  const overtaken = (err: unknown) =>
    err instanceof StorageApiError && err.status === 402 && /^(the voucher (covers up to|allows)|this voucher was already used)/.test(err.body.Description ?? "");

  /**
   * The counter of whoever signs: the account's, or its key's (a delegate, a session key, D19).
   * A key the gateway no longer accepts is not told its counter; the account's is used and the
   * transfer itself then answers why it is refused.
   */
  async function counter(): Promise<bigint> {
    const headers = await auth();
    const used = (query: string) => call<{ used: string }>(`/traffichash?size=0${query}`, { headers }).then((r) => BigInt(r.used));
    if (signsForOther) {
      try {
        return await used(`&payer=${opts.account.address}`);
      } catch (err) {
        if (!(err instanceof StorageApiError && err.status === 401)) throw err;
      }
    }
    return used("");
  }
  const traffic = new TrafficCounter(counter);

  /**
   * A fresh voucher for a transfer of `bytes` (D6): the counter (traffic-counter.ts: asked for only
   * when this client is not sure of it), plus this client's transfers still in flight, plus the
   * bytes; never the same size twice. The transfer's `end` must be called once it is over.
   */
  async function voucher(bytes: number, cid: string) {
    const t = await traffic.begin(bytes);
    try {
      const sign = await signVoucher(t.size, cid, 0);
      return { fields: { size: String(t.size), sign }, transfer: t };
    } catch (err) {
      t.end(0); // nothing was sent
      throw err;
    }
  }

  /** A voucher's signature (D22): `cid` is the file's Cid, canonical; `expires` unix seconds or 0. */
  const signVoucher = (size: bigint, cid: string, expires: number) =>
    opts.account.signTypedData({ domain, types: storageTypes, primaryType: "Voucher", message: { seller: info.seller, size, cid, expires: BigInt(expires) } });

  /** A HEAD or refused download's answer as an error (a HEAD answer has no body to parse). */
  async function refusal(res: Response): Promise<StorageApiError> {
    const text = await res.text();
    return new StorageApiError(res.status, text && res.headers.get("content-type")?.includes("json") ? (JSON.parse(text) as StorageApiError["body"]) : {});
  }

  /**
   * Sends one file as a signed upload (D5, D6) with a fresh voucher, signing again when another
   * transfer of this payer overtook it; answers the gateway's JSON.
   */
  async function send<T>(kind: StorageKind, blob: Blob | SizedSource, o: { name: string; payload: string; cid: string; type?: string; fields?: Record<string, string>; onProgress?: (sent: number, total: number) => void }): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      // The voucher names the file's Cid (D22): the payload's, or a cid field when the payload is a hash.
      const v = await voucher(blob.size, o.cid);
      let answered: T;
      try {
        const fields = { ...(await signed("upload", o.payload)), ...v.fields, ...(o.cid !== o.payload ? { cid: o.cid } : {}), ...o.fields };
        const { body, asBlob, type, length } = multipart(fields, { name: o.name, blob, type: o.type });
        const headers = { ...(await auth()), "content-type": type, "content-length": String(length) };
        const Xhr = (globalThis as { XMLHttpRequest?: ProgressRequestClass }).XMLHttpRequest;
        const whole = asBlob();
        if (Xhr && whole && !opts.fetch) {
          const progress = (sent: number) => o.onProgress?.(sent, length);
          answered = await answer<T>(await sendWithProgress(Xhr, `${base}/${kind}/`, headers, whole, progress));
        } else {
          // `duplex: "half"`: Node's fetch (undici) refuses a stream body without it; Bun and browsers accept it.
          answered = await call<T>(`/${kind}/`, { method: "POST", headers, body: o.onProgress ? counted(body, { onRead: (sent) => o.onProgress?.(sent, length) }) : body, duplex: "half" } as RequestInit);
        }
      } catch (err) {
        v.transfer.end(undefined);
        // As for downloads: a voucher overtaken by a parallel transfer (see `voucher`). The
        // refused upload kept nothing; the next attempt takes a new requestID and voucher.
        if (attempt < 4 && overtaken(err)) continue;
        throw err;
      }
      // The gateway counted the file's bytes (D6) in the commit that answered.
      v.transfer.end(blob.size);
      return answered;
    }
  }

  async function buy(what: "buyspace" | "buytraffic", o: { size?: number; idempotencyKey?: string; kind?: StorageKind }) {
    const headers = { ...(await auth()), ...(o.idempotencyKey ? { "idempotency-key": o.idempotencyKey } : {}) };
    return call<PurchaseResult>(`/${o.kind ?? "dfs"}/${what}${o.size !== undefined ? `?size=${o.size}` : ""}`, { headers });
  }

  return {
    info,
    did,
    get accessToken() {
      return accessToken;
    },
    /** The access token the next call carries: `tokenProvider`'s (kept fresh by its owner) or `accessToken`. */
    currentAccessToken: async (): Promise<string | undefined> => (opts.tokenProvider ? opts.tokenProvider() : accessToken),

    /** POST /login: opens a session (requestID back to 1) and takes the account API's tokens. */
    async login() {
      const token = randomHex(32);
      // A fresh token is a fresh session, so the current second is always new for it (D14: login
      // timestamps are monotonic per session, not per DID).
      const timestamp = BigInt(Math.floor(Date.now() / 1000));
      const signature = await opts.account.signTypedData({ domain, types: storageTypes, primaryType: "Login", message: { did, token, timestamp } });
      const answer = await call<{ data: DidLoginTokens }>("/login", {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ did, token, timestamp: Number(timestamp), signature }),
      });
      accessToken = answer.data.accessToken;
      session = { token, next: 1n };
      return answer.data;
    },

    /**
     * Signs restricted calls in a session opened elsewhere, from requestID 1: the one a session
     * grant's registration opened for this client's key (`grantSessionKey(...).token`).
     */
    useSession(token: string) {
      if (!/^0x([0-9a-f]{2}){16,64}$/.test(token)) throw new Error("a session token is 16 to 64 bytes of 0x-hex");
      session = { token: token as Hex, next: 1n };
    },

    /** GET /login?did=: the latest session's token, timestamp and requestID. */
    loginInfo: (forDid = did) => call<LoginInfo>(`/login?did=${encodeURIComponent(forDid)}`),

    /** Signs a restricted call (D5) with this session's next requestID: for the signed calls of other APIs (the keys SDK, D18). */
    signRequest: signed,

    /** GET /traffichash: the counter, and with `cid` the digest of a voucher of `size` for that file. */
    trafficHash: async (size: number | bigint, o: { cid?: string; expires?: number } = {}) => {
      const q = new URLSearchParams({ size: String(size), ...(o.cid !== undefined ? { cid: o.cid } : {}), ...(o.expires ? { expires: String(o.expires) } : {}) });
      return call<TrafficHashResult>(`/traffichash?${q}`, { headers: await auth() });
    },

    /**
     * Uploads a file (a Blob, bytes, or a path on disk) to `kind`; answers its entry.
     * `onProgress` hears the bytes of the request sent so far (in a browser, as the network takes them).
     */
    async upload(kind: StorageKind, source: Source, o: { name?: string; encryption?: string; onProgress?: (sent: number, total: number) => void } = {}): Promise<FileEntry> {
      const blob = toBlob(source);
      const name = o.name ?? nameOf(source, blob);
      const payload = await cidOfStream(blob.stream());
      return send<FileEntry>(kind, blob, { name, payload, cid: payload, fields: o.encryption ? { encryption: o.encryption } : {}, onProgress: o.onProgress });
    },

    /**
     * Imports a CAR (a Blob, bytes, or a path on disk) into ipfs: every block checked against its
     * Cid, each root (a UnixFS file or directory) a file with its own Cid, all or nothing. Answers
     * the files, one per root: with one root named `name` (default the file's name) less `.car`.
     */
    async importCar(source: Source, o: { name?: string; onProgress?: (sent: number, total: number) => void } = {}): Promise<FileList> {
      const blob = toBlob(source);
      const name = o.name ?? nameOf(source, blob);
      // Signed as the CAR's SHA-256: its bytes are what this request carries.
      const payload = bytesToHex(await sha256Of(blob.stream())).slice(2);
      // The voucher names the CAR's first root, as the gateway checks it.
      const [first] = await readCar(blob.stream()).roots();
      if (!first) throw new TypeError("the CAR names no root");
      return send<FileList>("ipfs", blob, { name, payload, cid: first.toV1().toString(), type: CAR_MEDIA_TYPE, onProgress: o.onProgress });
    },

    /**
     * Downloads by Cid; `range` is inclusive. Resolves with the Response to stream from. A HEAD
     * goes with the Bearer token instead of a voucher: it charges nothing and spends none.
     */
    async download(kind: StorageKind, cid: string, o: { range?: [number, number]; size?: number; method?: "GET" | "HEAD" } = {}): Promise<Response> {
      const headers: Record<string, string> = o.range ? { range: `bytes=${o.range[0]}-${o.range[1]}` } : {};
      if (o.method === "HEAD") {
        const res = await doFetch(`${base}/${kind}/${cid}`, { method: "HEAD", headers: { ...headers, ...(await auth()) } });
        if (res.ok) return res;
        throw await refusal(res);
      }
      // The voucher names the file in its canonical form, as the gateway reads the path's Cid.
      const file = fileCid(cid);
      const bytes = o.range ? o.range[1] - o.range[0] + 1 : (o.size ?? (await this.sizeOf(kind, cid)));
      // A delegate key reads for the DID it signs for: `did` names it (the owner's own key needs none).
      const forDid = opts.did ? `&did=${encodeURIComponent(did)}` : "";
      for (let attempt = 1; ; attempt++) {
        const v = await voucher(bytes, file);
        let res: Response;
        try {
          res = await doFetch(`${base}/${kind}/${cid}?size=${v.fields.size}&sign=${v.fields.sign}${forDid}`, { method: "GET", headers });
        } catch (err) {
          v.transfer.end(undefined);
          throw err;
        }
        v.transfer.answered();
        if (res.ok) {
          // A body counts once read to its end (what the gateway sent).
          if (!res.body) {
            v.transfer.end(0);
            return res;
          }
          return new Response(counted(res.body, { onEnd: v.transfer.end }), { status: res.status, statusText: res.statusText, headers: res.headers });
        }
        v.transfer.end(undefined);
        const err = await refusal(res);
        // Parallel transfers of this client may reach the server (or its several gateways) in
        // another order than they were signed in: one signed later may be counted before this
        // one is accepted, leaving its voucher short. The server refused it before anything
        // moved and kept nothing, so sign again from the counter as it is now.
        if (attempt < 4 && overtaken(err)) continue;
        throw err;
      }
    },

    /** The size of a readable file, from a HEAD (which charges nothing). */
    async sizeOf(kind: StorageKind, cid: string): Promise<number> {
      const res = await this.download(kind, cid, { method: "HEAD" });
      return Number(res.headers.get("content-length"));
    },

    /**
     * A link anyone can open (with a browser or curl) to read one readable file once, on this
     * account's traffic, until `expires` (unix seconds; 0: until it is used). It is a voucher in
     * a URL, signed here, and sent nowhere: whoever holds it may use it, so share it as a secret.
     * `bytes` is the file's size when known (else a HEAD asks).
     */
    async link(kind: StorageKind, cid: string, o: { expires?: number; bytes?: number } = {}): Promise<FileLink> {
      const file = fileCid(cid);
      const expires = o.expires ?? 0;
      if (!Number.isSafeInteger(expires) || expires < 0) throw new RangeError(`expires must be unix seconds or 0 (got ${expires})`);
      const bytes = o.bytes ?? (await this.sizeOf(kind, file));
      const size = (await counter()) + BigInt(bytes) + LINK_ROOM + BigInt(Math.floor(Math.random() * LINK_SPREAD));
      const sign = await signVoucher(size, file, expires);
      const q = new URLSearchParams({ size: String(size), sign, ...(expires ? { expires: String(expires) } : {}), ...(opts.did ? { did } : {}) });
      return { url: `${base}/${kind}/${file}?${q}`, kind, cid: file, bytes, size, expires, payer: opts.account.address };
    },

    list: async (kind: StorageKind, page: { limit?: number; after?: number } = {}) => {
      const q = new URLSearchParams(Object.entries(page).map(([k, v]): [string, string] => [k, String(v)]));
      return call<FileList>(`/${kind}/listobjects${q.size ? `?${q}` : ""}`, { headers: await auth() });
    },

    /** Remaining storage space (spec 2.6); `dfs` and `ipfs` share one pool. */
    space: async (kind: StorageKind = "dfs") => call<QuotaRecord>(`/${kind}/space`, { headers: await auth() }),
    /** Remaining traffic (spec 2.6). */
    traffic: async (kind: StorageKind = "dfs") => call<QuotaRecord>(`/${kind}/traffic`, { headers: await auth() }),
    /** Buys space with the deposit (D8); the same `idempotencyKey` buys once. */
    buySpace: (o: { size?: number; idempotencyKey?: string; kind?: StorageKind } = {}) => buy("buyspace", o),
    buyTraffic: (o: { size?: number; idempotencyKey?: string; kind?: StorageKind } = {}) => buy("buytraffic", o),

    /** Deletes a dfs file by its ID (a signed restricted call). */
    async delete(id: number, kind: StorageKind = "dfs") {
      const q = new URLSearchParams({ id: String(id), ...(await signed("delete", String(id))) });
      return call<{ Status: string }>(`/${kind}/delete?${q}`, { headers: await auth() });
    },
  };
}

export type StorageClient = Awaited<ReturnType<typeof connectStorage>>;
