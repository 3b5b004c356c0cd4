/**
 * SDK: session grants (D19). An app holds a key of its own (the web console's session key) and
 * the wallet signs, once, an EIP-4361 (Sign-In with Ethereum) message whose ERC-5573 ReCap names
 * the DID and what the key may sign for it — upload and delete requests and traffic vouchers,
 * never a login, a purchase, a key mint or the age identity — until its Expiration Time (≤ 24 h).
 * A SIWE message names the site that asks for it (its domain line), and wallets check that
 * against the page they run in, so another site cannot ask for a grant in this one's name; the
 * gateway takes it only from an allowed origin, with a nonce it issued for that DID, once.
 * Registering the grant also opens the key's storage session (its `token`): the key signs
 * requests at once, and the wallet never signs a storage login. Calls carry the DID's access
 * token; failures are AccountApiErrors (the /v2 model).
 *
 * @example
 *   const grants = sessionGrantsClient({ baseUrl, accessToken: () => store.accessToken ?? "" })
 *   const granted = await grantSessionKey({ grants, origin: location.origin, address, did, key: key.address, chainId,
 *     signMessage: (message) => wallet.signMessage({ account: address, message }) })
 *   store.useSession(granted.token)                 // the key now signs uploads, deletes, vouchers
 *   for (const g of await grants.list()) await grants.revoke(g.key)
 */
import { createSiweMessage } from "viem/siwe";
import { getAddress, type Address, type Hex } from "viem";
import { AccountApiError } from "./account.ts";
import { bearerCall, type BearerMethod } from "./bearer.ts";
import { encodeRecap, recapStatement } from "./recap.ts";
import type { GrantNonce, RegisteredGrant, SessionGrant } from "./wire.ts";

export type { GrantNonce, RegisteredGrant, SessionGrant };

/** The ReCap namespace of a grant's abilities. */
export const GRANT_NAMESPACE = "stowage";
/** What a session key may be granted, in the ReCap's order: nothing else is ever accepted. */
export const GRANT_ABILITIES = ["delete", "upload", "voucher"] as const;
export type GrantAbility = (typeof GRANT_ABILITIES)[number];
/** A grant lasts at most a day. */
export const MAX_GRANT_SECONDS = 24 * 3600;
/** What the wallet shows before the ReCap's own sentence. */
export const GRANT_STATEMENT = "Let a key held by this page sign for your Stowage account until the expiration time below.";

/** The SIWE URI of a grant: the key it delegates to, as a did:pkh (CAIP-10) on the gateway's chain. */
export const sessionKeyUri = (chainId: number, key: Address) => `did:pkh:eip155:${chainId}:${getAddress(key)}`;

export interface SessionGrantMessage {
  /** The page's origin (`location.origin`): the wallet compares it with the page that asks. */
  origin: string;
  /** The wallet address that signs (the DID's owner or one of its delegates). */
  address: Address;
  /** The DID the key will sign for. */
  did: string;
  /** The session key's address. */
  key: Address;
  chainId: number;
  /** From `grants.nonce()`: issued for this DID, used once. */
  nonce: string;
  expirationTime: Date;
  issuedAt?: Date;
  /** Default: all of GRANT_ABILITIES. */
  abilities?: readonly GrantAbility[];
}

/** The EIP-4361 text of a grant with its ReCap, for the wallet's personal_sign. */
export function sessionGrantMessage(m: SessionGrantMessage): string {
  const url = new URL(m.origin);
  const abilities = m.abilities ?? GRANT_ABILITIES;
  const att = { [m.did]: Object.fromEntries(abilities.map((a) => [`${GRANT_NAMESPACE}/${a}`, [{}]])) };
  const recap = encodeRecap(att);
  return createSiweMessage({
    scheme: url.protocol.slice(0, -1),
    domain: url.host,
    address: getAddress(m.address),
    statement: `${GRANT_STATEMENT} ${recapStatement(att)}`,
    uri: sessionKeyUri(m.chainId, m.key),
    version: "1",
    chainId: m.chainId,
    nonce: m.nonce,
    issuedAt: m.issuedAt ?? new Date(),
    expirationTime: m.expirationTime,
    resources: [recap],
  });
}

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
    /** A nonce for one grant of this DID (valid 10 minutes, used once). */
    async nonce(): Promise<GrantNonce> {
      return (await call<{ data: GrantNonce }>("POST", "/v2/session-grants/nonce")).data;
    },
    /** Registers the grant the wallet signed; answers it with the key's storage session token. */
    async register(grant: { message: string; signature: Hex }): Promise<RegisteredGrant> {
      return (await call<{ data: RegisteredGrant }>("POST", "/v2/session-grants", { message: grant.message, signature: grant.signature })).data;
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

/**
 * One grant from start to end: a nonce, the message, the wallet's signature (one prompt), the
 * registration. `seconds` defaults to 8 hours (at most MAX_GRANT_SECONDS).
 */
export async function grantSessionKey(o: {
  grants: SessionGrantsClient;
  origin: string;
  address: Address;
  did: string;
  key: Address;
  chainId: number;
  signMessage: (message: string) => Promise<Hex>;
  seconds?: number;
  abilities?: readonly GrantAbility[];
}): Promise<RegisteredGrant> {
  const { nonce } = await o.grants.nonce();
  const issuedAt = new Date();
  const message = sessionGrantMessage({ ...o, nonce, issuedAt, expirationTime: new Date(issuedAt.getTime() + (o.seconds ?? 8 * 3600) * 1000) });
  return o.grants.register({ message, signature: await o.signMessage(message) });
}
