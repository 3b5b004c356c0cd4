/**
 * The storage middleware's operations (spec 4.1 rows 1–8): login, upload, download, list and
 * delete over the `dfs` and `ipfs` back-ends. Routes parse; this file decides.
 *
 * @example
 *   const storage = createStorage({ db, backends, tokens, users, resolver, domain, seller, … })
 *   const entry = await storage.upload(request, "dfs")
 */
import { CID } from "multiformats/cid";
import type { Address, TypedDataDomain } from "viem";
import type { TokenService } from "../accounts/tokens.ts";
import type { UserService } from "../accounts/users.ts";
import type { Db } from "../db/open.ts";
import { StorageError, storageError } from "../http/errors.ts";
import { canonicalDid, didAddressKey, parseDid, type Did } from "../identity/did.ts";
import type { DidResolver } from "../identity/resolver.ts";
import type { Logger } from "../log.ts";
import { requireCaller, type Caller } from "./auth.ts";
import type { Backend, BackendKind } from "./backend.ts";
import { cleanName, createFiles, fileEntry } from "./files.ts";
import { readFilePart } from "./multipart.ts";
import { createSessions, type LoginInput } from "./sessions.ts";
import { contentDisposition, meterDownload, meterUpload, parseRange } from "./transfer.ts";
import { createVouchers } from "./vouchers.ts";
import type { Meter } from "../quota/meter.ts";
import { isBackendKind } from "./kinds.ts";
import { createRateLimiter } from "../http/rate-limit.ts";


/** Who else may read a Cid: the directory's grants (D9, D10). */
/** The owner whose directory entry lets `reader` read the Cid, if any. */
export type ReadGrant = (reader: Address, kind: BackendKind, cid: string) => Promise<Address | undefined>;

export interface StorageDeps {
  db: Db;
  log: Logger;
  chainId: number;
  maxBody: number;
  backends: Partial<Record<BackendKind, Backend>>;
  tokens: Pick<TokenService, "verifyAccessToken" | "issue">;
  users: Pick<UserService, "upsert">;
  resolver: DidResolver;
  domain: TypedDataDomain;
  seller: Address;
  readGrant?: ReadGrant;
  /** Whether the caller's own directory entry for a Cid is public (listobjects' `Public`). */
  isPublic?: (owner: Address, cid: string) => boolean;
  /** Quota enforcement (D7); absent, only the vouchers bound use. */
  meter?: Meter;
  /** Rate limits of POST /login (per client address and per DID); on unless false. */
  rateLimits?: boolean;
  loginLimits?: typeof LOGIN_LIMITS;
  now?: () => number;
}

const HEX64 = /^(0x)?[0-9a-fA-F]{64}$/;

/** Downloads up to one chunk are read whole before they are answered (see `download`). */
export const WHOLE_BODY_MAX = 1024 * 1024;

/** DID logins per client address and per DID. Higher than D12's 30 account logins a minute: the
 * `stowage` user commands log in once per command, and a script may run many. */
export const LOGIN_LIMITS = {
  perIp: { name: "did-login-ip", max: 60, windowMs: 60_000 },
  perDid: { name: "did-login-did", max: 60, windowMs: 60_000 },
};

export function createStorage(deps: StorageDeps) {
  const { db, log, chainId, backends } = deps;
  const sessions = createSessions({ db, resolver: deps.resolver, domain: deps.domain, chainId, now: deps.now });
  const vouchers = createVouchers({ db, domain: deps.domain, seller: deps.seller, now: deps.now });
  const files = createFiles(db, deps.now);
  const caller = (request: Request) => requireCaller(request, deps.tokens, chainId);

  function backend(kind: string): Backend {
    const b = isBackendKind(kind) ? backends[kind] : undefined;
    if (!b) throw storageError.unsupportedType();
    return b;
  }

  /** Releases content a file row no longer references, without failing the request. */
  async function release(b: Backend, cid: string) {
    await b.release(cid).catch((err) => log.error("releasing content failed", { backend: b.kind, cid, err: (err as Error).message }));
  }

  async function upload(request: Request, kind: string) {
    const b = backend(kind);
    const who = await caller(request);
    const declared = Number(request.headers.get("content-length") ?? 0);
    if (declared > deps.maxBody + 1024 * 1024) throw storageError.tooLarge(deps.maxBody);

    const part = await readFilePart(request);
    let quota: Awaited<ReturnType<Meter["beginUpload"]>> | undefined;
    try {
      const name = cleanName(part.filename);
      const payload = String(part.fields.payload ?? "");
      if (!HEX64.test(payload)) throw storageError.badRequest("payload must be the file's SHA-256 in hex");
      await sessions.restricted({ ...part.fields, payload }, "upload", who.did);
      const voucher = await vouchers.payerOf(part.fields);
      if (voucher.payer !== who.did.address && !(await deps.resolver.canSign(who.did, voucher.payer))) {
        throw storageError.address("the voucher's payer is not the Bearer account or one of its keys");
      }
      quota = await deps.meter?.beginUpload(who.did.address, who.did.canonical, { declared: Number.isFinite(declared) ? declared : undefined, backend: b.kind, name });
      const accepted = vouchers.accept(voucher);
      const limit = Math.min(accepted.allowance, deps.maxBody);
      const { stream, meter } = meterUpload(
        part.stream,
        limit,
        () => (limit === deps.maxBody ? storageError.tooLarge(deps.maxBody) : storageError.quota(`the voucher allows ${accepted.allowance} more bytes`)),
        (n) => quota?.add(n),
      );
      let pending: Awaited<ReturnType<Backend["put"]>>;
      try {
        pending = await b.put(stream);
      } catch (err) {
        if (meter.failure || err instanceof StorageError) throw meter.failure ?? err;
        // The client's broken or abandoned body is its fault; a back-end failure is ours (500).
        throw meter.interrupted ? storageError.badRequest("the upload was interrupted") : err;
      }
      if (meter.sha256() !== payload.toLowerCase().replace(/^0x/, "")) {
        await pending.abort();
        throw storageError.badRequest("payload does not match the file's SHA-256: nothing was kept");
      }
      try {
        await pending.commit();
      } catch (err) {
        await pending.abort().catch(() => {}); // never leave a put neither committed nor aborted
        throw err;
      }
      let added: ReturnType<typeof files.add>;
      try {
        // The quota's exact check runs in the transaction that records the file (D14).
        added = files.add({ did: who.did.canonical, backend: b.kind, name, cid: pending.cid, size: pending.size, encryption: String(part.fields.encryption ?? "") }, quota && ((tx) => quota?.commit(tx, pending.size, meter.bytes)));
      } catch (err) {
        quota?.release(); // before any await: a refused upload never counts against another's check
        await release(b, pending.cid);
        throw err;
      }
      // The file is stored: what follows is bookkeeping, and its failure must not turn a stored
      // file into an error answer.
      try {
        vouchers.settle(accepted, meter.bytes);
      } catch (err) {
        log.error("settling an upload's counters failed", { cid: pending.cid, err: (err as Error).message });
      }
      if (added.replaced) await release(b, added.replaced);
      return fileEntry(added.row, deps.isPublic?.(who.did.address, added.row.cid));
    } finally {
      quota?.release(); // a no-op once committed
      part.stream.resume();
      part.stop();
    }
  }

  /** The file entry a reader reads through: its own, or that of the owner whose directory entry
   * grants it (never another owner's private name for the same bytes). */
  async function readableRow(reader: Address, kind: BackendKind, cid: string) {
    const own = files.owns(canonicalDid(reader, chainId), kind, cid);
    if (own) return own;
    const owner = await deps.readGrant?.(reader, kind, cid);
    return owner ? files.owns(canonicalDid(owner, chainId), kind, cid) : undefined;
  }

  /** Whom a download reads for: the payer, or the DID `did` names when the payer is one of its keys (D2). */
  async function readerOf(payer: Address, did: string | undefined): Promise<Address> {
    if (!did) return payer;
    let who: Did;
    try {
      who = parseDid(did, chainId);
    } catch (err) {
      throw storageError.badRequest((err as Error).message);
    }
    if (who.address !== payer && !(await deps.resolver.canSign(who, payer))) throw storageError.forbidden("Permission denied: the voucher's payer is not a key of this DID");
    return who.address;
  }

  async function download(request: Request, kind: string, cidParam: string, query: { size?: string; sign?: string; did?: string }) {
    const b = backend(kind);
    const { payer, size } = await vouchers.payerOf(query);
    let cid: string;
    try {
      cid = CID.parse(cidParam).toV1().toString();
    } catch {
      throw storageError.badRequest("not a Cid");
    }
    const reader = await readerOf(payer, query.did);
    const row = await readableRow(reader, b.kind, cid);
    if (!row) throw storageError.forbidden("Permission denied: this voucher's payer may not read this file");
    const stat = await b.stat(cid);
    if (!stat) throw storageError.notFound("File not found");

    const range = parseRange(request.headers.get("range"), stat.size);
    const headers: Record<string, string> = {
      "content-type": Bun.file(row.name).type || "application/octet-stream",
      "content-disposition": contentDisposition(row.name),
      etag: `"${cid}"`,
      "accept-ranges": "bytes",
      "cache-control": "no-store",
      "referrer-policy": "no-referrer",
    };
    if (range === "unsatisfiable") {
      return new Response(null, { status: 416, headers: { ...headers, "content-range": `bytes */${stat.size}` } });
    }
    const length = range ? range.end - range.start + 1 : stat.size;
    headers["content-length"] = String(length);
    if (range) headers["content-range"] = `bytes ${range.start}-${range.end}/${stat.size}`;
    const status = range ? 206 : 200;
    if (request.method === "HEAD") return new Response(null, { status, headers });

    const traffic = await deps.meter?.beginDownload(reader, length);
    let accepted: ReturnType<typeof vouchers.accept>;
    try {
      accepted = vouchers.accept({ payer, size }, length);
    } catch (err) {
      traffic?.settle(0); // the reservation must not outlive a refused voucher
      throw err;
    }
    const settle = (sent: number) => {
      vouchers.settle(accepted, sent);
      traffic?.settle(sent);
    };
    if (length <= WHOLE_BODY_MAX) {
      // A small body is read (and its hashes checked) before the headers go out: a failure is
      // then a clean 500. Larger ones stream, with their Content-Length all the same (http/listen.ts).
      let bytes: Uint8Array;
      try {
        bytes = new Uint8Array(await new Response(b.read(cid, range)).arrayBuffer());
      } catch (err) {
        settle(0);
        throw err;
      }
      settle(bytes.byteLength);
      return new Response(bytes, { status, headers });
    }
    return new Response(meterDownload(b.read(cid, range), settle, () => traffic?.renew()), { status, headers });
  }

  async function list(request: Request, kind: string, page: { limit?: string; after?: string }) {
    const b = backend(kind);
    const who = await caller(request);
    const limit = page.limit === undefined ? undefined : Number(page.limit);
    const after = page.after === undefined ? undefined : Number(page.after);
    if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= 1000)) throw storageError.badRequest("limit must be 1 to 1000");
    if (after !== undefined && !(Number.isInteger(after) && after >= 0)) throw storageError.badRequest("after must be a file ID");
    let rows: ReturnType<typeof files.list>;
    try {
      rows = files.list(who.did.canonical, b.kind, { limit, after });
    } catch (err) {
      throw storageError.listFailed((err as Error).message);
    }
    return { Address: who.did.address, Storage: b.kind, Object: rows.map((r) => fileEntry(r, deps.isPublic?.(who.did.address, r.cid))) };
  }

  /** Delete (spec 4.1 rule 4): dfs only; failures carry `Status: "Failure"` (D9). */
  async function remove(request: Request, kind: string, query: Record<string, string | undefined>) {
    try {
      if (kind !== "dfs") throw storageError.unsupportedType();
      const b = backend(kind);
      const who: Caller = await caller(request);
      const idText = query.id ?? "";
      await sessions.restricted({ ...query, payload: query.payload }, "delete", who.did);
      if (query.payload !== idText) throw storageError.unauthorized("payload must be the file id");
      if (!/^\d{1,15}$/.test(idText)) throw storageError.notFound("File not found");
      const row = files.remove(who.did.canonical, b.kind, Number(idText));
      await release(b, row.cid);
      return { Status: "Success" as const };
    } catch (err) {
      // Every failure, a 500 included, carries Status: "Failure" (D9).
      if (!(err instanceof StorageError)) log.error("delete failed", { err: err instanceof Error ? (err.stack ?? err.message) : String(err) });
      const e = err instanceof StorageError ? err : storageError.internal();
      throw new StorageError(e.status, e.description, { ...e.extra, body: { ...e.extra.body, Status: "Failure" } });
    }
  }

  const limiter = createRateLimiter({ enabled: deps.rateLimits !== false, now: deps.now });

  /** POST /login; with `json`, the answer carries the account API's tokens for this DID. */
  async function login(input: LoginInput, json: boolean, ip: string) {
    // One DID, however it is spelled, shares one limit.
    const limits = deps.loginLimits ?? LOGIN_LIMITS;
    for (const [limit, key] of [[limits.perIp, ip], [limits.perDid, didAddressKey(String(input.did ?? ""))]] as const) {
      const verdict = limiter.hit(limit, key);
      if (!verdict.ok) throw storageError.rateLimited(verdict.retryAfter);
    }
    const { did, signer } = await sessions.login(input);
    if (!json) return undefined;
    const user = deps.users.upsert(did.address, { refresh: { address: did.address, did: did.canonical } });
    const pair = await deps.tokens.issue(user, "did", { source: "did-login", signer });
    return { did: did.canonical, accessToken: pair.accessToken, refreshToken: pair.refreshToken };
  }

  async function trafficHash(request: Request, size: unknown) {
    const who = await caller(request);
    return vouchers.hashFor(who.did.address, size);
  }

  return { upload, download, list, remove, login, loginInfo: sessions.info, trafficHash, backend, files, vouchers };
}

export type Storage = ReturnType<typeof createStorage>;
