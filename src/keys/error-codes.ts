/**
 * Every failure of the keys API (D18), with its error name (D11) and the text a client shows.
 * The service throws `fail("KEY_NOT_FOUND")`; tests and the SDK match on the same table.
 */
import { accountError, type AccountError, type AccountErrorName } from "../http/errors.ts";

type Entry = { error: AccountErrorName; message: string };

export const KEYS_ERROR_CODES = {
  KEY_NEEDS_DID: { error: "UNAUTHORIZED", message: "S3 access keys are issued to DID accounts only: log in with a DID or a wallet" },
  KEY_REQUEST_REFUSED: { error: "UNAUTHORIZED", message: "The signed request was refused" },
  KEY_PAYLOAD_INVALID: {
    error: "PARAM_ERROR",
    message: "payload must be <rw|ro>:<dfs|ipfs|*>:<expiry in unix seconds, 0 = none> (or pins:ipfs:<expiry> for a pinning token), with the expiry in the future",
  },
  KEY_LIMIT: { error: "CONFLICT", message: "This account has as many access keys as it may: revoke one first" },
  KEY_RATE_LIMITED: { error: "RATE_LIMITED", message: "Too many access keys minted for this account lately; try again later" },
  KEY_NOT_FOUND: { error: "NOT_FOUND", message: "This account has no such access key" },
} as const satisfies Record<string, Entry>;

export type KeysErrorCode = keyof typeof KEYS_ERROR_CODES;

/** The error for `code`; `detail` is appended to its message when the case needs it. */
export function fail(code: KeysErrorCode, detail?: string, headers?: Record<string, string>): AccountError {
  const e: Entry = KEYS_ERROR_CODES[code];
  return accountError(e.error, detail ? `${e.message}: ${detail}` : e.message, headers);
}
