/**
 * The account API (spec 4.2, D3's session routes, and linking a wallet to an account): nineteen `/v2` routes, each a thin call
 * into a service. Failures are thrown as account errors and answered `{ result: -1, error,
 * message }` by the global handler; `/v2/auth/me` alone answers `{ success: false, error }`
 * (spec 7 rule 2).
 */
import { Unavailable } from "../unavailable.ts";
import { Elysia, t } from "elysia";
import { requestClientKey } from "../http/client-key.ts";
import { AccountError } from "../http/errors.ts";
import { fail } from "./error-codes.ts";
import { PASSWORD_MAX } from "./email.ts";
import type { AccountServices } from "./services.ts";
import { TokenError, tokenFailure } from "./tokens.ts";
import type { UserRow } from "./types.ts";
import { bearerToken } from "../http/params.ts";
import { access, accountErrors } from "../http/openapi.ts";

const TAG = ["accounts"];

const email = t.String({ maxLength: 320, description: "Email address" });
const code = t.String({ maxLength: 32, description: "The 6-digit code from the mail" });
/** Longer than any valid password, so a wrong-length one reads as wrong, not as malformed. */
const password = t.String({ maxLength: PASSWORD_MAX * 4, description: "8 to 128 characters" });
const client = {
  source: t.String({ maxLength: 256, description: "Identifier of the client kind" }),
  useragent: t.Optional(t.String({ maxLength: 1024, description: "The client's user agent" })),
};

const tokenPair = t.Object({ accessToken: t.String(), refreshToken: t.String() });
const ok = <T extends Parameters<typeof t.Object>[0]>(fields: T) => t.Object({ result: t.Literal(1), ...fields });
const accountTokens = ok({
  data: t.Object({ uid: t.Optional(t.String()), number: t.Optional(t.String()), accessToken: t.String(), refreshToken: t.String() }),
  error: t.String(),
});
const info = t.Record(t.String(), t.String());
const userInfo = t.Object({
  name: t.String(),
  icon: t.String(),
  address: t.String(),
  did: t.String(),
  email: t.Optional(t.String()),
  points: t.Integer(),
  browser_info: t.Optional(info),
  microblog_info: t.Optional(info),
  messenger_info: t.Optional(info),
  community_info: t.Optional(info),
  social_info: t.Boolean(),
});
const actionRecord = t.Object({ action: t.Integer(), points: t.Integer(), time: t.Integer() });
const sessionInfo = t.Object({
  id: t.String({ description: "The session's id (for DELETE /v2/auth/sessions/{id})" }),
  method: t.String({ description: "How it began: email, password, messenger, browser, evm or did" }),
  source: t.String({ description: "The source the client gave at login" }),
  useragent: t.String({ description: "The user agent the client gave at login" }),
  createdAt: t.Integer({ description: "Login time, Unix seconds" }),
  lastUsedAt: t.Integer({ description: "Last refresh (or the login), Unix seconds" }),
  expiresAt: t.Integer({ description: "When it ends unless refreshed before: the refresh token's lifetime after its last use, or the session's maximum age" }),
  current: t.Boolean({ description: "Whether the token that asked belongs to this session" }),
});
const me = t.Union([
  t.Object({
    success: t.Literal(true),
    data: t.Object({ uid: t.String(), email: t.Optional(t.String()), username: t.Optional(t.String()), role: t.Union([t.Literal("user"), t.Literal("admin")]) }),
  }),
  t.Object({ success: t.Literal(false), error: t.String() }),
]);


/** A positive integer below 2^31, from a path segment or a JSON value. */
function actionId(raw: string | number): number {
  const n = typeof raw === "number" ? raw : /^\d{1,10}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(n) || n < 1 || n > 2 ** 31 - 1) throw fail("ACTION_INVALID");
  return n;
}

export function accountRoutes(s: AccountServices) {
  /** The account behind an access token and the token's session, or the account error saying why not. */
  async function session(token: string | undefined): Promise<{ user: UserRow; sid: string | undefined }> {
    try {
      const { uid, sid } = await s.tokens.verifyAccessToken(token);
      return { user: await s.users.require(uid), sid };
    } catch (err) {
      throw err instanceof TokenError ? tokenFailure(err) : err;
    }
  }
  const account = async (token: string | undefined): Promise<UserRow> => (await session(token)).user;
  const withBearer = ({ headers }: { headers: Record<string, string | undefined> }) => account(bearerToken(headers.authorization));

  return new Elysia({ name: "accounts" })
    .post(
      "/v2/login/email/code",
      async ({ body, request }) => ({ result: 1 as const, ...(await s.email.sendCode(body.email, requestClientKey(request))) }),
      {
        body: t.Object({ email }),
        response: { 200: ok({ message: t.String() }), ...accountErrors(400, 429, 503) },
        detail: { summary: "Send a login code to an email address (the answer is the same whether or not it has an account)", tags: TAG, ...access.public },
      },
    )
    .post("/v2/login/email", async ({ body, request }) => ({ result: 1 as const, data: await s.email.loginWithCode(body, requestClientKey(request)) }), {
      body: t.Object({ email, code, ...client }),
      response: { 200: ok({ data: tokenPair }), ...accountErrors(400, 429) },
      detail: { summary: "Log in with an email code (makes the account on first use)", tags: TAG, ...access.public },
    })
    .post(
      "/v2/login/messenger",
      async ({ body, request }) => ({ result: 1 as const, data: await s.messenger.login(body, requestClientKey(request)) }),
      {
        body: t.Object({ initdata: t.String({ maxLength: 8192, description: "The messenger Mini App's init data" }), ...client }),
        response: { 200: ok({ data: tokenPair }), ...accountErrors(400, 401, 429, 503) },
        detail: { summary: "Log in with messenger Mini App init data", tags: TAG, ...access.public },
      },
    )
    .post(
      "/v2/login/browser",
      async ({ body, headers, request }) => ({ result: 1 as const, data: await s.browser.login(headers.authorization, body, requestClientKey(request)) }),
      {
        body: t.Object(client),
        response: { 200: ok({ data: tokenPair }), ...accountErrors(400, 401, 429, 503) },
        detail: { summary: "Log in with a browser wallet token (raw JWT in Authorization, no Bearer prefix)", tags: TAG, ...access.public },
      },
    )
    .post(
      "/v2/login/refresh",
      async ({ headers, request }) => ({ result: 1 as const, data: await s.tokens.refresh(headers.authorization?.trim() ?? "", requestClientKey(request)) }),
      {
        response: { 200: ok({ data: tokenPair }), ...accountErrors(401, 429) },
        detail: {
          ...access.public,
          summary: "New access token (and a new refresh token) for a refresh token in Authorization, no prefix",
          description:
            "The old refresh token stays usable until the new one is first used; using it after that revokes the session. A session of a DID account refreshes only while the key that signed in may sign for the DID in the DID registry; once it may not (an owner change, a revoked delegate), the refresh answers 401 and the session is revoked. A session ends at its maximum age from its login (STOWAGE_SESSION_MAX_AGE, 90 days by default) however often it is refreshed.",
          tags: TAG,
        },
      },
    )
    .get(
      "/v2/auth/me",
      async ({ headers, query, set }) => {
        try {
          const user = await account(bearerToken(headers.authorization) ?? query.token);
          return { success: true as const, data: s.users.current(user) };
        } catch (err) {
          // The registry's outage is no verdict on the token: 503, try again (spec 7.2's shape).
          if (err instanceof Unavailable) {
            set.status = 503;
            set.headers["retry-after"] = String(err.retryAfter);
            return { success: false as const, error: err.message };
          }
          if (!(err instanceof AccountError)) throw err;
          set.status = err.status;
          return { success: false as const, error: err.message };
        }
      },
      {
        query: t.Object({ token: t.Optional(t.String({ description: "Access token, when no Authorization header is sent" })) }),
        response: { 200: me, 401: me, 503: me },
        detail: { summary: "The current user (Bearer access token, or ?token=)", tags: TAG, ...access.bearer },
      },
    )
    .post(
      "/v2/auth/logout",
      async ({ headers }) => {
        await s.tokens.logout(headers.authorization);
        return { result: 1 as const };
      },
      {
        response: { 200: ok({}), ...accountErrors(401) },
        detail: {
          ...access.bearer,
          summary: "Log out: end the session of the token in Authorization",
          description:
            "The token is the session's access token (`Bearer <token>`) or its refresh token (with or without `Bearer`). Its refresh tokens stop working at once and its access tokens within seconds. Ending an ended session again answers 200.",
          tags: TAG,
        },
      },
    )
    .get(
      "/v2/auth/sessions",
      async ({ headers }) => {
        const { user, sid } = await session(bearerToken(headers.authorization));
        return { result: 1 as const, data: await s.tokens.sessions(user.id, sid) };
      },
      {
        response: { 200: ok({ data: t.Array(sessionInfo) }), ...accountErrors(401) },
        detail: {
          ...access.bearer,
          summary: "The account's live sessions (Bearer access token), most recently used first",
          description: "At most 100. `current` marks the session of the token that asked.",
          tags: TAG,
        },
      },
    )
    .delete(
      "/v2/auth/sessions/:id",
      async ({ headers, params }) => {
        const { user } = await session(bearerToken(headers.authorization));
        await s.tokens.revokeSession(user.id, params.id);
        return { result: 1 as const };
      },
      {
        params: t.Object({ id: t.String({ maxLength: 64, description: "A session id from GET /v2/auth/sessions" }) }),
        response: { 200: ok({}), ...accountErrors(400, 401, 404) },
        detail: {
          ...access.bearer,
          summary: "End one of the account's sessions (Bearer access token); the current one too",
          description: "Its refresh tokens stop working at once and its access tokens within seconds. 404 when the account has no live session of this id.",
          tags: TAG,
        },
      },
    )
    .post(
      "/v2/login/email/register",
      async ({ body, request }) => ({ result: 1 as const, data: await s.email.register(body, requestClientKey(request)), error: "" }),
      {
        body: t.Object({ email, code, password, ...client }),
        response: { 200: accountTokens, ...accountErrors(400, 409, 429, 503) },
        detail: { summary: "Register an email account with a code and a password", tags: TAG, ...access.public },
      },
    )
    .post(
      "/v2/login/email/password",
      async ({ body, request }) => ({ result: 1 as const, data: await s.email.loginWithPassword(body, requestClientKey(request)), error: "" }),
      {
        body: t.Object({ email, password }),
        response: { 200: accountTokens, ...accountErrors(400, 401, 429, 503) },
        detail: { summary: "Log in with email and password", tags: TAG, ...access.public },
      },
    )
    .post(
      "/v2/login/email/password/reset",
      async ({ body, request }) => {
        await s.email.resetPassword({ email: body.email, code: body.code, newPassword: body.new_password }, requestClientKey(request));
        return { result: 1 as const };
      },
      {
        body: t.Object({ email, code, new_password: password }),
        response: { 200: ok({}), ...accountErrors(400, 429, 503) },
        detail: { summary: "Set a new password with an email code; ends every session of the account", tags: TAG, ...access.public },
      },
    )
    .get(
      "/v2/login/evm/challenge",
      async ({ query, headers, request }) => ({
        result: 1 as const,
        // Browsers send no Origin on same-origin GETs; the page's Referer then says where it is.
        data: await s.evm.challenge({ address: query.address, chainid: query.chainid, origin: headers.origin ?? headers.referer ?? null }, requestClientKey(request)),
      }),
      {
        query: t.Object({
          address: t.String({ maxLength: 64, description: "Wallet address" }),
          chainid: t.Optional(t.Integer({ minimum: 1, description: "Chain id (default: this server's, 985)" })),
        }),
        response: { 200: ok({ data: t.String({ description: "EIP-4361 message to sign" }) }), ...accountErrors(400, 403, 429) },
        detail: { summary: "EIP-4361 sign-in message for a wallet address (Origin header required)", tags: TAG, ...access.public },
      },
    )
    .post("/v2/login/evm", async ({ body, request }) => ({ result: 1 as const, data: await s.evm.login(body, requestClientKey(request)) }), {
      body: t.Object({
        message: t.String({ maxLength: 4096, description: "The challenge message, unchanged" }),
        signature: t.String({ maxLength: 65536, description: "0x-hex signature (EOA, EIP-1271 or ERC-6492)" }),
        ...client,
      }),
      response: { 200: ok({ data: t.Object({ did: t.String(), number: t.String(), accessToken: t.String(), refreshToken: t.String() }) }), ...accountErrors(400, 401, 429, 503) },
      detail: {
        summary: "Log in with a signed sign-in message",
        description:
          "The account is the wallet's address and its DID, or the account the wallet was linked to (POST /v2/user/link-wallet). Refused with 401 when the DID registry names another owner for that DID: the address then acts for no DID (sign in with POST /login and a key the DID allows).",
        tags: TAG,
        ...access.public,
      },
    })
    .get(
      "/v2/user/link-wallet/challenge",
      async (c) => ({
        result: 1 as const,
        // As for the sign-in's challenge: a same-origin GET carries the page in its Referer.
        data: await s.link.challenge(await withBearer(c), { address: c.query.address, chainid: c.query.chainid, origin: c.headers.origin ?? c.headers.referer ?? null }, requestClientKey(c.request)),
      }),
      {
        query: t.Object({
          address: t.String({ maxLength: 64, description: "The wallet's address" }),
          chainid: t.Optional(t.Integer({ minimum: 1, description: "Chain id (default: this server's)" })),
        }),
        response: { 200: ok({ data: t.String({ description: "EIP-4361 message for the wallet to sign; its statement names this account" }) }), ...accountErrors(400, 401, 403, 409, 429) },
        detail: {
          ...access.bearer,
          summary: "The message a wallet signs to be linked to this account (Bearer access token, Origin header)",
          description:
            "For an account without a wallet (email, password, messenger): 409 when it has one. The message is good once, for this account only, for 10 minutes; a sign-in message cannot link a wallet, nor this one sign in.",
          tags: TAG,
        },
      },
    )
    .post(
      "/v2/user/link-wallet",
      async (c) => ({
        result: 1 as const,
        data: await s.link.link(await withBearer(c), bearerToken(c.headers.authorization), c.body, requestClientKey(c.request)),
      }),
      {
        body: t.Object({
          message: t.String({ maxLength: 4096, description: "The message of GET /v2/user/link-wallet/challenge, unchanged" }),
          signature: t.String({ maxLength: 65536, description: "The wallet's 0x-hex signature of it (EOA, EIP-1271 or ERC-6492)" }),
          ...client,
        }),
        response: {
          200: ok({ data: t.Object({ did: t.String({ description: "The account's DID now: the wallet's" }), number: t.String(), accessToken: t.String(), refreshToken: t.String() }) }),
          ...accountErrors(400, 401, 409, 429, 503),
        },
        detail: {
          ...access.bearer,
          summary: "Link the wallet that signed the challenge to this account: the account gets its address and DID (Bearer access token)",
          description:
            "Answers a new session, whose tokens act for the DID, and ends the one that asked. From then on the wallet's sign-in (POST /v2/login/evm, POST /login) opens this account. 409 when the wallet already belongs to an account (its own, or one it was linked to), or this account has a wallet; 401 when the registry names another owner for the wallet's DID.",
          tags: TAG,
        },
      },
    )
    .get("/v2/user/info", async (c) => ({ result: 1 as const, data: s.users.info(await withBearer(c)) }), {
      response: { 200: ok({ data: userInfo }), ...accountErrors(401) },
      detail: { summary: "The current user's info (Bearer access token)", tags: TAG, ...access.bearer },
    })
    .get(
      "/v2/data/record/:actionID",
      async (c) => {
        const user = await withBearer(c);
        return { result: 1 as const, data: await s.points.latest(user, actionId(c.params.actionID)) };
      },
      {
        params: t.Object({ actionID: t.String({ description: "Action id (positive integer)" }) }),
        response: { 200: ok({ data: t.Union([actionRecord, t.Null()]) }), ...accountErrors(400, 401) },
        detail: { summary: "The user's latest record of an action (null when none)", tags: TAG, ...access.bearer },
      },
    )
    .post(
      "/v2/data/record/add",
      async (c) => {
        const user = await withBearer(c);
        await s.points.add(user, actionId(c.body.actionid), c.body.opts);
        return { result: 1 as const };
      },
      {
        body: t.Object({
          actionid: t.Union([t.Number(), t.String()], { description: "Action id" }),
          opts: t.Optional(t.Unknown({ description: "Extra validation parameters of the action" })),
        }),
        response: { 200: ok({}), ...accountErrors(400, 401, 409) },
        detail: { summary: "Record a completed action and add its points", tags: TAG, ...access.bearer },
      },
    );
}
