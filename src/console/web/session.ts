/**
 * The console's state: the gateway it talks to, the account API client and its tokens, and —
 * for accounts with a DID — the storage client, the chain and the directory.
 *
 * Tokens live in sessionStorage (this tab, until it closes), so a reload keeps the sign-in. The
 * session key never leaves memory: secp256k1 is not in WebCrypto, so it cannot be a
 * non-extractable CryptoKey, and a key in memory dies with the page, which also ends what it may
 * sign (the gateway additionally stops accepting it at its grant's expiry or on revocation, D19).
 * After a reload the wallet grants a new one.
 */
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { createAccountClient, type AccountClient, type TokenPair } from "../../sdk/account.ts";
import { connectStorage, type StorageClient } from "../../sdk/storage.ts";
import { discoverGateway, type GatewayInfo } from "../../sdk/chain.ts";
import { sessionGrantsClient, type SessionGrantsClient } from "../../sdk/grants.ts";

const SAVED = "stowage.console.tokens";
const base = location.origin;

export interface Session {
  info: GatewayInfo;
  account: AccountClient;
  /** The DID the tokens carry; undefined for email, messenger and browser-wallet accounts. */
  did?: string;
  /** The wallet address the DID is, when signed in with a wallet. */
  address?: `0x${string}`;
  /** The storage client: Bearer calls work at once; signed ones once granted (the grant opens its session). */
  storage?: StorageClient;
  sessionKey?: PrivateKeyAccount;
  /** Unix seconds until which the session key may sign, once the wallet granted it. */
  grantedUntil?: number;
  /** The DID's session grants (D19): this page's key, and those of other tabs and devices. */
  grants?: SessionGrantsClient;
}

let current: Session | undefined;
let info: GatewayInfo | undefined;

const claims = (jwt: string): { did?: string; exp?: number } => {
  try {
    const part = (jwt.split(".")[1] ?? "").replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part)) as { did?: string; exp?: number };
  } catch {
    return {};
  }
};

function saveTokens(tokens: TokenPair | undefined) {
  if (tokens) sessionStorage.setItem(SAVED, JSON.stringify(tokens));
  else sessionStorage.removeItem(SAVED);
}

export async function gatewayInfo(): Promise<GatewayInfo> {
  info ??= await discoverGateway(base);
  return info;
}

export function newAccountClient(tokens?: TokenPair): AccountClient {
  return createAccountClient({ baseUrl: base, source: "stowage-console", useragent: navigator.userAgent, tokens, onTokens: saveTokens });
}

/** A fresh access token: refreshed when less than a minute of it is left. */
async function accessToken(account: AccountClient): Promise<string> {
  const tokens = account.tokens;
  if (!tokens) throw new Error("signed out");
  const exp = claims(tokens.accessToken).exp ?? 0;
  if (exp - Date.now() / 1000 > 60) return tokens.accessToken;
  return (await account.refresh()).accessToken;
}

/** Starts the session of a signed-in account client; with a DID, its storage client too. */
export async function begin(account: AccountClient, address?: `0x${string}`): Promise<Session> {
  const tokens = account.tokens;
  if (!tokens) throw new Error("not signed in");
  const gateway = await gatewayInfo();
  const did = claims(tokens.accessToken).did;
  const session: Session = { info: gateway, account, did, address };
  if (did) {
    // Made now, granted later: the wallet lets it sign when the user starts a storage session.
    session.sessionKey = privateKeyToAccount(generatePrivateKey());
    session.grants = sessionGrantsClient({ baseUrl: base, accessToken: () => accessToken(account) });
    session.storage = await connectStorage({ baseUrl: base, account: session.sessionKey, did, tokenProvider: () => accessToken(account) });
    session.address ??= `0x${did.split(":").pop()?.slice(-40)}` as `0x${string}`;
  }
  current = session;
  return session;
}

/** The session of an earlier sign-in in this tab, if its tokens still refresh. */
export async function resume(): Promise<Session | undefined> {
  const saved = sessionStorage.getItem(SAVED);
  if (!saved) return undefined;
  try {
    const account = newAccountClient(JSON.parse(saved) as TokenPair);
    await accessToken(account);
    return await begin(account);
  } catch {
    saveTokens(undefined);
    return undefined;
  }
}

export const session = () => current;

export async function end() {
  const s = current;
  current = undefined;
  if (s?.sessionKey && s.grantedUntil) {
    // Best effort: the key is gone with the page anyway, and the grant expires by itself.
    await s.grants?.revoke(s.sessionKey.address).catch(() => {});
  }
  // Ends the session at the gateway too; best effort, as above: the page forgets it either way.
  await s?.account.logout().catch(() => {});
  saveTokens(undefined);
}

export const bearer = async (s: Session) => ({ authorization: `Bearer ${await accessToken(s.account)}` });
