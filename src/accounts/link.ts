/**
 * Linking a wallet to an account that has none (an email, password, messenger or browser-wallet
 * account): the account gains the wallet's address and its DID, so its owner gets files, quota and
 * the directory without starting over as another account.
 *
 * Who may link what: the account's own session asks (Bearer), and the wallet proves itself by
 * signing an EIP-4361 message whose statement names that account (its number and, when mail
 * allows, its email), so the wallet's user sees what they agree to, a sign-in signature never links
 * and a link signature is good for its own account only. The wallet must still own its DID (the
 * registry is asked, as at sign-in). A wallet that already belongs to an account (its own, made
 * at its first sign-in, or another one it was linked to) is refused, and so is an account that has
 * a wallet: a link never moves a wallet or a DID between accounts, so no account can take over
 * another's files. users.ts holds this against races (one statement inside a serializable
 * transaction, and a unique index on the address).
 *
 * Afterwards the wallet's sign-in opens this account. The link answers a new session whose tokens
 * act for the DID (the wallet just signed, so it is the session's key) and ends the one that asked:
 * a session that signed nothing, by email or password, acts for no DID, now as before.
 */
import { fail } from "./error-codes.ts";
import type { ChallengeInput, EvmLogin, SiweRound } from "./evm.ts";
import { enforce } from "./limits.ts";
import type { ClientKey } from "../http/client-key.ts";
import type { TokenService } from "./tokens.ts";
import type { UserService } from "./users.ts";
import type { ClientInfo, Ctx, UserRow } from "./types.ts";

export interface LinkService {
  /** The message for the wallet `input.address` to sign: it names `user`'s account. */
  challenge(user: UserRow, input: ChallengeInput, from: ClientKey): Promise<string>;
  /**
   * Links the wallet that signed `message` to `user`'s account; answers the new session's tokens
   * and ends the session of `presented` (the access token that asked).
   */
  link(user: UserRow, presented: string | undefined, input: { message: string; signature: string } & ClientInfo, from: ClientKey): Promise<EvmLogin>;
}

/** Characters of an email that an EIP-4361 statement may hold (RFC 3986's reserved and unreserved). */
const STATEMENT_SAFE = /^[A-Za-z0-9._~!$&'*+=@-]+$/;

/** What the wallet shows its user: which account it is about to join, and what that means. */
export function linkStatement(user: Pick<UserRow, "number" | "email">): string {
  const email = user.email && STATEMENT_SAFE.test(user.email) ? ` (${user.email})` : "";
  return `Link this wallet to Stowage account ${user.number}${email}: the wallet will sign in to it, and the account's files will be the wallet's.`;
}

export function createLinkService(ctx: Ctx, deps: { round: SiweRound; users: UserService; tokens: TokenService }): LinkService {
  return {
    async challenge(user, input, from) {
      if (user.did !== null || user.address !== null) throw fail("ACCOUNT_HAS_WALLET");
      return deps.round.issue(input, linkStatement(user), from);
    },

    async link(user, presented, { message, signature, ...client }, from) {
      await enforce(ctx, ctx.limits.loginsPerIp, from);
      const { address, did } = await deps.round.prove(message, signature, linkStatement(user));
      const outcome = await deps.users.linkWallet(user.id, address, did);
      if ("refused" in outcome) throw fail(outcome.refused === "wallet-taken" ? "WALLET_TAKEN" : "ACCOUNT_HAS_WALLET");
      const pair = await deps.tokens.issue(outcome.linked, "evm", { ...client, signer: address });
      // The asking session signed nothing and acts for no DID; the new one replaces it here.
      await deps.tokens.logout(presented).catch((err: unknown) => ctx.log.warn("ending the session that linked a wallet failed", { err: (err as Error).message }));
      ctx.log.info("wallet linked", { uid: outcome.linked.uid, address });
      return { did, number: String(outcome.linked.number), ...pair };
    },
  };
}
