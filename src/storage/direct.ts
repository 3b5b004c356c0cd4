/**
 * The storage service's narrow entry for callers that carry the account's own authorisation
 * instead of the storage API's per-request signatures and traffic vouchers: the S3 API (D18),
 * whose access key already is the account's say-so. Files by name (the S3 object key) rather
 * than by id or Cid; quota from the account's pools through the same meter as the HTTP API, the
 * account itself paying (no voucher). Content goes through the same back-ends, catalog (files.ts)
 * and error mapping (errors.ts) as service.ts: nothing about storing is done differently here.
 *
 * @example
 *   const direct = createDirectStorage({ sql, log, maxBody, backends, meter })
 *   const row = await direct.put(did, "dfs", "photos/a.jpg", request.body, { declared })
 *   const file = await direct.open(did, "dfs", "photos/a.jpg")
 */
import type { Logger } from "../log.ts";
import type { Sql } from "../db/sql.ts";
import type { Did } from "../identity/did.ts";
import type { Meter } from "../quota/meter.ts";
import { failure } from "../failure.ts";
import type { Backend, BackendKind, ByteRange, PendingImport, PendingPut } from "./backend.ts";
import { backendLookup, carImporter, deletable } from "./errors.ts";
import { createFiles, importedNames, type Expectation, type FileRow } from "./files.ts";
import { recordFile, recordFiles } from "./pending.ts";
import { meterDownload } from "./transfer.ts";
import { WHOLE_BODY_MAX } from "./service.ts";
import type { Denylist } from "../denylist/index.ts";

export interface DirectDeps {
  sql: Sql;
  log: Logger;
  maxBody: number;
  backends: Partial<Record<BackendKind, Backend>>;
  /** Quota enforcement (D7); absent, nothing is metered (tests without a chain). */
  meter?: Meter;
  /** Hears of file bytes received (in) and sent (out), per back-end: the server's metrics, as service.ts reports them. */
  onTransfer?: (backend: BackendKind, direction: "in" | "out", bytes: number) => void;
  /** Content this gateway blocks (D25): not read (`readable`), not stored. */
  denylist?: Pick<Denylist, "check" | "refuseUpload">;
  now?: () => number;
}

type UploadMeter = Awaited<ReturnType<Meter["beginUpload"]>>;

const tooLarge = (limit: number) => failure("too-large", `Request body is larger than ${limit} bytes`);

/** A stashed part: its content, and the quota holds its bytes took as they arrived (see `stash`). */
export interface Stashed {
  cid: string;
  size: number;
  md5: string;
  holds(): number[];
  handedOver(): void;
  release(): Promise<void>;
}

/**
 * What a file row keeps besides its content: the `UserDefined.encryption` mark, the S3 metadata (a
 * JSON text that s3api/metadata.ts writes and reads; null for none), the S3 flexible `checksum` as
 * files.ts stores it (read once the bytes are in: a trailing one is known only then), a multipart
 * object's part sizes (`parts`); and `expect`, a conditional write's test of the entry it would
 * replace (files.ts Expectation).
 */
export interface Stored {
  encryption?: string;
  metadata?: string | null;
  checksum?: () => string | undefined;
  parts?: string;
  expect?: Expectation;
}

/** What a stream carried: its length and MD5 (the S3 ETag), and the failure that stopped it, if any. */
interface Counted {
  bytes: number;
  md5(): string;
  failure?: unknown;
}

/** Counts and MD5-hashes a body as it flows; errors it past `limit` bytes or when `onBytes` throws (quota). */
function counted(source: ReadableStream<Uint8Array>, limit: number, onBytes: (n: number) => Promise<void> | void): { stream: ReadableStream<Uint8Array>; meter: Counted } {
  const hasher = new Bun.CryptoHasher("md5");
  const meter: Counted = { bytes: 0, md5: () => hasher.digest("hex") };
  const reader = source.getReader();
  const stream = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { value, done } = await reader.read();
          if (done) return controller.close();
          meter.bytes += value.byteLength;
          if (meter.bytes > limit) throw tooLarge(limit);
          await onBytes(value.byteLength);
          hasher.update(value);
          controller.enqueue(value);
        } catch (err) {
          meter.failure ??= err;
          void reader.cancel(err).catch(() => {});
          controller.error(err);
        }
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
  return { stream, meter };
}

export function createDirectStorage(deps: DirectDeps) {
  const { sql, log } = deps;
  const files = createFiles(sql, deps.now);
  // Every back-end failure reaches this service already mapped (storage/errors.ts).
  const backend = backendLookup(deps.backends);

  async function release(b: Backend, cid: string) {
    await b.release(cid).catch((err) => log.error("releasing content failed", { backend: b.kind, cid, err: (err as Error).message }));
  }

  /** Streams `source` into the back-end, uncommitted; the stream's own failure (a bad signature, a
   * quota refusal) is the answer rather than the back-end's wrapping of it. */
  async function putCounted(b: Backend, source: ReadableStream<Uint8Array>, onBytes: (n: number) => Promise<void> | void): Promise<{ pending: PendingPut; meter: Counted }> {
    const { stream, meter } = counted(source, deps.maxBody, onBytes);
    try {
      return { pending: await b.put(stream), meter };
    } catch (err) {
      throw meter.failure ?? err;
    }
  }

  /**
   * Records `pending` as the file `name` of `who` (replacing one of that name): its content's rows
   * and the quota's exact check in the file row's transaction; `moved` bytes count as traffic. On
   * failure nothing is kept.
   */
  async function keep(b: Backend, who: Did, name: string, pending: PendingPut, quota: UploadMeter | undefined, etag: string | undefined, moved: number, stored: Stored = {}): Promise<FileRow> {
    const row = { did: who.canonical, backend: b.kind, name, cid: pending.cid, size: pending.size, encryption: stored.encryption ?? "", etag, metadata: stored.metadata ?? null, checksum: stored.checksum?.(), parts: stored.parts };
    const added = await recordFile(files, row, pending, { quota, moved, refuse: (cid) => deps.denylist?.refuseUpload(cid), expect: stored.expect, log });
    if (moved > 0) deps.onTransfer?.(b.kind, "in", moved);
    if (added.replaced) await release(b, added.replaced);
    return added.row;
  }

  /**
   * Stores `source` as the file `name` of `who` on `kind`, replacing one of that name; the quota's
   * checks as on the HTTP API (space and traffic from the account's pools). `etag` names the
   * stored ETag; by default the MD5 of the bytes. `verify` sees the MD5 before anything is kept:
   * throwing (a Content-MD5 that differs) keeps nothing. `moved`: how many of the bytes count as
   * traffic (default all; 0 for a server-side copy, whose bytes came over no wire). `encryption`: the stored
   * `UserDefined.encryption` (a copy keeps its source's, so an age file stays marked as one);
   * `metadata`: the headers stored with the file (Stored).
   */
  async function put(who: Did, kind: BackendKind, name: string, source: ReadableStream<Uint8Array>, opts: { declared?: number; verify?: (md5: string) => void; etag?: (md5: string) => string; moved?: number } & Stored = {}): Promise<FileRow> {
    const b = backend(kind);
    if (opts.declared !== undefined && opts.declared > deps.maxBody) throw tooLarge(deps.maxBody);
    const quota = await deps.meter?.beginUpload(who.address, who.canonical, { declared: opts.declared, backend: b.kind, name });
    try {
      const { pending, meter } = await putCounted(b, source, (n) => quota?.add(n));
      const md5 = meter.md5();
      try {
        opts.verify?.(md5);
      } catch (err) {
        await pending.abort();
        throw err;
      }
      return await keep(b, who, name, pending, quota, opts.etag ? opts.etag(md5) : md5, Math.min(opts.moved ?? meter.bytes, meter.bytes), opts);
    } finally {
      await quota?.release().catch((err) => log.error("releasing an upload's holds failed", { err: (err as Error).message }));
    }
  }

  /**
   * Imports the CAR `source` into `kind` (D25: ipfs) as the files of `who` its roots make, named
   * from `name` (files.ts `importedNames`: the key itself for one root), replacing files of those
   * names; every block checked, all or nothing, the quota checked as its bytes arrive and exactly
   * at the end, as `put`. `verify` sees the CAR's MD5 before anything is kept. The files keep no
   * ETag of their own (their bytes are not the CAR's): their Cid shows.
   */
  async function importCar(who: Did, kind: BackendKind, name: string, source: ReadableStream<Uint8Array>, opts: { declared?: number; verify?: (md5: string) => void } = {}): Promise<FileRow[]> {
    const b = backend(kind);
    const importCar = carImporter(b);
    if (opts.declared !== undefined && opts.declared > deps.maxBody) throw tooLarge(deps.maxBody);
    const quota = await deps.meter?.beginUpload(who.address, who.canonical, { declared: opts.declared });
    try {
      const { stream, meter } = counted(source, deps.maxBody, (n) => quota?.add(n));
      let pending: PendingImport;
      try {
        pending = await importCar(stream);
      } catch (err) {
        throw meter.failure ?? err;
      }
      try {
        opts.verify?.(meter.md5());
      } catch (err) {
        await pending.abort();
        throw err;
      }
      const roots = pending.roots;
      const rows = importedNames(name, roots, "/").map((rootName, i) => ({ did: who.canonical, backend: b.kind, name: rootName, cid: (roots[i] as (typeof roots)[number]).cid, size: (roots[i] as (typeof roots)[number]).size, encryption: "" }));
      const added = await recordFiles(files, rows, pending, { quota, moved: meter.bytes, refuse: (cid) => deps.denylist?.refuseUpload(cid, "import"), log });
      deps.onTransfer?.(b.kind, "in", meter.bytes);
      for (const a of added) if (a.replaced) await release(b, a.replaced);
      return added.map((a) => a.row);
    } finally {
      await quota?.release().catch((err) => log.error("releasing an import's holds failed", { err: (err as Error).message }));
    }
  }

  /**
   * Stores the file `name` of `who` on `kind` as the content `cids` one after the other, without
   * reading them when the back-end can compose them (Backend.compose: a multipart completion
   * whose parts line up on chunks); undefined when it cannot (the caller then streams them through
   * `put`). The quota's exact check runs at commit, as for `put`; `etag` is the stored ETag (none:
   * the Cid shows); every byte counts as traffic that came over the wire (as a multipart upload's
   * parts did) unless `moved` says how many did (0: a server-side copy).
   */
  async function compose(who: Did, kind: BackendKind, name: string, cids: readonly string[], opts: { etag?: string; moved?: number } & Stored): Promise<FileRow | undefined> {
    const b = backend(kind);
    if (!b.compose) return undefined;
    const pending = await b.compose(cids);
    if (!pending) return undefined;
    if (pending.size > deps.maxBody) {
      await pending.abort();
      throw tooLarge(deps.maxBody);
    }
    let quota: UploadMeter | undefined;
    try {
      quota = await deps.meter?.beginUpload(who.address, who.canonical, { declared: pending.size, backend: b.kind, name });
    } catch (err) {
      await pending.abort().catch(() => {});
      throw err;
    }
    try {
      return await keep(b, who, name, pending, quota, opts.etag, Math.min(opts.moved ?? pending.size, pending.size), opts);
    } finally {
      await quota?.release().catch((err) => log.error("releasing an upload's holds failed", { err: (err as Error).message }));
    }
  }

  /**
   * Stores content that arrives other than as one byte stream (a pin's DAG, block by block over
   * bitswap) as the file `name` of `who` on `kind`, replacing one of that name, through the same
   * steps as `put`: `make` writes it through the back-end and calls `onBytes` for each piece as it
   * arrives, which holds the bytes in the account's pools (throwing once they do not fit, or past
   * the body limit: `make` then keeps nothing); the file row's transaction makes the exact check.
   * Every byte that arrived counts as traffic.
   */
  async function record(who: Did, kind: BackendKind, name: string, make: (onBytes: (n: number) => Promise<void>) => Promise<PendingPut>): Promise<FileRow> {
    const b = backend(kind);
    const quota = await deps.meter?.beginUpload(who.address, who.canonical, { backend: b.kind, name });
    let moved = 0;
    try {
      const pending = await make(async (n) => {
        moved += n;
        if (moved > deps.maxBody) throw tooLarge(deps.maxBody);
        await quota?.add(n);
      });
      return await keep(b, who, name, pending, quota, undefined, moved);
    } finally {
      await quota?.release().catch((err) => log.error("releasing an upload's holds failed", { err: (err as Error).message }));
    }
  }

  /** Throws the quota's refusal when `who`'s pools are full now; holds nothing (a look, as an upload's first). */
  async function mayStore(who: Did): Promise<void> {
    const look = await deps.meter?.beginUpload(who.address, who.canonical, {});
    await look?.release();
  }

  /** The file of `who` named `name`, or undefined. */
  const named = (who: Did, kind: BackendKind, name: string) => files.named(who.canonical, backend(kind).kind, name);

  /**
   * The bytes of `row` (or a range), the account's traffic pool paying: small bodies are read
   * whole (a damaged chunk is then a clean error), larger ones stream and count what went out.
   */
  async function read(who: Did, row: FileRow, range?: ByteRange): Promise<Uint8Array | ReadableStream<Uint8Array>> {
    const b = backend(row.backend);
    const length = range ? range.end - range.start + 1 : row.size;
    // A body that streams is answered 200 before its content is read: content no download can
    // stream (a CAR import's folder root) must be refused before that, and before any charge.
    if (length > WHOLE_BODY_MAX && !(await b.stat(row.cid))) throw failure("unsupported", "this entry is a folder (a CAR import's root): download its files by their own Cids");
    const traffic = await deps.meter?.beginDownload(who.address, length);
    const settle = async (sent: number) => {
      deps.onTransfer?.(b.kind, "out", sent);
      try {
        await traffic?.settle(sent);
      } catch (err) {
        log.error("settling a download's counters failed", { cid: row.cid, err: (err as Error).message });
      }
    };
    if (length <= WHOLE_BODY_MAX) {
      let bytes: Uint8Array;
      try {
        bytes = await Bun.readableStreamToBytes(b.read(row.cid, range));
      } catch (err) {
        await settle(0);
        throw err;
      }
      await settle(bytes.byteLength);
      return bytes;
    }
    const renew = () => void traffic?.renew().catch((err) => log.error("renewing a download's hold failed", { cid: row.cid, err: (err as Error).message }));
    return meterDownload(b.read(row.cid, range), settle, renew);
  }

  /** Throws ContentBlocked (410) when the denylist blocks `row`'s content: before its headers
   * (HEAD too) and its bytes. */
  const readable = (row: FileRow) => deps.denylist?.check(row.cid, "s3");

  /** Files of `who` on `kind` whose names start with `prefix`, after `after`, in byte order. */
  const list = (who: Did, kind: BackendKind, page: { prefix: string; after: string; limit: number }) => files.listNames(who.canonical, backend(kind).kind, page);

  /** Deletes the file `name` (where the back-end deletes: spec rule 4); whether there was one. */
  async function remove(who: Did, kind: BackendKind, name: string): Promise<boolean> {
    const b = deletable(backend(kind));
    const row = await files.removeNamed(who.canonical, b.kind, name);
    if (row) await release(b, row.cid);
    return row !== undefined;
  }

  /**
   * Content held outside the catalog with one reference (a multipart upload's part): streamed in
   * through the account's quota meter exactly as an upload is (refused before its first byte when
   * the pool is full, and as soon as its bytes pass what is free: no more than that reaches the
   * back-end), committed, and answered with its Cid, size and MD5. Its holds are still live: the
   * caller takes them over in the transaction that records it (`holds`, then `handedOver` once
   * that committed) and `release`s them whatever happened.
   */
  async function stash(who: Did, kind: BackendKind, source: ReadableStream<Uint8Array>, opts: { declared?: number } = {}): Promise<Stashed> {
    const b = backend(kind);
    if (opts.declared !== undefined && opts.declared > deps.maxBody) throw tooLarge(deps.maxBody);
    const quota = await deps.meter?.beginUpload(who.address, who.canonical, { declared: opts.declared });
    const release = async () => {
      await quota?.release().catch((err) => log.error("releasing a part's holds failed", { err: (err as Error).message }));
    };
    try {
      const { pending, meter } = await putCounted(b, source, (n) => quota?.add(n));
      try {
        await pending.commit();
      } catch (err) {
        await pending.abort().catch(() => {});
        throw err;
      }
      return { cid: pending.cid, size: pending.size, md5: meter.md5(), holds: () => quota?.holds() ?? [], handedOver: () => quota?.handedOver(), release };
    } catch (err) {
      await release();
      throw err;
    }
  }

  /** Reads stashed (or any held) content whole or a range of it, as a stream; no traffic is charged (server-side). */
  const readContent = (kind: BackendKind, cid: string, range?: ByteRange) => backend(kind).read(cid, range);

  /** Drops a stash's reference. */
  const unstash = (kind: BackendKind, cid: string) => release(backend(kind), cid);

  /** A lasting space hold for content kept outside the catalog (a multipart upload's parts), set
   * inside the caller's transaction (quota/meter.ts `spaceHold`); undefined without quota. */
  const spaceHold = async (who: Did) => deps.meter?.spaceHold(who.address, who.canonical);
  const dropHold = async (id: number | null) => deps.meter?.dropHold(id);

  return { kind: (k: string) => backend(k).kind, spaceHold, dropHold, put, importCar, record, mayStore, compose, named, readable, read, list, remove, stash, readContent, unstash };
}

export type DirectStorage = ReturnType<typeof createDirectStorage>;
