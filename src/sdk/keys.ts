/**
 * SDK: S3 access keys (D18). Minting is a restricted call (D5, action "keys") signed through a
 * logged-in storage client, so the same session and requestIDs serve uploads, deletes and keys;
 * listing and revoking need only its access token. Failures are AccountApiErrors (the /v2 model).
 *
 * @example
 *   const store = await connectStorage({ baseUrl, account }); await store.login()
 *   const keys = keysClient({ baseUrl, store })
 *   const { accessKeyId, secretAccessKey } = await keys.create({ access: "rw", bucket: "dfs" })
 *   await keys.revoke(accessKeyId)
 */
import type { ListedKey, MintedKey } from "./wire.ts";
import { AccountApiError } from "./account.ts";
import { bearerCall, type BearerMethod } from "./bearer.ts";
import type { StorageClient } from "./storage.ts";

export type { ListedKey, MintedKey };

export interface KeysClientOptions {
  baseUrl: string;
  /** A logged-in storage client: it signs the mint and lends its access token. */
  store: Pick<StorageClient, "accessToken" | "signRequest">;
  fetch?: typeof fetch;
}

export interface CreateKeyOptions {
  /** s3 (default): an S3 access key; pins: a Pinning Service API token (on ipfs; `access` and `bucket` do not apply). */
  scope?: "s3" | "pins";
  /** rw (default) or ro. */
  access?: "rw" | "ro";
  /** The bucket the key may use: dfs, ipfs or * (default: both). */
  bucket?: "dfs" | "ipfs" | "*";
  /** Unix seconds, or a Date; 0 or absent = no expiry. */
  expiresAt?: number | Date;
}

export function keysClient(opts: KeysClientOptions) {
  const base = opts.baseUrl.replace(/\/+$/, "");
  const doFetch = opts.fetch ?? fetch;

  async function call<T>(method: BearerMethod, path: string, body?: unknown): Promise<T> {
    const token = opts.store.accessToken;
    if (!token) throw new AccountApiError(401, "UNAUTHORIZED", "Not logged in: store.login() first");
    return bearerCall<T>(doFetch, `${base}${path}`, token, method, body);
  }

  return {
    /** Mints a key; the answer holds its secret, which the gateway never shows again. */
    async create(o: CreateKeyOptions = {}): Promise<MintedKey> {
      const expiry = o.expiresAt instanceof Date ? Math.floor(o.expiresAt.getTime() / 1000) : (o.expiresAt ?? 0);
      const payload = o.scope === "pins" ? `pins:ipfs:${expiry}` : `${o.access ?? "rw"}:${o.bucket ?? "*"}:${expiry}`;
      const signed = await opts.store.signRequest("keys", payload);
      return (await call<{ data: MintedKey }>("POST", "/v2/keys", signed)).data;
    },
    /** The account's keys not revoked, without secrets. */
    async list(): Promise<ListedKey[]> {
      return (await call<{ data: ListedKey[] }>("GET", "/v2/keys")).data;
    },
    /** Revokes a key by its id or its access key id. */
    async revoke(id: string): Promise<void> {
      await call("DELETE", `/v2/keys/${encodeURIComponent(id)}`);
    },
  };
}

export type KeysClient = ReturnType<typeof keysClient>;
