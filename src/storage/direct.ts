/**
 * The storage pipeline's door for callers that carry the account's own authorisation instead of
 * the storage API's per-request signatures and traffic vouchers: the S3 API (D18) and the pinning
 * service, whose access key already is the account's say-so (authorities/authority.ts
 * `accountPays`). Files by name (the S3 object key) rather than by id or Cid. Every write, read
 * and delete is the pipeline's (storage/pipeline.ts): nothing about storing is done here.
 *
 * @example
 *   const direct = createDirectStorage({ sql, log, maxBody, backends, meter, pipeline })
 *   const row = await direct.put(did, "dfs", "photos/a.jpg", request.body, { declared, digest: "md5" })
 *   const file = await direct.named(did, "dfs", "photos/a.jpg")
 */
import { accountPays } from "../authorities/authority.ts";
import type { Did } from "../identity/did.ts";
import type { BackendKind, ByteRange, PendingPut } from "./backend.ts";
import type { Expectation, FileRow } from "./files.ts";
import { createPipeline, type Pipeline, type PipelineDeps, type PutOptions, type Stored } from "./pipeline.ts";

export type { Stashed, Stored } from "./pipeline.ts";

/** The pipeline's own deps (a door of its own over them, as tests make one), or the gateway's pipeline to share. */
export type DirectDeps = PipelineDeps & { pipeline?: Pipeline };

/** An S3 write's options: the pipeline's, with the MD5 the S3 API checks and tags by. */
type S3Put = Omit<PutOptions, "digest" | "check" | "etag"> & { verify?: (md5: string) => void; etag?: (md5: string) => string };

export function createDirectStorage(deps: DirectDeps) {
  const pipeline = deps.pipeline ?? createPipeline(deps);
  const rowOf = (r: { row: FileRow }) => r.row;

  /**
   * Stores `source` as the file `name` of `who` on `kind`, replacing one of that name. The bytes
   * are MD5-digested as they flow (S3's ETag): `verify` sees the MD5 before anything is kept
   * (throwing, as for a Content-MD5 that differs, keeps nothing); `etag` makes the stored ETag of
   * it (default: the MD5 itself).
   */
  const put = (who: Did, kind: BackendKind, name: string, source: AsyncIterable<Uint8Array>, opts: S3Put = {}) =>
    pipeline
      .put(accountPays(who), kind, name, source, {
        ...opts,
        digest: "md5",
        check: (arrived) => opts.verify?.(arrived.digest()),
        etag: (arrived) => (opts.etag ? opts.etag(arrived.digest()) : arrived.digest()),
      })
      .then(rowOf);

  /** Imports the CAR `source` as the files of `who` its roots make, named from `name` ("/" between); `verify` sees the CAR's MD5. */
  const importCar = async (who: Did, kind: BackendKind, name: string, source: AsyncIterable<Uint8Array>, opts: { declared?: number; verify?: (md5: string) => void } = {}) =>
    (await pipeline.importCar(accountPays(who), kind, name, source, { declared: opts.declared, digest: "md5", check: (arrived) => opts.verify?.(arrived.digest()), separator: "/" })).map(rowOf);

  /** The file `name` of `who` as the content `cids` one after the other, or undefined when the back-end cannot compose them. */
  const compose = async (who: Did, kind: BackendKind, name: string, cids: readonly string[], opts: Stored & { etag?: string; moved?: number }) => {
    const out = await pipeline.compose(accountPays(who), kind, name, cids, opts);
    return out?.row;
  };

  /** A pin's DAG as the file `name` of `who` (pipeline `record`). */
  const record = (who: Did, kind: BackendKind, name: string, make: (onBytes: (n: number) => Promise<void>) => Promise<PendingPut>) => pipeline.record(accountPays(who), kind, name, make).then(rowOf);

  /** Throws the quota's refusal when `who`'s pools are full now; holds nothing. */
  const mayStore = (who: Did) => pipeline.mayStore(accountPays(who));

  /** The file of `who` named `name`, or undefined. */
  const named = (who: Did, kind: BackendKind, name: string) => pipeline.files.named(who.canonical, pipeline.kind(kind), name);

  /** The bytes of `row` (or a range), the account's traffic pool paying. */
  const read = (who: Did, row: FileRow, range?: ByteRange) => pipeline.read(accountPays(who), row, range);

  /** Throws ContentBlocked (410) when the denylist blocks `row`'s content: before its headers
   * (HEAD too) and its bytes. */
  const readable = (row: FileRow) => deps.denylist?.check(row.cid, "s3");

  /** Files of `who` on `kind` whose names start with `prefix`, after `after`, in byte order. */
  const list = (who: Did, kind: BackendKind, page: { prefix: string; after: string; limit: number }) => pipeline.files.listNames(who.canonical, pipeline.kind(kind), page);

  /** Deletes the file `name` (where the back-end deletes: spec rule 4) if `expect` (a conditional
   * delete's test of it, run as it is removed) holds; whether there was one. */
  const remove = async (who: Did, kind: BackendKind, name: string, expect?: Expectation) => (await pipeline.remove(accountPays(who), kind, { name, expect })) !== undefined;

  /** A multipart part, held outside the catalog (pipeline `stash`). */
  const stash = (who: Did, kind: BackendKind, source: AsyncIterable<Uint8Array>, opts: { declared?: number } = {}) => pipeline.stash(accountPays(who), kind, source, opts);

  /** A lasting space hold for content kept outside the catalog (a multipart upload's parts), set
   * inside the caller's transaction (quota/meter.ts `spaceHold`); undefined without quota. */
  const spaceHold = async (who: Did) => deps.meter?.spaceHold(who.address, who.canonical);
  const dropHold = async (id: number | null) => deps.meter?.dropHold(id);

  return { kind: pipeline.kind, spaceHold, dropHold, put, importCar, record, mayStore, compose, named, readable, read, list, remove, stash, readContent: pipeline.readContent, unstash: pipeline.unstash };
}

export type DirectStorage = ReturnType<typeof createDirectStorage>;
