/**
 * Content blocking (D25): IPIP-383 denylist files and the operator's own blocks, checked on every
 * read path and before every write.
 *
 * @example
 *   const denylist = await createDenylist({ sql, log, files: config.denylist, onBlocked: metrics.blocked })
 *   denylist.check(cid, "download")
 */
export { createDenylist, OPERATOR_POLL_MS, type Denylist, type DenylistDeps, type Door } from "./service.ts";
export { ContentBlocked, isContentBlocked } from "./errors.ts";
export { block, blocks, unblock, operatorRule, BlockInputError, type BlockRow } from "./operator.ts";
export { parseDenylist, DenylistFormatError } from "./format.ts";
export { DenylistFileError } from "./files.ts";
