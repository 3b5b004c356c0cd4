/**
 * SDK: the account API (`/v2`) of a Stowage gateway. Fetch-based, so it runs in Bun, Node and
 * browsers. The client keeps the token pair of its last login, sends the access token where one
 * is needed, and refreshes it once when the server says it has expired (spec 5, storage rule 4).
 *
 * @example
 *   const client = createAccountClient({ baseUrl: "https://gw.example", source: "my-app" })
 *   await client.loginWithEvmAccount(privateKeyToAccount(key))  // challenge → sign → login
 *   const me = await client.me()
 *   await client.addRecord(5)
 */

// The shapes the server answers (spec 2.11, 2.12): the SDK's own, held equal to the server's by a type test.
import type { CurrentUser, SessionInfo, UserInfo } from "./wire.ts";
export type { CurrentUser, SessionInfo, UserInfo };

/** Spec 2.10. */
export interface TokenPair {
  accessToken: string;
  refreshToken: string;
}

/** Spec 4.2 rows 7 and 8. */
export interface AccountTokens extends TokenPair {
  uid?: string;
  number?: string;
}

/** Spec 4.2 row 11. */
export interface EvmLoginResult extends TokenPair {
  did: string;
  number: string;
}

/** Spec 2.13. */
export interface ActionRecord {
  action: number;
  points: number;
  /** Unix seconds. */
  time: number;
}

/** A failure answered by the server: `error` is its name (D11), such as CODE_INVALID or RATE_LIMITED. */
export class AccountApiError extends Error {
  override name = "AccountApiError";
  constructor(
    readonly status: number,
    readonly error: string,
    message: string,
    /** Seconds to wait, on a 429. */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

/** What signs a sign-in message: a viem account, a wallet client bound to one, or anything alike. */
export interface MessageSigner {
  address: string;
  signMessage(args: { message: string }): Promise<string>;
}

export interface AccountClientOptions {
  baseUrl: string;
  /** `source` sent with every login: which kind of client this is. */
  source?: string;
  useragent?: string;
  /**
   * The Origin the sign-in message is for. Browsers send their own and ignore this; other
   * clients must name one of the gateway's STOWAGE_ALLOWED_ORIGINS. Default: the base URL's origin.
   */
  origin?: string;
  /** Tokens of an earlier session. */
  tokens?: TokenPair;
  /** Called whenever the tokens change (login, refresh, logout), to persist them. */
  onTokens?: (tokens: TokenPair | undefined) => void;
  /** A fetch to use instead of the global one (tests, proxies). */
  fetch?: (request: Request) => Promise<Response>;
}

type Body = Record<string, unknown>;
type Call = { method: "GET" | "POST" | "DELETE"; path: string; body?: Body; headers?: Record<string, string> };

export function createAccountClient(opts: AccountClientOptions) {
  const base = opts.baseUrl.replace(/\/+$/, "");
  const doFetch = opts.fetch ?? ((r: Request) => fetch(r));
  const client = { source: opts.source ?? "stowage-sdk", ...(opts.useragent ? { useragent: opts.useragent } : {}) };
  let tokens = opts.tokens;
  let refreshing: Promise<TokenPair> | undefined;

  const setTokens = (next: TokenPair | undefined) => {
    tokens = next;
    opts.onTokens?.(next);
  };

  async function send({ method, path, body, headers = {} }: Call): Promise<{ status: number; json: Body; headers: Headers }> {
    const init: RequestInit = { method, headers: { ...headers } };
    if (body) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)["content-type"] = "application/json";
    }
    const res = await doFetch(new Request(`${base}${path}`, init));
    const text = await res.text();
    let json: Body;
    try {
      json = text ? (JSON.parse(text) as Body) : {};
    } catch {
      throw new AccountApiError(res.status, "BAD_RESPONSE", `The gateway answered ${res.status} with a body that is not JSON`);
    }
    return { status: res.status, json, headers: res.headers };
  }

  /** Sends and unwraps `{ result: 1, … }`; anything else becomes an AccountApiError. */
  async function call(c: Call): Promise<Body> {
    const { status, json, headers } = await send(c);
    if (json.result === 1) return json;
    const retryAfter = headers.has("retry-after") ? Number(headers.get("retry-after")) : undefined;
    throw new AccountApiError(status, String(json.error ?? "UNKNOWN"), String(json.message ?? json.error ?? `HTTP ${status}`), retryAfter);
  }

  const requireTokens = () => {
    if (!tokens) throw new AccountApiError(401, "UNAUTHORIZED", "Not logged in");
    return tokens;
  };

  async function refresh(): Promise<TokenPair> {
    // One refresh for any number of callers: two refreshes with one token would look like reuse.
    refreshing ??= (async () => {
      try {
        const { data } = await call({ method: "POST", path: "/v2/login/refresh", headers: { authorization: requireTokens().refreshToken } });
        setTokens(data as TokenPair);
        return data as TokenPair;
      } finally {
        refreshing = undefined;
      }
    })();
    return refreshing;
  }

  /** A call with the access token; on a 401 it refreshes once and tries again. */
  async function authed<T>(run: (accessToken: string) => Promise<T>): Promise<T> {
    const before = requireTokens();
    try {
      return await run(before.accessToken);
    } catch (err) {
      if (!(err instanceof AccountApiError) || err.status !== 401) throw err;
      // Another call may have refreshed already; use its token rather than refreshing again.
      const now = tokens && tokens.accessToken !== before.accessToken ? tokens : await refresh();
      return run(now.accessToken);
    }
  }
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

  async function login<T extends TokenPair>(c: Call): Promise<T> {
    const { data } = await call(c);
    setTokens({ accessToken: (data as T).accessToken, refreshToken: (data as T).refreshToken });
    return data as T;
  }

  const origin = opts.origin ?? new URL(base).origin;

  async function evmChallenge(address: string, chainId?: number): Promise<string> {
    const query = new URLSearchParams({ address, ...(chainId === undefined ? {} : { chainid: String(chainId) }) });
    return String((await call({ method: "GET", path: `/v2/login/evm/challenge?${query}`, headers: { origin } })).data);
  }
  const loginWithEvm = (message: string, signature: string) =>
    login<EvmLoginResult>({ method: "POST", path: "/v2/login/evm", body: { message, signature, ...client } });

  return {
    get tokens() {
      return tokens;
    },
    setTokens,
    /**
     * Ends this session at the gateway (its tokens stop working there too) and forgets its tokens.
     * A session the gateway had ended already, or whose refresh token expired, is no error.
     */
    async logout(): Promise<void> {
      const ended = tokens;
      setTokens(undefined);
      if (!ended) return;
      const { status, json, headers } = await send({ method: "POST", path: "/v2/auth/logout", headers: { authorization: ended.refreshToken } });
      if (json.result === 1 || status === 401) return;
      const retryAfter = headers.has("retry-after") ? Number(headers.get("retry-after")) : undefined;
      throw new AccountApiError(status, String(json.error ?? "UNKNOWN"), String(json.message ?? `HTTP ${status}`), retryAfter);
    },
    /** The account's live sessions, most recently used first; `current` marks this client's. */
    sessions: () => authed(async (token) => (await call({ method: "GET", path: "/v2/auth/sessions", headers: bearer(token) })).data as SessionInfo[]),
    /** Ends one of the account's sessions (this one too, when given its id). */
    async revokeSession(id: string): Promise<void> {
      await authed((token) => call({ method: "DELETE", path: `/v2/auth/sessions/${encodeURIComponent(id)}`, headers: bearer(token) }));
    },

    /** Row 1: mails a 6-digit code (the answer is the same whether or not the address has an account). */
    async sendEmailCode(email: string): Promise<string> {
      return String((await call({ method: "POST", path: "/v2/login/email/code", body: { email } })).message ?? "");
    },
    /** Row 2. */
    loginWithEmailCode: (email: string, code: string) => login<TokenPair>({ method: "POST", path: "/v2/login/email", body: { email, code, ...client } }),
    /** Row 7. */
    register: (email: string, code: string, password: string) =>
      login<AccountTokens>({ method: "POST", path: "/v2/login/email/register", body: { email, code, password, ...client } }),
    /** Row 8. */
    loginWithPassword: (email: string, password: string) => login<AccountTokens>({ method: "POST", path: "/v2/login/email/password", body: { email, password } }),
    /** Row 9: ends every session of the account, this client's included. */
    async resetPassword(email: string, code: string, newPassword: string): Promise<void> {
      await call({ method: "POST", path: "/v2/login/email/password/reset", body: { email, code, new_password: newPassword } });
    },
    /** Row 3: the messenger Mini App's init data, as the messenger gave it. */
    loginWithMessenger: (initdata: string) => login<TokenPair>({ method: "POST", path: "/v2/login/messenger", body: { initdata, ...client } }),
    /** Row 4: the browser wallet provider's token. */
    loginWithBrowser: (providerToken: string) =>
      login<TokenPair>({ method: "POST", path: "/v2/login/browser", body: { ...client }, headers: { authorization: providerToken } }),
    /** Row 5: new tokens for the refresh token. */
    refresh,
    /** Row 6. */
    async me(): Promise<CurrentUser> {
      return authed(async (token) => {
        const { status, json } = await send({ method: "GET", path: "/v2/auth/me", headers: bearer(token) });
        if (json.success === true) return json.data as CurrentUser;
        throw new AccountApiError(status, "UNAUTHORIZED", String(json.error ?? `HTTP ${status}`));
      });
    },
    /** Row 10: the EIP-4361 message to sign. */
    evmChallenge,
    /** Row 11. */
    loginWithEvm,
    /** Rows 10 and 11 together: challenge, sign with `signer`, log in. */
    async loginWithEvmAccount(signer: MessageSigner, opts: { address?: string; chainId?: number } = {}): Promise<EvmLoginResult> {
      const message = await evmChallenge(opts.address ?? signer.address, opts.chainId);
      return loginWithEvm(message, await signer.signMessage({ message }));
    },
    /**
     * Links the wallet of `signer` to this account, which has none yet (an email, password or
     * messenger account): the gateway answers the message to sign (it names the account), the
     * wallet signs it, and the account gets the wallet's address and DID. The client then holds
     * the new session's tokens, which act for the DID; the wallet's sign-in opens this account.
     */
    async linkWallet(signer: MessageSigner, opts: { address?: string; chainId?: number } = {}): Promise<EvmLoginResult> {
      const query = new URLSearchParams({ address: opts.address ?? signer.address, ...(opts.chainId === undefined ? {} : { chainid: String(opts.chainId) }) });
      const message = await authed(async (token) => String((await call({ method: "GET", path: `/v2/user/link-wallet/challenge?${query}`, headers: { ...bearer(token), origin } })).data));
      const signature = await signer.signMessage({ message });
      // Not retried after a refresh: the message is good once, so a second try could only fail.
      return login<EvmLoginResult>({ method: "POST", path: "/v2/user/link-wallet", body: { message, signature, ...client }, headers: bearer(requireTokens().accessToken) });
    },
    /** Row 12. */
    userInfo: () => authed(async (token) => (await call({ method: "GET", path: "/v2/user/info", headers: bearer(token) })).data as UserInfo),
    /** Row 13: the latest record of an action, or null. */
    getRecord: (actionId: number) =>
      authed(async (token) => ((await call({ method: "GET", path: `/v2/data/record/${actionId}`, headers: bearer(token) })).data ?? null) as ActionRecord | null),
    /** Row 14. */
    async addRecord(actionId: number, opts?: unknown): Promise<void> {
      await authed((token) => call({ method: "POST", path: "/v2/data/record/add", body: { actionid: actionId, ...(opts === undefined ? {} : { opts }) }, headers: bearer(token) }));
    },
  };
}

export type AccountClient = ReturnType<typeof createAccountClient>;
