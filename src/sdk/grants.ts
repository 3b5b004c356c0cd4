/**
 * SDK: session grants (D19). A wallet signs one off-chain EIP-712 `SessionGrant(address key,
 * uint64 validUntil)` for a key an app holds (the web console's session key); registered at the
 * gateway, that key may then sign upload and delete Requests and Vouchers for the DID — never a
 * login, a purchase or a key mint — until `validUntil` (≤ 24 h) or until it is revoked here.
 * Calls carry the DID's access token; failures are AccountApiErrors (the /v2 model).
 *
 * @example
 *   const grants = sessionGrantsClient({ baseUrl, accessToken: () => store.accessToken ?? "" })
 *   const signature = await wallet.signTypedData({ domain, types: sessionGrantTypes, primaryType: "SessionGrant", message: { key, validUntil } })
 *   await grants.register({ key, validUntil, signature })
 *   for (const g of await grants.list()) await grants.revoke(g.key)
 */
import { AccountApiError } from "./account.ts";
import { bearerCall, type BearerMethod } from "./bearer.ts";
import type { SessionGrant } from "./wire.ts";

export type { SessionGrant };

/** The EIP-712 type a wallet signs for a session key, in the storage domain (name "Stowage", version "1", chainId, the Proxy):
 * the only spelling, the gateway recovers grants with it too (grants/service.ts). */
export const sessionGrantTypes = {
  SessionGrant: [
    { name: "key", type: "address" },
    { name: "validUntil", type: "uint64" },
  ],
} as const;

export interface SessionGrantsOptions {
  baseUrl: string;
  /** The DID account's access token (refreshed by the caller when needed). */
  accessToken: () => string | Promise<string>;
  fetch?: typeof fetch;
}

export function sessionGrantsClient(opts: SessionGrantsOptions) {
  const base = opts.baseUrl.replace(/\/+$/, "");
  const doFetch = opts.fetch ?? fetch;

  async function call<T>(method: BearerMethod, path: string, body?: unknown): Promise<T> {
    const token = await opts.accessToken();
    if (!token) throw new AccountApiError(401, "UNAUTHORIZED", "Not signed in");
    return bearerCall<T>(doFetch, `${base}${path}`, token, method, body);
  }

  return {
    /** Registers the grant the wallet signed; the key may sign from now until `validUntil`. */
    async register(grant: { key: `0x${string}`; validUntil: number | bigint; signature: `0x${string}` }): Promise<SessionGrant> {
      return (await call<{ data: SessionGrant }>("POST", "/v2/session-grants", { key: grant.key, validUntil: Number(grant.validUntil), signature: grant.signature })).data;
    },
    /** The DID's live grants (not expired, not revoked). */
    async list(): Promise<SessionGrant[]> {
      return (await call<{ data: SessionGrant[] }>("GET", "/v2/session-grants")).data;
    },
    /** Revokes a key's grant at once: the gateway refuses its signatures from now on. */
    async revoke(key: string): Promise<void> {
      await call("DELETE", `/v2/session-grants/${encodeURIComponent(key)}`);
    },
  };
}

export type SessionGrantsClient = ReturnType<typeof sessionGrantsClient>;
