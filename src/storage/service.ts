/**
 * The storage middleware's operations (spec 4.1 rows 1–8): login, upload, download, list and
 * delete over the `dfs` and `ipfs` back-ends. Routes parse; this file decides. It takes typed
 * input (the caller, a form's fields and its file stream, a byte range) and returns typed results
 * (file entries, a readable file): requests, headers, Range, multipart and HEAD are the routes'.
 *
 * @example
 *   const storage = createStorage({ sql, backends, tokens, users, resolver, domain, seller, … })
 *   const entry = await storage.upload(caller, storage.kind("dfs"), { declared, form: () => readFilePart(request) })
 */
import { CID } from "multiformats/cid";
import { getAddress, isAddress, isAddressEqual, type Address, type TypedDataDomain } from "viem";
import type { TokenService } from "../accounts/tokens.ts";
import type { UserService } from "../accounts/users.ts";
import type { Queryable, Sql } from "../db/sql.ts";
import { StorageError, storageError, storageErrorOf } from "../http/errors.ts";
import { Failure, failure } from "../failure.ts";
import { type DidLoginTokens, type FileEntry, type FileList, type StorageKind, type TrafficHashResult } from "../http/model.ts";
import { canonicalDid, didAddressKey, parseDid, type Did } from "../identity/did.ts";
import type { DidResolver } from "../identity/resolver.ts";
import type { Logger } from "../log.ts";
import type { Backend, BackendKind, ByteRange } from "./backend.ts";
import { backendLookup } from "./errors.ts";
import { cleanName, createFiles, fileEntry, type PublicSql } from "./files.ts";
import { createSessions, type LoginInput, type SessionKeys } from "../authorities/sessions.ts";
import { createPipeline } from "./pipeline.ts";
import { accountPays } from "../authorities/authority.ts";
import { downloadVoucher } from "../authorities/download-voucher.ts";
import { signedCall } from "../authorities/signed-call.ts";
import { createVouchers, oldVoucher, type SignedVoucher, type VoucherInput } from "../authorities/vouchers.ts";
import { canonicalCid } from "../cid/canonical.ts";
import type { Meter } from "../quota/meter.ts";
import { createRateLimiter, type Limit } from "../http/rate-limit.ts";
import type { SharedRateLimiter } from "../http/shared-rate-limit.ts";
import type { ClientKey } from "../http/client-key.ts";
import type { Denylist } from "../denylist/index.ts";

/** The routes' storage types and the back-ends' kinds are the same two names (a compile-time check). */
type SameKinds = [BackendKind] extends [StorageKind] ? ([StorageKind] extends [BackendKind] ? true : false) : false;
const sameKinds: SameKinds = true;
void sameKinds;

/** Who calls: the Bearer token's account and DID (the routes' guard, src/http/storage-guard.ts). */
export interface Caller {
  uid: string;
  did: Did;
}

/** An upload's form as the route read it: its fields, then its one file part's bytes. */
export interface UploadForm {
  fields: Record<string, string>;
  filename: string;
  /** The file part's Content-Type (lower case, no parameters), if the form gave one. */
  type?: string;
  /** The file's bytes as they arrive; a part that broke off fails them as "interrupted". */
  bytes: AsyncIterable<Uint8Array>;
  /** Stops reading the request (after a refusal, or once done). */
  stop(): void;
}

export interface UploadInput {
  /** The request's declared length (file plus framing), if any. */
  declared?: number;
  /** Reads the form; called only once the declared length is within bounds. */
  form: () => Promise<UploadForm>;
  /** The file is a CAR to import (`?format=car`); a file part of type application/vnd.ipld.car is one too. */
  car?: boolean;
}

/** The media type of a CAR (IANA): a file part of this type is imported, not stored as it is. */
export const CAR_TYPE = "application/vnd.ipld.car";

/** The query of a download: the traffic voucher (D6, D22: `size`, `sign`, and `expires` when it
 * is not 0) and, for a delegate key, the DID it reads for. */
export interface DownloadInput extends VoucherInput {
  size?: string;
  sign?: string;
  expires?: string;
  did?: string;
}

/** What a HEAD tells of a file a download may read: its headers. */
export interface FileHead {
  name: string;
  cid: string;
  size: number;
  /** The entry's `UserDefined.encryption` ("age" for a file encrypted by its client, D20), or "". */
  encryption: string;
  /** The DID whose entry this read goes through (the owner's, for a grantee): whose share to ask for. */
  owner: string;
}

/** How a HEAD shows it may know a file (D22): an unspent voucher for that Cid, or the Bearer
 * token of an account that may read it (asked for once the type and Cid are checked). */
export type HeadAccess = { voucher: DownloadInput } | { caller: () => Promise<Caller> };

/** A file a download may read: what its headers tell, and `send` to move its bytes. */
export interface ReadableFile extends FileHead {
  /**
   * Accepts the voucher and holds the traffic for `range` (or the whole file), then answers its
   * bytes: read whole when small (a damaged chunk is then an error before any byte goes out),
   * else a stream that counts what really went out.
   */
  send(range?: ByteRange): Promise<Uint8Array | ReadableStream<Uint8Array>>;
}

/** The owner whose directory entry lets `reader` read the Cid, if any: the directory's grants (D9, D10). */
export type ReadGrant = (reader: Address, kind: BackendKind, cid: string) => Promise<Address | undefined>;

export interface StorageDeps {
  sql: Sql;
  log: Logger;
  chainId: number;
  maxBody: number;
  backends: Partial<Record<BackendKind, Backend>>;
  tokens: Pick<TokenService, "verifyAccessToken" | "issue">;
  users: Pick<UserService, "upsert">;
  resolver: DidResolver;
  /** Console session keys the DID granted (D19): they may sign uploads, deletes and vouchers. */
  sessionKeys?: SessionKeys;
  domain: TypedDataDomain;
  seller: Address;
  readGrant?: ReadGrant;
  /** Those of `cids` whose owner's own directory entry is public: an upload's answer `Public`,
   * read in its file row's transaction `q` (listobjects reads the same flag in its page's own
   * query, src/storage/files.ts). */
  publicCids?: (owner: Address, cids: readonly string[], q?: Queryable) => Promise<ReadonlySet<string>>;
  /** The same flag as a condition listobjects embeds in its page's one query (the directory's). */
  publicSql?: PublicSql;
  /** Quota enforcement (D7); absent, only the vouchers bound use. */
  meter?: Meter;
  /** Content this gateway blocks (D25): its downloads answer 410, its uploads and CAR imports are refused. */
  denylist?: Pick<Denylist, "check" | "refuseUpload">;
  /** Hears of file bytes received (in) and sent (out), per back-end: the server's metrics. */
  onTransfer?: (backend: BackendKind, direction: "in" | "out", bytes: number) => void;
  /** Rate limits of POST /login (per client address and per DID) and of refused voucher payers; on unless false. */
  rateLimits?: boolean;
  loginLimits?: typeof LOGIN_LIMITS;
  refusedPayerLimit?: Limit;
  /** The shared database's counters (the account services' limiter), so the limits hold across gateways (D16). */
  loginLimiter?: Pick<SharedRateLimiter, "hit">;
  now?: () => number;
}

const HEX64 = /^(0x)?[0-9a-fA-F]{64}$/;

/**
 * What an upload's signed `payload` says its bytes are (D5): their SHA-256 in hex (old clients),
 * or their D9 Cid, a CIDv1 (the SDK's, so the server hashes each byte once: the back-end computes
 * the Cid anyway). The Cid is compared in its canonical form (base32), as back-ends answer it.
 */
function expectedContent(payload: string): { kind: "sha256" | "cid"; value: string } {
  if (HEX64.test(payload)) return { kind: "sha256", value: payload.toLowerCase().replace(/^0x/, "") };
  let cid: CID | undefined;
  try {
    cid = CID.parse(payload);
  } catch {
    cid = undefined;
  }
  if (cid?.version !== 1) throw storageError.badRequest("payload must be the file's SHA-256 in hex or its CIDv1");
  return { kind: "cid", value: cid.toString() };
}

/**
 * The Cid an upload's voucher names (D22): the payload when it is the Cid (what the SDK signs),
 * else the `cid` field (before the file part) of an upload signed by its SHA-256; undefined when
 * neither names one. Checked against the stored Cid when the upload ends.
 */
function voucherCidOf(expected: ReturnType<typeof expectedContent>, field: string | undefined): string | undefined {
  if (field === undefined || field === "") return expected.kind === "cid" ? expected.value : undefined;
  let cid: string;
  try {
    cid = canonicalCid(field);
  } catch {
    throw storageError.badRequest("cid must be the file's Cid");
  }
  if (expected.kind === "cid" && cid !== expected.value) throw storageError.badRequest("cid and payload name different files");
  return cid;
}

/** A path's Cid in the form vouchers sign (D22); 400 when it is not one. */
function pathCid(text: string): string {
  try {
    return canonicalCid(text);
  } catch {
    throw storageError.badRequest("not a Cid");
  }
}


/** DID logins per client address and per DID. Higher than D12's 30 account logins a minute: the
 * `stowage` user commands log in once per command, and a script may run many. */
export const LOGIN_LIMITS = {
  perIp: { name: "did-login-ip", max: 60, windowMs: 60_000 },
  perDid: { name: "did-login-did", max: 60, windowMs: 60_000 },
};

/**
 * Download vouchers per client whose payer a DID they name turned out not to have as a key. Each
 * cost a registry lookup (only the registry knows a DID's delegates, and any signature recovers
 * to some key), so past these a client's vouchers naming a DID for another key than its own
 * address are refused without asking (429) until the window ends. A DID's delegates are refused
 * almost never; a stranger sending random keys meets the limit at once.
 */
export const REFUSED_PAYER_LIMIT: Limit = { name: "voucher-payer-refused", max: 20, windowMs: 60_000 };

export function createStorage(deps: StorageDeps) {
  const { sql, log, chainId } = deps;
  const sessions = createSessions({ sql, resolver: deps.resolver, domain: deps.domain, chainId, now: deps.now, sessionKeys: deps.sessionKeys });
  /**
   * Whether `key` may sign vouchers for the DID: its owner, a delegate, or a session key it granted
   * (D21: the registry says which, now; the DID's own address is one of them only while it owns the
   * DID). The resolver's cache makes this a map lookup on the hot path.
   */
  // Per gateway, in memory: the limits of reads (the login limits count in the shared database
  // when there is one, see `hit`).
  const memoryLimiter = createRateLimiter({ enabled: deps.rateLimits !== false, now: deps.now });
  const refusedPayerLimit = deps.refusedPayerLimit ?? REFUSED_PAYER_LIMIT;
  const paysFor = async (who: Did, key: Address) => (await deps.resolver.canSign(who, key)) || ((await deps.sessionKeys?.allows(who, key, "voucher")) ?? false);
  const vouchers = createVouchers({ sql, domain: deps.domain, seller: deps.seller, now: deps.now });
  const files = createFiles(sql, deps.now, deps.publicSql);
  // The one write path, with this API's answer `Public` read where a file is recorded.
  const pipeline = createPipeline({ sql, log, maxBody: deps.maxBody, backends: deps.backends, meter: deps.meter, denylist: deps.denylist, publicCids: deps.publicCids, onTransfer: deps.onTransfer, now: deps.now });
  // Every back-end failure reaches this service already mapped (storage/errors.ts).
  const backend = backendLookup(deps.backends);

  /** A route's `:type` as a back-end this server runs, or the spec's 518. */
  const kind = (type: string): BackendKind => backend(type).kind;

  /**
   * POST /:type/upload (spec 4.1 row 2): the signed call is checked here — the payload and its
   * session's requestID, the voucher naming the file's Cid and a payer that may sign for the DID
   * now — before the body is read; the pipeline (pipeline.ts) then stores the file with that
   * signed call as its authority, which claims the requestID and the voucher where the file is
   * recorded (authorities/signed-call.ts). A replay or a used voucher is refused here already
   * (each was peeked), and the voucher's allowance bounds the body.
   *
   * Durability: the commits before the file row's (the blob pins, a large upload's quota holds)
   * are `durable: false` (sql.ts): in the WAL, which the OS holds, and fsynced by the next durable
   * commit in log order, so a power cut keeps a prefix of the commits. Before the file row's
   * commit is on disk the upload was not acknowledged and nothing of it counts (its chunks and
   * blocks, fsynced before any row names them, are orphans the start-up sweeps remove); after it,
   * the row, both claims and both counts are on disk. PostgreSQL ignores `durable: false`.
   */
  async function upload(who: Caller, kind: BackendKind, input: UploadInput): Promise<FileEntry | FileList> {
    const k = pipeline.kind(kind);
    // The declared length is judged before the form is read.
    pipeline.checkDeclared({ declared: input.declared, framed: true });
    const part = await input.form();
    const car = input.car === true || part.type === CAR_TYPE;
    try {
      const name = cleanName(part.filename);
      const payload = String(part.fields.payload ?? "");
      const expected = expectedContent(payload);
      // A Cid signed as the payload names the content before its bytes come: refused unread.
      if (expected.kind === "cid") deps.denylist?.refuseUpload(expected.value, car ? "import" : "upload");
      const request = await sessions.check({ ...part.fields, payload }, "upload", who.did);
      // An old client's voucher names no file: told what to sign now when its signer pays for the DID.
      const refuseOld = async () => {
        const legacy = vouchers.legacyPayerOf(part.fields);
        if (legacy && (await paysFor(who.did, legacy))) throw oldVoucher();
      };
      const voucherCid = voucherCidOf(expected, part.fields.cid);
      if (voucherCid === undefined) {
        await refuseOld();
        throw storageError.badRequest("a voucher names the file's Cid: sign the payload as the file's CIDv1, or send the Cid in a cid field before the file");
      }
      const voucher = await vouchers.payerOf(part.fields, voucherCid);
      if (!(await paysFor(who.did, voucher.payer))) {
        await refuseOld();
        throw storageError.address("the voucher's payer is not the Bearer account or one of its keys (a voucher signs the Cid of the file it uploads)");
      }
      // Not claimed yet: the session and what the voucher allows now are read with the quota's
      // first look (the pipeline's admit), a refusal before the body is read.
      const authority = signedCall(who.did, request, vouchers, voucher);
      const common = { declared: input.declared, framed: true, digest: expected.kind === "sha256" ? ("sha256" as const) : undefined, encryption: String(part.fields.encryption ?? ""), withPublic: true };
      const mismatch = (what: string) => failure("bad-input", `payload does not match the ${what}: nothing was kept`);
      const otherCid = (cid: string | undefined, what: string) => failure("bad-input", `the voucher names the Cid ${voucherCid}, but the ${what} is ${cid}: nothing was kept`);

      if (car) {
        const recorded = await pipeline.importCar(authority, k, name, part.bytes, {
          ...common,
          check: (arrived, roots) => {
            // The signed payload names these bytes: the CAR's SHA-256, or (one root) that root's Cid.
            if (expected.kind === "sha256" ? arrived.digest() !== expected.value : !(roots.length === 1 && roots[0]?.cid === expected.value)) throw mismatch(expected.kind === "sha256" ? "CAR's SHA-256" : "CAR's one root");
            // A voucher names one Cid (D22): a CAR's, its first root.
            if (roots[0]?.cid !== voucherCid) throw otherCid(roots[0]?.cid, "CAR's first root");
          },
        });
        return { Address: who.did.address, Storage: k, Object: recorded.map((r) => fileEntry(r.row, r.isPublic)) };
      }
      const { row, isPublic } = await pipeline.put(authority, k, name, part.bytes, {
        ...common,
        check: (arrived, cid) => {
          if (expected.kind === "sha256" ? arrived.digest() !== expected.value : cid !== expected.value) throw mismatch(`file's ${expected.kind === "sha256" ? "SHA-256" : "Cid"}`);
          if (cid !== voucherCid) throw otherCid(cid, "file's");
        },
      });
      return fileEntry(row, isPublic);
    } finally {
      part.stop();
    }
  }

  /** The file entry a reader reads through: its own, or that of the owner whose directory entry
   * grants it (never another owner's private name for the same bytes). */
  async function readableRow(reader: Address, kind: BackendKind, cid: string) {
    const own = await files.owns(canonicalDid(reader, chainId), kind, cid);
    if (own) return own;
    const owner = await deps.readGrant?.(reader, kind, cid);
    return owner ? await files.owns(canonicalDid(owner, chainId), kind, cid) : undefined;
  }

  /** Whom a download says it reads for: the DID `did` names (the payer being one of its keys, D2), else the payer's own. */
  function claimedReader(payer: Address, did: string | undefined): Did {
    if (!did) return { address: payer, canonical: canonicalDid(payer, chainId) };
    try {
      return parseDid(did, chainId);
    } catch (err) {
      throw storageError.badRequest((err as Error).message);
    }
  }

  /**
   * Whether the payer may act for the reader now (D21): one of the DID's keys, or for its own DID,
   * its owner still — once its DID has another owner, the old address is a stranger to its files
   * and its traffic. Asked only of a reader that may read the file, so a voucher from a random key
   * costs no registry read and takes no place in the resolver's cache.
   */
  async function checkPayer(reader: Did, payer: Address, named: boolean) {
    if (await paysFor(reader, payer)) return;
    throw storageError.forbidden(
      named ? "Permission denied: the voucher's payer is not a key of this DID" : "Permission denied: the voucher's payer may no longer sign for its own DID (the DID registry names another owner)",
    );
  }

  /**
   * Per client, the (DID, key) pairs a voucher naming a DID is being looked up for now: each counts
   * as a refusal until it is answered, so a burst of parallel requests cannot pass the limit before
   * the first refusal is counted. One key's parallel requests share one lookup (the resolver's)
   * and count once, so a delegate's parallel downloads are never held back.
   */
  const asking = new Map<ClientKey, Map<string, number>>();

  /** `checkPayer` for a key other than the DID's own address (which a voucher naming the DID
   * claims is a delegate), within the client's limit of refused ones (`REFUSED_PAYER_LIMIT`). */
  async function checkDelegate(who: Did, payer: Address, from: ClientKey) {
    const pair = `${who.address}:${payer}`;
    const mine = asking.get(from) ?? new Map<string, number>();
    const others = mine.size - (mine.has(pair) ? 1 : 0);
    const room = memoryLimiter.peek(refusedPayerLimit, from, others + 1);
    if (!room.ok) throw storageError.rateLimited(room.retryAfter);
    mine.set(pair, (mine.get(pair) ?? 0) + 1);
    asking.set(from, mine);
    try {
      await checkPayer(who, payer, true);
    } catch (err) {
      if (err instanceof StorageError && err.status === 403) memoryLimiter.hit(refusedPayerLimit, from);
      throw err;
    } finally {
      const left = (mine.get(pair) ?? 1) - 1;
      if (left > 0) mine.set(pair, left);
      else mine.delete(pair);
      if (mine.size === 0 && asking.get(from) === mine) asking.delete(from);
    }
  }

  /**
   * Whether `input`, read as the old two-field voucher, is signed by the very address that reads
   * `cid` (its own DID's, or the DID it names): an old client's voucher, refused with what to sign
   * now rather than as a stranger's. Only that address: any signature recovers to some key, so a
   * stranger's voucher naming another DID would otherwise buy a registry read for a random key on
   * each request. An old client signing with a delegate key is refused as a stranger is.
   */
  async function readsAsLegacy(input: DownloadInput, kind: BackendKind, cid: string): Promise<boolean> {
    const legacy = vouchers.legacyPayerOf(input);
    if (!legacy) return false;
    try {
      const who = claimedReader(legacy, input.did);
      if (!isAddressEqual(who.address, legacy)) return false;
      return (await readableRow(who.address, kind, cid)) !== undefined && (await paysFor(who, legacy));
    } catch {
      return false;
    }
  }

  /**
   * The entry a voucher's payer reads `cid` through, and for whom: 403 when neither the payer (or
   * the DID it signs for) nor a grant reads it — which is also where a voucher signed for another
   * file ends, its signature recovering some other key — or when the payer may not act for that
   * DID now; 517 for the old voucher type (its signer could read the file).
   */
  async function readableBy(voucher: SignedVoucher, input: DownloadInput, kind: BackendKind, cid: string, from: ClientKey) {
    try {
      const who = claimedReader(voucher.payer, input.did);
      const row = await readableRow(who.address, kind, cid);
      if (!row) throw storageError.forbidden("Permission denied: this voucher's payer may not read this file (a voucher reads only the file whose Cid it signs)");
      // Another key than the DID's own address: only the registry can tell, at a lookup each.
      if (isAddressEqual(who.address, voucher.payer)) await checkPayer(who, voucher.payer, input.did !== undefined && input.did !== "");
      else await checkDelegate(who, voucher.payer, from);
      return { reader: who, row };
    } catch (err) {
      if (err instanceof StorageError && err.status === 403 && (await readsAsLegacy(input, kind, cid))) throw oldVoucher();
      throw err;
    }
  }

  /** What a HEAD and a download answer in their headers; 404 when the content is gone. */
  async function headOf(b: Backend, cid: string, row: { name: string; encryption: string; did: string }): Promise<FileHead> {
    const stat = await b.stat(cid);
    if (!stat) throw storageError.notFound("File not found");
    return { name: row.name, cid, size: stat.size, encryption: row.encryption, owner: row.did };
  }

  /**
   * HEAD of a download (D22): the headers alone, for an unspent voucher for this very Cid (peeked,
   * never claimed: the same voucher then buys the GET) or the Bearer token of an account that may
   * read the file. Nothing is charged either way.
   */
  async function head(kind: string, cidText: string, access: HeadAccess, from: ClientKey): Promise<FileHead> {
    const b = backend(kind);
    const cid = pathCid(cidText);
    deps.denylist?.check(cid, "download");
    if ("caller" in access) {
      const who = await access.caller();
      const row = await readableRow(who.did.address, b.kind, cid);
      if (!row) throw storageError.forbidden("Permission denied: this account may not read this file");
      return headOf(b, cid, row);
    }
    const voucher = await vouchers.payerOf(access.voucher, cid);
    const { row } = await readableBy(voucher, access.voucher, b.kind, cid, from);
    await vouchers.peek(voucher);
    return headOf(b, cid, row);
  }

  /**
   * A file `voucher`'s payer may read (spec 4.1 row 8): 400 for a bad Cid, 517 without a voucher
   * (or with one of the old type), 403 once it expired or when neither the payer (or the DID it
   * signs for) nor a grant reads it, 404 when the content is gone. Nothing is charged until `send`.
   */
  async function download(kind: string, cidText: string, voucher: DownloadInput, from: ClientKey): Promise<ReadableFile> {
    const b = backend(kind);
    const cid = pathCid(cidText);
    // Blocked content answers 410 whoever asks, before any voucher is looked at or spent.
    deps.denylist?.check(cid, "download");
    const signed = await vouchers.payerOf(voucher, cid);
    const { reader, row } = await readableBy(signed, voucher, b.kind, cid, from);
    const file = await headOf(b, cid, row);
    // The pipeline reads it: the reader's traffic pool pays, and the voucher is claimed with it
    // (the download's authority); the content was found by `headOf` (a folder root is not).
    const authority = downloadVoucher(reader, vouchers, signed);
    const send = (range?: ByteRange) => pipeline.read(authority, { backend: b.kind, cid, size: file.size }, range, { found: true });
    return { ...file, send };
  }

  async function list(who: Caller, kind: BackendKind, page: { limit?: string; after?: string }): Promise<FileList> {
    const b = backend(kind);
    const limit = page.limit === undefined ? undefined : Number(page.limit);
    const after = page.after === undefined ? undefined : Number(page.after);
    if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= 1000)) throw storageError.badRequest("limit must be 1 to 1000");
    if (after !== undefined && !(Number.isInteger(after) && after >= 0)) throw storageError.badRequest("after must be a file ID");
    let rows: Awaited<ReturnType<typeof files.list>>;
    try {
      // A parsed DID's address is EIP-55, as the directory's entries hold their owners.
      rows = await files.list(who.did.canonical, who.did.address, b.kind, { limit, after });
    } catch (err) {
      throw storageError.listFailed((err as Error).message);
    }
    const entries = rows.map((r) => fileEntry(r, r.isPublic));
    return { Address: who.did.address, Storage: b.kind, Object: entries };
  }

  /**
   * Delete (spec 4.1 rule 4): where the back-end deletes (dfs); failures carry `Status: "Failure"`
   * (D9). The caller is asked for (`authenticate`) only after the type is checked, and inside: a
   * 401 carries it too.
   */
  async function remove(kind: string, authenticate: () => Promise<Caller>, query: Record<string, string | undefined>) {
    try {
      const k = pipeline.deletableKind(kind);
      const who = await authenticate();
      const idText = query.id ?? "";
      await sessions.restricted({ ...query, payload: query.payload }, "delete", who.did);
      if (query.payload !== idText) throw storageError.unauthorized("payload must be the file id");
      if (!/^\d{1,15}$/.test(idText)) throw storageError.notFound("File not found");
      await pipeline.remove(accountPays(who.did), k, { id: Number(idText) });
      return { Status: "Success" as const };
    } catch (err) {
      // Every failure, a 500 included, carries Status: "Failure" (D9).
      const known = err instanceof StorageError || err instanceof Failure;
      if (!known) log.error("delete failed", { err: err instanceof Error ? (err.stack ?? err.message) : String(err) });
      const e = known ? storageErrorOf(err) : storageError.internal();
      throw new StorageError(e.status, e.description, { ...e.extra, body: { ...e.extra.body, Status: "Failure" } });
    }
  }

  // In memory only without a shared limiter (one gateway) or with the limits off.
  const hit = async (limit: Limit, key: string) => (deps.rateLimits !== false && deps.loginLimiter ? deps.loginLimiter.hit(limit, key) : memoryLimiter.hit(limit, key));

  /**
   * POST /login; with `json`, the answer carries the account API's tokens for this DID. Logins
   * count per client before any signature work, and per DID only once the signature proves a key
   * that may sign for it: a stranger's garbage spends its own client's logins, never the DID's.
   */
  async function login(input: LoginInput, json: boolean, from: ClientKey): Promise<DidLoginTokens | undefined> {
    const limits = deps.loginLimits ?? LOGIN_LIMITS;
    const perClient = await hit(limits.perIp, from);
    if (!perClient.ok) throw storageError.rateLimited(perClient.retryAfter);
    const { did, signer } = await sessions.login(input, async (who) => {
      // One DID, however it is spelled, shares one limit.
      const perDid = await hit(limits.perDid, didAddressKey(who.canonical));
      if (!perDid.ok) throw storageError.rateLimited(perDid.retryAfter);
    });
    if (!json) return undefined;
    const user = await deps.users.upsert(did.address, { refresh: { address: did.address, did: did.canonical } });
    const pair = await deps.tokens.issue(user, "did", { source: "did-login", signer });
    return { did: did.canonical, accessToken: pair.accessToken, refreshToken: pair.refreshToken };
  }

  /**
   * GET /traffichash. `payer` names whose counter to answer when the vouchers are signed by one
   * of the account's keys (a delegate, a console session key, D19): each signer has a counter of
   * its own (D6), and a client signing from the account's counter would sign short vouchers.
   */
  async function trafficHash(who: Caller, query: { size?: unknown; cid?: unknown; expires?: unknown; payer?: string }): Promise<TrafficHashResult> {
    const { payer } = query;
    if (payer === undefined || payer === "") return vouchers.hashFor(who.did.address, query);
    if (!isAddress(payer, { strict: false })) throw storageError.badRequest("payer must be an address");
    const key = getAddress(payer);
    // A key that may not sign for the DID is refused as its signed calls are (D4: 401).
    if (!(await paysFor(who.did, key))) throw storageError.unauthorized("payer is not the DID's owner, a valid delegate or a granted session key");
    return vouchers.hashFor(key, query);
  }

  return { kind, upload, head, download, list, remove, login, loginInfo: sessions.info, trafficHash, files, vouchers, pipeline };
}

export type Storage = ReturnType<typeof createStorage>;
