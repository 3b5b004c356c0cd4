/**
 * Back-end failures as the domain's failures (src/failure.ts), in one place. Each back-end (and
 * the blob store under it) throws errors with a stable `code`; this file alone turns them into
 * `Failure`s, by code, so no route or service step maps them on its own.
 *
 * Only failures that are the request's (content gone, a bad Cid, a range outside the content)
 * get a status of their own. The rest (a stopped back-end, an unreachable blob store, a damaged
 * chunk) stay what they are: the error handler logs them whole and answers the spec's 500
 * "Internal error, try again", saying nothing of their cause.
 */
import { StorageError } from "../http/errors.ts";
import { failure, Failure } from "../failure.ts";
import { isStorageKind } from "../http/model.ts";
import type { Backend, BackendKind, PendingImport, PendingPut } from "./backend.ts";

/** Codes of dfs (src/storage/dfs/errors.ts), ipfs (src/storage/ipfs/errors.ts) and the blob
 * store (src/blob/store.ts) that a request's own content explains. */
const BY_CODE: Record<string, (err: Error) => Failure> = {
  ERR_NOT_FOUND: () => failure("not-found", "File not found"),
  IPFS_NOT_FOUND: () => failure("not-found", "File not found"),
  IPFS_BAD_CID: () => failure("bad-input", "not a Cid"),
  ERR_INVALID_RANGE: () => failure("bad-range", "Range Not Satisfiable"),
  IPFS_BAD_RANGE: () => failure("bad-range", "Range Not Satisfiable"),
  // What is wrong with a CAR is the client's to know (which block, which root): its own words.
  IPFS_BAD_CAR: (err) => failure("bad-input", `${err.message}: nothing was kept`),
};

const codeOf = (err: unknown) => (typeof err === "object" && err !== null && "code" in err && typeof err.code === "string" ? err.code : undefined);

/** The domain's failure for a back-end's: a Failure (or an API's own error) as it is, one by its code, or the error itself (a 500). */
export function storageFailure(err: unknown): unknown {
  if (err instanceof Failure || err instanceof StorageError) return err;
  const code = codeOf(err);
  const mapped = code !== undefined ? BY_CODE[code] : undefined;
  return mapped ? mapped(err as Error) : err;
}

/** A stream whose error is mapped as above. */
function mappedStream(source: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { value, done } = await reader.read();
          if (done) controller.close();
          else controller.enqueue(value);
        } catch (err) {
          controller.error(storageFailure(err));
        }
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

const rethrow = (err: unknown): never => {
  throw storageFailure(err);
};

/** The back-end as the storage service uses it: the same operations, every failure mapped here. */
export function withStorageErrors(b: Backend): Backend {
  const pending = (p: PendingPut): PendingPut => ({
    cid: p.cid,
    size: p.size,
    commit: () => p.commit().catch(rethrow),
    commitIn: (tx) => p.commitIn(tx).catch(rethrow),
    abort: () => p.abort().catch(rethrow),
  });
  const compose = b.compose?.bind(b);
  const importCar = b.importCar?.bind(b);
  const pendingImport = (p: PendingImport): PendingImport => ({
    roots: p.roots,
    commit: () => p.commit().catch(rethrow),
    commitIn: (tx) => p.commitIn(tx).catch(rethrow),
    abort: () => p.abort().catch(rethrow),
  });
  return {
    kind: b.kind,
    capabilities: b.capabilities,
    put: (source, opts) => b.put(source, opts).then(pending, rethrow),
    ...(compose && { compose: (cids: readonly string[]) => compose(cids).then((p) => p && pending(p), rethrow) }),
    ...(importCar && { importCar: (source: ReadableStream<Uint8Array>, opts?: { signal?: AbortSignal }) => importCar(source, opts).then(pendingImport, rethrow) }),
    stat: (cid) => b.stat(cid).catch(rethrow),
    read(cid, range) {
      try {
        return mappedStream(b.read(cid, range));
      } catch (err) {
        throw storageFailure(err);
      }
    },
    release: (cid) => b.release(cid).catch(rethrow),
    releaseIn: (tx, cid) => b.releaseIn(tx, cid).catch(rethrow),
    health: () => b.health(),
    stop: () => b.stop(),
  };
}

/** `b`'s CAR import, or the `unsupported` failure for a back-end that stores no blocks by Cid (dfs). */
export function carImporter(b: Backend): NonNullable<Backend["importCar"]> {
  const importCar = b.importCar;
  if (!importCar) throw failure("unsupported", `a CAR is imported into ipfs, not ${b.kind}: its blocks keep their Cids there`);
  return importCar;
}

/** `b` if files on it may be deleted; else the `unsupported` failure (ipfs: spec rule 4). */
export function deletable(b: Backend): Backend {
  if (!b.capabilities.delete) throw failure("unsupported", `files on ${b.kind} cannot be deleted: its content is permanent`);
  return b;
}

/**
 * The back-end of a `:type` with every failure mapped (withStorageErrors), or `unsupported` for another type.
 * Looked up per call: the back-ends may be opened after the service that uses them is made.
 */
export function backendLookup(backends: Partial<Record<BackendKind, Backend>>): (kind: string) => Backend {
  const mapped = new WeakMap<Backend, Backend>();
  return (kind) => {
    const raw = isStorageKind(kind) ? backends[kind] : undefined;
    if (!raw) throw failure("unsupported", `this gateway does not run a ${kind} back-end`);
    let b = mapped.get(raw);
    if (!b) mapped.set(raw, (b = withStorageErrors(raw)));
    return b;
  };
}
