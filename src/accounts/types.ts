/** Types shared by the account services and their routes. */
import type { Address, Hex } from "viem";
import type { Config } from "../config.ts";
import type { DidResolver } from "../identity/resolver.ts";
import type { Sql } from "../db/sql.ts";
import type { Logger } from "../log.ts";
import type { Secrets } from "../datadir/secrets.ts";
import type { SharedRateLimiter } from "../http/shared-rate-limit.ts";
import type { users } from "./schema.ts";
import type { Limits } from "./limits.ts";
import type { Mailer } from "./mailer.ts";

export type UserRow = typeof users.$inferSelect;

/** Spec 2.10. */
export interface TokenPair {
  accessToken: string;
  refreshToken: string;
}

/** What the client said about itself at login (spec 4.2 `source`, `useragent`). */
export interface ClientInfo {
  source: string;
  useragent?: string | undefined;
  /** The key that signed in for the account's DID (a DID login's signer, a wallet's address):
   * the session's tokens act for the DID while it may sign for it. */
  signer?: string | undefined;
}

/** How a session began; refresh-time checks key off it (D3). */
export type LoginMethod = "email" | "password" | "messenger" | "browser" | "evm" | "did";

/**
 * The viem calls the account API needs from the chain. Any viem PublicClient has them; with none,
 * only plain-key (EOA) signatures can be checked.
 */
export interface SignatureVerifier {
  verifyMessage(args: { address: Address; message: string; signature: Hex }): Promise<boolean>;
  /** viem answers "invalid" when the chain is unreachable too; this tells the two apart. */
  getChainId(): Promise<number>;
}

export interface AccountDeps {
  config: Config;
  /** The database every gateway shares (D16). */
  sql: Sql;
  log: Logger;
  secrets: Pick<Secrets, "jwtKey">;
  /** Who may sign for a DID now (the DID registry): tokens act for a DID only while their key may. */
  resolver: DidResolver;
  /** The chain's public client: EIP-1271 and ERC-6492 wallets need it. */
  publicClient?: SignatureVerifier | undefined;
  /** Default: SMTP when `config.smtpUrl` is set, else the dev mailbox in DATA_DIR/mail. */
  mailer?: Mailer | undefined;
  /** Milliseconds since the epoch; tests move time instead of sleeping. */
  now?: () => number;
  /** Overrides of the default rate limits (D12). */
  limits?: Partial<Limits>;
}

/** What every service gets: the deps with their defaults filled in. */
export interface Ctx {
  config: Config;
  sql: Sql;
  log: Logger;
  now: () => number;
  limiter: SharedRateLimiter;
  limits: Limits;
}
