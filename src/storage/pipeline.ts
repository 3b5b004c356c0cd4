/**
 * The one write path: every way a file arrives — the storage API's upload and CAR import, S3's
 * PutObject, copies, multipart parts and completions, a pin's blocks — goes through these steps,
 * in this order, with an authority (src/authorities/authority.ts) saying who pays and what the
 * write claims:
 *
 * 1. admit: the declared length against the body limit, then the account's quota meter opened
 *    (a pool of 0 refuses before the first byte), its first look read in one statement with the
 *    authority's (a signed call's session and voucher);
 * 2. receive: the bytes metered as they arrive — counted, stopped past the body limit or the
 *    authority's allowance, held in the account's pools (refused once they do not fit: no more
 *    than what is free reaches the back-end), digested when the caller asks — into the back-end,
 *    durable but unreferenced;
 * 3. check: the caller's check of what arrived (the signed payload, the voucher's Cid, a
 *    Content-MD5): refused, nothing is kept;
 * 4. record: one transaction (pending.ts `recordFiles` documents its order): the content's rows,
 *    the authority's claims, the quota's exact check under the account's lock, its counts, the
 *    directory's `Public` when asked, the reference of the entry the file replaced to its content;
 * 5. after: the blobs that content alone kept deleted, the transfer counted in the metrics, the
 *    quota's holds let go (a no-op once recorded).
 *
 * Reads (the storage API's download, whose voucher the authority claims with the traffic, and an
 * access key's) and deletes are here too. Callers pass typed input (a byte stream, names, a Did):
 * no request, header or form reaches this file, and every failure is the domain's
 * (src/failure.ts), mapped to the wire at each API's edge.
 *
 * @example
 *   const pipeline = createPipeline({ sql, log, maxBody, backends, meter })
 *   const { row } = await pipeline.put(accountPays(did), "dfs", "photos/a.jpg", body, { digest: "md5" })
 */
import type { Authority, ReadClaim } from "../authorities/authority.ts";
import { looks, type Queryable, type Sql } from "../db/sql.ts";
import type { Denylist } from "../denylist/index.ts";
import { failure } from "../failure.ts";
import type { Did } from "../identity/did.ts";
import type { Logger } from "../log.ts";
import type { Meter } from "../quota/meter.ts";
import type { Backend, BackendKind, ByteRange, PendingImport, PendingPut } from "./backend.ts";
import { backendLookup, carImporter, deletable } from "./errors.ts";
import { createFiles, importedNames, type Expectation, type FileRow, type NewFile, type Participant } from "./files.ts";
import { recordFiles, type AuthorityParticipants } from "./pending.ts";
import { meterDownload, wholeOf } from "./transfer.ts";

/** Downloads up to one chunk are read whole before they are answered: a damaged chunk is then a
 * clean error before any byte goes out. */
export const WHOLE_BODY_MAX = 1024 * 1024;

/** How much a form's declared length (a multipart body) may exceed the file's for its framing. */
const FORM_FRAMING = 1024 * 1024;

export interface PipelineDeps {
  sql: Sql;
  log: Logger;
  maxBody: number;
  backends: Partial<Record<BackendKind, Backend>>;
  /** Quota enforcement (D7); absent, nothing is metered (tests without a chain). */
  meter?: Meter;
  /** Content this gateway blocks (D25): refused on every write, unread (`readable`). */
  denylist?: Pick<Denylist, "check" | "refuseUpload">;
  /** Those of `cids` whose owner publishes them in the directory, read in the file row's
   * transaction: an upload's answer `Public`. */
  publicCids?: (owner: Did["address"], cids: readonly string[], q?: Queryable) => Promise<ReadonlySet<string>>;
  /** Hears of file bytes received (in) and sent (out), per back-end: the server's metrics. */
  onTransfer?: (backend: BackendKind, direction: "in" | "out", bytes: number) => void;
  now?: () => number;
}

/** What came in, for the caller's check before anything is kept. */
export interface Arrived {
  /** Bytes received (a CAR's, for an import). */
  bytes: number;
  /** The digest the caller asked for (`digest`), in hex, once every byte arrived. */
  digest(): string;
}

/**
 * What a file row keeps besides its content: the `UserDefined.encryption` mark, the S3 metadata
 * (a JSON text s3api/metadata.ts writes; null for none), the S3 flexible checksum as files.ts
 * stores it (asked once the bytes are in: a trailing one is known only then), a multipart
 * object's part sizes; and `expect`, a conditional write's test of the entry it would replace.
 */
export interface Stored {
  encryption?: string;
  metadata?: string | null;
  checksum?: () => string | undefined;
  parts?: string;
  expect?: Expectation;
}

export interface PutOptions extends Stored {
  /** The length the request declared; with `framed`, a form's (the file plus its framing). */
  declared?: number;
  framed?: boolean;
  /** Digest the bytes as they flow (`Arrived.digest`): the S3 ETag (md5), an old client's payload (sha256). */
  digest?: "md5" | "sha256";
  /** Sees what arrived, and the content's Cid, before anything is kept: throwing keeps nothing. */
  check?: (arrived: Arrived, cid: string) => void;
  /** The stored ETag from what arrived (none: the Cid shows). */
  etag?: (arrived: Arrived) => string | undefined;
  /** How many of the bytes count as traffic (default all; 0 for a server-side copy). */
  moved?: number;
  /** Read the directory's `Public` of the file in its transaction (the storage API's answer). */
  withPublic?: boolean;
}

export interface ImportOptions {
  declared?: number;
  framed?: boolean;
  digest?: "md5" | "sha256";
  /** Sees what arrived and the CAR's roots before anything is kept: throwing keeps nothing. */
  check?: (arrived: Arrived, roots: PendingImport["roots"]) => void;
  /** The files' `UserDefined.encryption` mark. */
  encryption?: string;
  /** Separator of a root's name under `name` (files.ts `importedNames`). */
  separator?: "/";
  withPublic?: boolean;
}

/** A file recorded: its row, and whether the owner publishes it (asked with `withPublic`). */
export interface Recorded {
  row: FileRow;
  isPublic: boolean;
}

/** What a read needs of a file: its back-end, its content and that content's size. */
export type Readable = Pick<FileRow, "backend" | "cid" | "size">;

/** A stashed part: its content, and the quota holds its bytes took as they arrived (see `stash`). */
export interface Stashed {
  cid: string;
  size: number;
  md5: string;
  holds(): number[];
  handedOver(): void;
  release(): Promise<void>;
}

type UploadMeter = Awaited<ReturnType<Meter["beginUpload"]>>;

const tooLarge = (limit: number) => failure("too-large", `Request body is larger than ${limit} bytes`);

/** What a stream carried: its length and digest, and the failure that stopped it, if any. */
interface Metered extends Arrived {
  failure?: unknown;
}

/**
 * `source` as a stream that counts its bytes, digests them when asked, and errors past `limit`
 * (with `over`) or when `onBytes` throws (a quota refusal), cancelling the source. A source that
 * fails is the answer as it failed (the caller maps its own: a broken form is "interrupted").
 */
function metered(source: AsyncIterable<Uint8Array>, limit: number, over: () => Error, onBytes: (n: number) => Promise<void> | void, digest?: "md5" | "sha256"): { stream: ReadableStream<Uint8Array>; meter: Metered } {
  const hasher = digest && new Bun.CryptoHasher(digest);
  let hex: string | undefined;
  const meter: Metered = {
    bytes: 0,
    // Once: a hasher's digest ends it.
    digest: () => {
      if (!hasher) throw new Error("this write was not digested");
      return (hex ??= hasher.digest("hex"));
    },
  };
  const it = source[Symbol.asyncIterator]();
  const stop = () => void Promise.resolve(it.return?.()).catch(() => {});
  const stream = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { value, done } = await it.next();
          if (done) return controller.close();
          meter.bytes += value.byteLength;
          if (meter.bytes > limit) throw over();
          await onBytes(value.byteLength);
          hasher?.update(value);
          controller.enqueue(value);
        } catch (err) {
          meter.failure ??= err;
          stop();
          controller.error(err);
        }
      },
      cancel: stop,
    },
    { highWaterMark: 0 },
  );
  return { stream, meter };
}

export function createPipeline(deps: PipelineDeps) {
  const { sql, log } = deps;
  const files = createFiles(sql, deps.now);
  // Every back-end failure reaches the pipeline already mapped (storage/errors.ts).
  const backend = backendLookup(deps.backends);

  /** A `:type` (or S3 bucket) as a back-end this gateway runs, or the `unsupported` failure. */
  const kind = (k: string): BackendKind => backend(k).kind;

  /** `kind`, for a back-end whose files may be deleted; else the `unsupported` failure (ipfs:
   * spec rule 4). A caller asks before it spends anything on the request. */
  const deletableKind = (k: string): BackendKind => deletable(backend(k)).kind;

  /** Releases content a file row no longer references, without failing the request. */
  async function release(b: Backend, cid: string) {
    await b.release(cid).catch((err) => log.error("releasing content failed", { backend: b.kind, cid, err: (err as Error).message }));
  }

  const letGo = (quota: UploadMeter | undefined) => quota?.release().catch((err) => log.error("releasing an upload's holds failed", { err: (err as Error).message }));

  /** Refuses a declared length past the body limit (a form's may exceed it by its framing): a
   * caller asks before it reads anything of the request, the pipeline again as it admits. */
  function checkDeclared(opts: { declared?: number; framed?: boolean }) {
    if (opts.declared !== undefined && opts.declared > deps.maxBody + (opts.framed ? FORM_FRAMING : 0)) throw tooLarge(deps.maxBody);
  }

  /** Step 1: the declared length, then the account's meter (`replaces`: the entry the file would
   * replace, whose bytes it need not find room for; none for a CAR's roots or a part). */
  async function admit(authority: Authority, opts: { declared?: number; framed?: boolean }, replaces?: { backend: BackendKind; name: string }): Promise<Admitted> {
    checkDeclared(opts);
    const declared = opts.declared;
    const { who } = authority;
    // The authority's look, the quota's first and whether the account's bucket exists, in one
    // statement (on PostgreSQL each outside a transaction is a commit).
    const first = await deps.meter?.uploadLook(who.address, who.canonical, { declared: declared !== undefined && declared > 0 && Number.isFinite(declared) ? declared : undefined, ...replaces });
    const [, quota, bucketMade] = await looks(sql, authority.look, first, files.bucketLook(who.canonical));
    return { quota, bucketMade };
  }

  /** What step 1 answers: the account's meter (none without quota), and whether its bucket exists. */
  type Admitted = { quota: UploadMeter | undefined; bucketMade: boolean };

  /** Step 2's meter: the body limit or the authority's allowance, whichever is less, and the quota's holds. */
  function meter(authority: Authority, source: AsyncIterable<Uint8Array>, quota: UploadMeter | undefined, digest?: "md5" | "sha256") {
    const allowance = authority.allowance;
    const byAllowance = allowance !== undefined && allowance.bytes < deps.maxBody;
    const limit = byAllowance ? allowance.bytes : deps.maxBody;
    return metered(source, limit, () => (byAllowance ? allowance.refusal() : tooLarge(deps.maxBody)), (n) => quota?.add(n), digest);
  }

  /** Runs `work` on the metered stream; the stream's own failure (a quota refusal, a broken
   * body) is the answer rather than the back-end's wrapping of it. */
  async function received<T>(m: Metered, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      throw m.failure ?? err;
    }
  }

  /** Step 3: the caller's check; refused, the content goes. */
  async function checked(pending: { abort(): Promise<void> }, check: () => void) {
    try {
      check();
    } catch (err) {
      await pending.abort();
      throw err;
    }
  }

  /** The authority's steps as the file row transaction's participants (pending.ts). */
  function participants(authority: Authority, moved: number): AuthorityParticipants {
    const { claim, count } = authority;
    return { ...(claim && { claims: { settle: claim } as Participant }), ...(count && { counts: { settle: count(moved) } as Participant }) };
  }

  /** Steps 4 and 5 for `rows` of one pending content. */
  async function keep(b: Backend, authority: Authority, rows: NewFile[], pending: Pick<PendingPut, "commit" | "commitIn" | "abort">, quota: UploadMeter | undefined, moved: number, opts: { expect?: Expectation; withPublic?: boolean; refuseAs?: "upload" | "import"; bucketMade?: boolean }): Promise<Recorded[]> {
    let publicOnes: ReadonlySet<string> | undefined;
    const also: Participant | undefined =
      opts.withPublic && deps.publicCids
        ? {
            settle: async (tx) =>
              void (publicOnes = await deps.publicCids?.(
                authority.who.address,
                rows.map((r) => r.cid),
                tx,
              )),
          }
        : undefined;
    const added = await recordFiles(files, rows, pending, {
      quota,
      moved,
      authority: participants(authority, moved),
      also,
      refuse: (cid) => deps.denylist?.refuseUpload(cid, opts.refuseAs),
      expect: opts.expect,
      bucketMade: opts.bucketMade,
      release: (tx, cid) => b.releaseIn(tx, cid),
      log,
    });
    if (moved > 0) deps.onTransfer?.(b.kind, "in", moved);
    return added.map((a) => ({ row: a.row, isPublic: publicOnes?.has(a.row.cid) ?? false }));
  }

  const fileOf = (authority: Authority, b: Backend, name: string, content: { cid: string; size: number }, stored: Stored, etag?: string): NewFile => ({
    did: authority.who.canonical,
    backend: b.kind,
    name,
    cid: content.cid,
    size: content.size,
    encryption: stored.encryption ?? "",
    etag,
    metadata: stored.metadata ?? null,
    checksum: stored.checksum?.(),
    parts: stored.parts,
  });

  /** Stores `source` as the file `name` on `kind`, replacing one of that name: every step above. */
  async function put(authority: Authority, k: BackendKind, name: string, source: AsyncIterable<Uint8Array>, opts: PutOptions = {}): Promise<Recorded> {
    const b = backend(k);
    const { quota, bucketMade } = await admit(authority, opts, { backend: b.kind, name });
    try {
      const { stream, meter: m } = meter(authority, source, quota, opts.digest);
      const pending = await received(m, () => b.put(stream));
      await checked(pending, () => opts.check?.(m, pending.cid));
      const moved = Math.min(opts.moved ?? m.bytes, m.bytes);
      const [out] = await keep(b, authority, [fileOf(authority, b, name, pending, opts, opts.etag?.(m))], pending, quota, moved, { ...opts, bucketMade });
      return out as Recorded;
    } finally {
      await letGo(quota);
    }
  }

  /**
   * Imports the CAR `source` into `kind` (D25: ipfs) as the files its roots make, named from
   * `name` (files.ts `importedNames`: the name itself for one root), replacing files of those
   * names: every block checked, all or nothing, through the same steps as `put`. The files keep
   * no ETag of their own (their bytes are not the CAR's): their Cid shows.
   */
  async function importCar(authority: Authority, k: BackendKind, name: string, source: AsyncIterable<Uint8Array>, opts: ImportOptions = {}): Promise<Recorded[]> {
    const b = backend(k);
    const importer = carImporter(b);
    // Its files are named by its roots, known once it is read: no entry is left out of the checks
    // as it streams (the exact check at the end counts what it replaces).
    const { quota, bucketMade } = await admit(authority, opts);
    try {
      const { stream, meter: m } = meter(authority, source, quota, opts.digest);
      const pending = await received(m, () => importer(stream));
      const roots = pending.roots;
      await checked(pending, () => opts.check?.(m, roots));
      const rows = importedNames(name, roots, opts.separator).map((rootName, i) => fileOf(authority, b, rootName, roots[i] as (typeof roots)[number], { encryption: opts.encryption }));
      return await keep(b, authority, rows, pending, quota, m.bytes, { withPublic: opts.withPublic, refuseAs: "import", bucketMade });
    } finally {
      await letGo(quota);
    }
  }

  /**
   * Stores the file `name` as the committed content `cids` one after the other, without reading
   * them when the back-end can compose them (Backend.compose: a multipart completion whose parts
   * line up on chunks); undefined when it cannot (the caller then streams them through `put`).
   * Every byte counts as traffic that came over the wire (as a multipart upload's parts did)
   * unless `moved` says how many did (0: a server-side copy).
   */
  async function compose(authority: Authority, k: BackendKind, name: string, cids: readonly string[], opts: Stored & { etag?: string; moved?: number }): Promise<Recorded | undefined> {
    const b = backend(k);
    if (!b.compose) return undefined;
    const pending = await b.compose(cids);
    if (!pending) return undefined;
    let admitted: Admitted;
    try {
      admitted = await admit(authority, { declared: pending.size }, { backend: b.kind, name });
    } catch (err) {
      await pending.abort().catch(() => {});
      throw err;
    }
    const { quota, bucketMade } = admitted;
    try {
      const [out] = await keep(b, authority, [fileOf(authority, b, name, pending, opts, opts.etag)], pending, quota, Math.min(opts.moved ?? pending.size, pending.size), { ...opts, bucketMade });
      return out as Recorded;
    } finally {
      await letGo(quota);
    }
  }

  /**
   * Stores content that arrives other than as one byte stream (a pin's DAG, block by block over
   * bitswap) through the same steps as `put`: `make` writes it through the back-end and calls
   * `onBytes` for each piece as it arrives (the meter's step 2: throwing once the pools or the
   * body limit cannot take it; `make` then keeps nothing). Every byte that arrived is traffic.
   */
  async function record(authority: Authority, k: BackendKind, name: string, make: (onBytes: (n: number) => Promise<void>) => Promise<PendingPut>): Promise<Recorded> {
    const b = backend(k);
    const { quota, bucketMade } = await admit(authority, {}, { backend: b.kind, name });
    let moved = 0;
    try {
      const pending = await make(async (n) => {
        moved += n;
        if (moved > deps.maxBody) throw tooLarge(deps.maxBody);
        await quota?.add(n);
      });
      const [out] = await keep(b, authority, [fileOf(authority, b, name, pending, {})], pending, quota, moved, { bucketMade });
      return out as Recorded;
    } finally {
      await letGo(quota);
    }
  }

  /**
   * Content held outside the catalog with one reference (a multipart upload's part): received
   * through the account's meter exactly as an upload is (steps 1–2), committed, and answered with
   * its Cid, size and MD5. Its holds are still live: the caller takes them over in the
   * transaction that records it (`holds`, then `handedOver` once that committed) and `release`s
   * them whatever happened.
   */
  async function stash(authority: Authority, k: BackendKind, source: AsyncIterable<Uint8Array>, opts: { declared?: number } = {}): Promise<Stashed> {
    const b = backend(k);
    const { quota } = await admit(authority, opts);
    const letGoHolds = async () => void (await letGo(quota));
    try {
      const { stream, meter: m } = meter(authority, source, quota, "md5");
      const pending = await received(m, () => b.put(stream));
      try {
        await pending.commit();
      } catch (err) {
        await pending.abort().catch(() => {});
        throw err;
      }
      return { cid: pending.cid, size: pending.size, md5: m.digest(), holds: () => quota?.holds() ?? [], handedOver: () => quota?.handedOver(), release: letGoHolds };
    } catch (err) {
      await letGoHolds();
      throw err;
    }
  }

  /** Throws the quota's refusal when the authority's pools are full now; holds nothing. */
  async function mayStore(authority: Authority): Promise<void> {
    await letGo((await admit(authority, {})).quota);
  }

  /**
   * The bytes of `file` (or a range), the authority's account paying the traffic and the
   * authority spending what it spends on a read (`reads`: a download voucher). Up to one chunk is
   * read whole before it is answered (`readWhole`: a damaged chunk is then a clean error before
   * any byte goes out); more streams, held and counted as it goes out (`readStream`). `found`: the
   * caller has found the content with the back-end's `stat` already (a folder root has none).
   */
  async function read(authority: Authority, file: Readable, range?: ByteRange, opts: { found?: boolean } = {}): Promise<Uint8Array | ReadableStream<Uint8Array>> {
    const b = backend(file.backend);
    const length = range ? range.end - range.start + 1 : file.size;
    if (length <= WHOLE_BODY_MAX) return readWhole(authority, b, file.cid, range, length);
    // A body that streams is answered 200 before its content is read: content no download can
    // stream (a CAR import's folder root) must be refused before that, and before any charge.
    if (!opts.found && !(await b.stat(file.cid))) throw failure("unsupported", "this entry is a folder (a CAR import's root): download its files by their own Cids");
    return readStream(authority, b, file.cid, range, length);
  }

  /**
   * A body of up to one chunk, read (its hashes checked) before any byte goes out. The authority's
   * spending and the traffic pool are checked before the read (no content is read for a request
   * that cannot pay), then decided and counted in one transaction — the traffic counted, the
   * authority's claim made and settled, no hold. On SQLite the read starts at its COMMIT and runs
   * while the log's fsync does (its statements run on this thread: a read begun earlier only
   * delays them); on PostgreSQL, whose transaction is round trips, it starts with the
   * transaction. A read that fails or comes short after the charge committed undoes it (the
   * traffic, the claim and its count): a failed read charges nothing.
   */
  async function readWhole(authority: Authority, b: Backend, cid: string, range: ByteRange | undefined, length: number): Promise<Uint8Array> {
    const reads = authority.reads;
    // The authority's look and the pool's in one statement (each outside a transaction is a
    // commit on PostgreSQL); the authority's refusal first.
    const [, traffic] = await looks(sql, reads?.look(length), await deps.meter?.wholeDownloadLook(authority.who.address, length));
    let reading: Promise<Uint8Array> | undefined;
    const start = () => {
      if (reading) return;
      reading = wholeOf(b.read(cid, range));
      reading.catch(() => {}); // awaited below once charged, not at all when the charge is refused
    };
    // Nothing to charge (no quota, nothing the authority spends): no transaction either.
    const charged = traffic || reads;
    if (sql.dialect !== "sqlite" || !charged) start();
    const claim = charged
      ? await sql.tx(
          async (tx) => {
            await traffic?.charge(tx);
            const made = await reads?.claim(tx, length);
            await made?.settle(length, tx);
            return made;
          },
          { isolation: "read committed", committed: start },
        ) // refused: nothing was counted
      : undefined;
    let bytes: Uint8Array;
    try {
      bytes = await (reading as Promise<Uint8Array>); // begun at the latest by `committed`
      if (bytes.byteLength !== length) throw new Error(`read ${bytes.byteLength} of ${length} bytes`);
    } catch (err) {
      if (charged) {
        await sql
          .tx(
            async (tx) => {
              await traffic?.refund(tx);
              await claim?.refund(length, tx);
            },
            { isolation: "read committed" },
          )
          .catch((e) => log.error("giving back a failed download's charge failed", { cid, err: (e as Error).message }));
      }
      throw err;
    }
    deps.onTransfer?.(b.kind, "out", length);
    return bytes;
  }

  /**
   * A larger body, streamed: its whole length held in the traffic pool from the start, the
   * authority's claim committed with that hold (on disk before any byte goes out; in a
   * transaction of its own without quota), the hold renewed while bytes flow, and what really
   * went out counted at the end, the traffic and the claim's count in one transaction.
   */
  async function readStream(authority: Authority, b: Backend, cid: string, range: ByteRange | undefined, length: number): Promise<ReadableStream<Uint8Array>> {
    const reads = authority.reads;
    let claim: ReadClaim | undefined;
    const withHold = reads && (async (tx: Queryable) => void (claim = await reads.claim(tx, length)));
    const traffic = await deps.meter?.beginDownload(authority.who.address, length, withHold);
    if (reads && !claim) claim = await sql.tx((tx) => reads.claim(tx, length), { isolation: "read committed" });
    const claimed = claim;
    // Bookkeeping once bytes went out: a failure is logged, never the download's answer.
    const settle = async (sent: number) => {
      deps.onTransfer?.(b.kind, "out", sent);
      try {
        if (traffic) await traffic.settle(sent, claimed && ((tx) => claimed.settle(sent, tx)));
        else await claimed?.settle(sent);
      } catch (err) {
        log.error("settling a download's counters failed", { cid, err: (err as Error).message });
      }
    };
    const renew = () => void traffic?.renew().catch((err) => log.error("renewing a download's hold failed", { cid, err: (err as Error).message }));
    return meterDownload(b.read(cid, range), settle, renew);
  }

  /** Deletes the authority's file `which` names (by id, or by name) where the back-end deletes
   * (spec rule 4), then releases its content; the row, or undefined when there was none. By name,
   * `expect` (a conditional delete) tests the entry in the transaction that removes it. */
  async function remove(authority: Authority, k: string, which: { id: number } | { name: string; expect?: Expectation }): Promise<FileRow | undefined> {
    const b = deletable(backend(k));
    const did = authority.who.canonical;
    const row = "id" in which ? await files.remove(did, b.kind, which.id) : await files.removeNamed(did, b.kind, which.name, which.expect);
    if (row) await release(b, row.cid);
    return row;
  }

  /** Reads content held outside the catalog (a stashed part) whole or a range of it; no traffic
   * is charged (server-side). */
  const readContent = (k: BackendKind, cid: string, range?: ByteRange) => backend(k).read(cid, range);

  /** Drops a stash's reference. */
  const unstash = (k: BackendKind, cid: string) => release(backend(k), cid);

  return { kind, deletableKind, checkDeclared, put, importCar, compose, record, stash, mayStore, read, remove, readContent, unstash, files };
}

export type Pipeline = ReturnType<typeof createPipeline>;
