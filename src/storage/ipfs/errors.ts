/**
 * Typed errors of the ipfs back-end. Callers branch on `code`, never on message text (which may
 * carry a Cid or a path for the logs).
 */
export type IpfsErrorCode =
  /** The string given as a Cid does not parse. */
  | "IPFS_BAD_CID"
  /** No pinned content with that Cid. */
  | "IPFS_NOT_FOUND"
  /** A range outside the content, or start after end. */
  | "IPFS_BAD_RANGE"
  /** A block of pinned content is not in the blob store (downloads never fetch). */
  | "IPFS_BLOCK_MISSING"
  /** A local block's bytes do not hash to its Cid. */
  | "IPFS_BLOCK_CORRUPT"
  /** A CAR import that cannot be kept whole: malformed, a block that does not match its Cid, a
   * codec or hash not imported here, a root's DAG that is missing a block or is no UnixFS file or
   * directory. The message says which, for the client. */
  | "IPFS_BAD_CAR"
  /** The upload stream errored or its signal aborted; nothing was kept. */
  | "IPFS_IMPORT_FAILED"
  /** `commit()` after `abort()` of the same upload. */
  | "IPFS_ABORTED"
  /** The saved peer key cannot be read. */
  | "IPFS_BAD_PEER_KEY"
  /** The back-end is stopped. */
  | "IPFS_STOPPED";

export class IpfsError extends Error {
  override readonly name = "IpfsError";
  constructor(
    readonly code: IpfsErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export function isIpfsError(err: unknown, code?: IpfsErrorCode): err is IpfsError {
  return err instanceof IpfsError && (code === undefined || err.code === code);
}
