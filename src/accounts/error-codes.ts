/**
 * Every failure the account API names, with its error name (D11) and the text a client shows.
 * Services throw `fail("CODE_WRONG")`; tests and the SDK can match on the same table.
 */
import { accountError, type AccountError, type AccountErrorName } from "../http/errors.ts";

type Entry = { error: AccountErrorName; message: string };

export const ACCOUNT_ERROR_CODES = {
  // tokens
  TOKEN_MISSING: { error: "UNAUTHORIZED", message: "An access token is required (Authorization: Bearer <token>)" },
  TOKEN_INVALID: { error: "UNAUTHORIZED", message: "The token is invalid" },
  TOKEN_EXPIRED: { error: "UNAUTHORIZED", message: "The token has expired" },
  TOKEN_NOT_ACCESS: { error: "UNAUTHORIZED", message: "This is not an access token" },
  TOKEN_NOT_REFRESH: { error: "UNAUTHORIZED", message: "This is not a refresh token" },
  REFRESH_MISSING: { error: "UNAUTHORIZED", message: "A refresh token is required in the Authorization header" },
  REFRESH_REVOKED: { error: "UNAUTHORIZED", message: "This session was revoked; log in again" },
  REFRESH_REUSED: { error: "UNAUTHORIZED", message: "This refresh token was already replaced; the session is revoked, log in again" },
  TOKEN_KEY_REVOKED: { error: "UNAUTHORIZED", message: "The key this token was issued to may no longer sign for its DID (the DID registry names another owner, or the delegate was revoked); log in again with a key the DID allows" },
  ACCOUNT_GONE: { error: "UNAUTHORIZED", message: "The account of this token no longer exists" },
  // sessions
  SESSION_ENDED: { error: "UNAUTHORIZED", message: "This session has ended (logged out or revoked); log in again" },
  SESSION_EXPIRED: { error: "UNAUTHORIZED", message: "This session reached its maximum age; log in again" },
  TOKEN_NO_SESSION: { error: "UNAUTHORIZED", message: "This access token names no session; log out with the refresh token instead" },
  SESSION_UNKNOWN: { error: "NOT_FOUND", message: "No live session of this account has this id" },
  // email and password
  EMAIL_INVALID: { error: "PARAM_ERROR", message: "email is not a valid address" },
  PASSWORD_LENGTH: { error: "PARAM_ERROR", message: "The password must be 8 to 128 characters long" },
  CODE_WRONG: { error: "CODE_INVALID", message: "The code is wrong or expired; ask for a new one if needed" },
  CODE_TOO_SOON: { error: "RATE_LIMITED", message: "A code was sent less than a minute ago; use it or wait" },
  PASSWORD_WRONG: { error: "UNAUTHORIZED", message: "Email or password is wrong" },
  ALREADY_HAS_PASSWORD: { error: "CONFLICT", message: "This account already has a password; log in, or reset it" },
  MAIL_FAILED: { error: "UNAVAILABLE", message: "The code could not be sent; try again later" },
  // guessing: counted per (account, client); an account backs off clients it never signed in from
  CLIENT_FAILURES: { error: "RATE_LIMITED", message: "Too many failed attempts for this account from your network; try again later" },
  ACCOUNT_BACKING_OFF: {
    error: "RATE_LIMITED",
    message: "This account had failed attempts from other networks lately; wait before trying again, or sign in from a network you used before",
  },
  ACCOUNT_FAILURES_CAPPED: {
    error: "RATE_LIMITED",
    message: "This account had too many failed attempts from other networks today; sign in from a network you used before, or try again later",
  },
  PASSWORD_CHECKS_BUSY: { error: "UNAVAILABLE", message: "The server is busy checking passwords; try again in a moment" },
  // messenger
  MESSENGER_NOT_CONFIGURED: { error: "NOT_CONFIGURED", message: "Messenger login is not configured on this server (STOWAGE_MESSENGER_BOT_TOKEN)" },
  INITDATA_NO_HASH: { error: "UNAUTHORIZED", message: "initdata carries no hash" },
  INITDATA_BAD_HASH: { error: "UNAUTHORIZED", message: "initdata is not signed by this server's bot" },
  INITDATA_TOO_OLD: { error: "UNAUTHORIZED", message: "initdata is too old; reopen the app" },
  INITDATA_NO_USER: { error: "PARAM_ERROR", message: "initdata carries no valid user or auth_date" },
  // browser wallet
  BROWSER_NOT_CONFIGURED: {
    error: "NOT_CONFIGURED",
    message: "Browser wallet login is not configured on this server (STOWAGE_BROWSER_JWKS_URL, STOWAGE_BROWSER_ISSUER, STOWAGE_BROWSER_AUDIENCE)",
  },
  BROWSER_TOKEN_MISSING: { error: "UNAUTHORIZED", message: "The browser wallet token is required in the Authorization header" },
  BROWSER_TOKEN_INVALID: { error: "UNAUTHORIZED", message: "The browser wallet token is invalid" },
  BROWSER_JWKS_UNAVAILABLE: { error: "UNAVAILABLE", message: "The browser wallet provider's keys could not be fetched; try again later" },
  // EVM
  ORIGIN_MISSING: { error: "PARAM_ERROR", message: "The Origin header is required" },
  ORIGIN_NOT_ALLOWED: { error: "FORBIDDEN", message: "This origin may not ask for sign-in messages (STOWAGE_ALLOWED_ORIGINS)" },
  ADDRESS_INVALID: { error: "PARAM_ERROR", message: "address is not a valid EVM address" },
  CHAIN_UNSUPPORTED: { error: "PARAM_ERROR", message: "chainid is not the chain of this server" },
  MESSAGE_MALFORMED: { error: "PARAM_ERROR", message: "message is not a sign-in message issued by this server" },
  NONCE_UNKNOWN: { error: "UNAUTHORIZED", message: "The message's nonce was not issued by this server" },
  NONCE_USED: { error: "UNAUTHORIZED", message: "The message's nonce was already used; ask for a new challenge" },
  MESSAGE_EXPIRED: { error: "UNAUTHORIZED", message: "The sign-in message has expired; ask for a new challenge" },
  MESSAGE_TAMPERED: { error: "UNAUTHORIZED", message: "The message differs from the challenge issued for its nonce" },
  WRONG_DOMAIN: { error: "UNAUTHORIZED", message: "The message's domain or URI is not an allowed origin" },
  WRONG_CHAIN: { error: "UNAUTHORIZED", message: "The message's chain id is not the chain of this server" },
  WRONG_ADDRESS: { error: "UNAUTHORIZED", message: "The message's address is not the one the challenge was issued to" },
  ADDRESS_NOT_DID_OWNER: {
    error: "UNAUTHORIZED",
    message: "This address may no longer sign for its own DID: the DID registry names another owner. Sign in with a key the DID allows",
  },
  MESSAGE_PURPOSE: { error: "UNAUTHORIZED", message: "This message was issued for something else (signing in, or linking a wallet to an account); ask for a new challenge for this" },
  SIGNATURE_INVALID: { error: "UNAUTHORIZED", message: "The signature does not match the message's address" },
  // linking a wallet to an account
  WALLET_TAKEN: {
    error: "CONFLICT",
    message: "This wallet already belongs to another account (its own, made when it signed in, or one it was linked to); sign in with the wallet instead, or link another wallet",
  },
  ACCOUNT_HAS_WALLET: { error: "CONFLICT", message: "This account already has a wallet (and its DID); an account has one" },
  CHAIN_UNAVAILABLE: { error: "UNAVAILABLE", message: "The chain did not answer in time to check the signature; try again" },
  // points
  ACTION_INVALID: { error: "PARAM_ERROR", message: "actionID must be a positive integer" },
  ACTION_UNKNOWN: { error: "PARAM_ERROR", message: "There is no action with this id" },
  ACTION_NEEDS: { error: "VERIFY_ACTION_FAILED", message: "This action needs another action first" },
  ACTION_TOO_SOON: { error: "VERIFY_ACTION_FAILED", message: "This action was recorded too recently" },
  ACTION_DONE: { error: "USER_ADD_ACTION_FAILED", message: "This action is already recorded" },
} as const satisfies Record<string, Entry>;

export type AccountErrorCode = keyof typeof ACCOUNT_ERROR_CODES;

/** The error for `code`; `detail` is appended to its message when the case needs it. */
export function fail(code: AccountErrorCode, detail?: string, headers?: Record<string, string>): AccountError {
  const e: Entry = ACCOUNT_ERROR_CODES[code];
  return accountError(e.error, detail ? `${e.message}: ${detail}` : e.message, headers);
}
