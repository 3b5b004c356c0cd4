/**
 * The storage types of `/:type/...` routes (spec 4.1): `dfs` and `ipfs`; any other is 518. Such a
 * route also catches unknown `/v2/...` paths, which answer in the account model instead.
 */
import { accountError, isAccountPath, storageError } from "../http/errors.ts";
import type { BackendKind } from "./backend.ts";

export const BACKEND_KINDS = ["dfs", "ipfs"] as const satisfies readonly BackendKind[];

export const isBackendKind = (type: string): type is BackendKind => (BACKEND_KINDS as readonly string[]).includes(type);

/** Throws the account API's 404 for a `/v2/...` path that reached a storage route. */
export function checkNotAccount(path: string) {
  if (isAccountPath(path)) throw accountError("NOT_FOUND", "No such endpoint");
}

/** A storage route's `:type`, or the spec's 518. */
export function requireKind(type: string, path: string): BackendKind {
  checkNotAccount(path);
  if (!isBackendKind(type)) throw storageError.unsupportedType();
  return type;
}
