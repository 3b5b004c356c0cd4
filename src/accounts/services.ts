/**
 * The account API's services, built once per server from its parts.
 *
 * @example
 *   const accounts = createAccountServices({ config, sql, log, secrets, resolver, publicClient: chain.publicClient })
 *   app.use(accountRoutes(accounts))
 *   await accounts.tokens.verifyAccessToken(bearer) // { uid, did? }, for other route groups
 */
import { createSharedRateLimiter, type SharedRateLimiter } from "../http/shared-rate-limit.ts";
import { createBrowserService, type BrowserService } from "./browser.ts";
import { createEmailService, type EmailService } from "./email.ts";
import { createEvmService, createSiweRound, type EvmService } from "./evm.ts";
import { createLinkService, type LinkService } from "./link.ts";
import { defaultBackoffs, defaultLimits } from "./limits.ts";
import { createLoginGuard } from "./login-guard.ts";
import { createMailer } from "./mailer.ts";
import { createMessengerService, type MessengerService } from "./messenger.ts";
import { createPasswordHasher } from "./password-hasher.ts";
import { createPointsService, type PointsService } from "./points.ts";
import { createTokenService, type TokenService } from "./tokens.ts";
import type { AccountDeps, Ctx } from "./types.ts";
import { createUserService, type UserService } from "./users.ts";

export interface AccountServices {
  tokens: TokenService;
  users: UserService;
  email: EmailService;
  messenger: MessengerService;
  browser: BrowserService;
  evm: EvmService;
  /** Linking a wallet (and its DID) to an account that has none. */
  link: LinkService;
  points: PointsService;
  /** The login and code limits' counters in the shared database, for other login routes too (POST /login). */
  limiter: SharedRateLimiter;
}

export function createAccountServices(deps: AccountDeps): AccountServices {
  const now = deps.now ?? Date.now;
  const ctx: Ctx = {
    config: deps.config,
    sql: deps.sql,
    log: deps.log,
    now,
    limits: { ...defaultLimits, ...deps.limits },
    limiter: createSharedRateLimiter(deps.sql, { now, enabled: deps.config.rateLimits !== "off" }),
  };
  const jwtKey = deps.secrets.jwtKey;
  const tokens = createTokenService(ctx, jwtKey, deps.resolver);
  const users = createUserService(ctx);
  const mailer = deps.mailer ?? createMailer(deps.config, deps.log);
  const round = createSiweRound(ctx, { resolver: deps.resolver, publicClient: deps.publicClient });
  return {
    tokens,
    users,
    email: createEmailService(ctx, {
      jwtKey,
      mailer,
      tokens,
      users,
      guard: createLoginGuard(ctx, defaultBackoffs),
      hasher: createPasswordHasher({ concurrency: deps.config.passwordHashes }),
    }),
    messenger: createMessengerService(ctx, { tokens, users }),
    browser: createBrowserService(ctx, { tokens, users }),
    evm: createEvmService(ctx, { tokens, users, round }),
    link: createLinkService(ctx, { round, users, tokens }),
    points: createPointsService(ctx),
    limiter: ctx.limiter,
  };
}
