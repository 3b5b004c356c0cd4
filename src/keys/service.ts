/**
 * Access keys (D18): S3 keys, and Pinning Service API tokens (scope `pins`). A key is minted by a signed restricted request (D5, action "keys") next
 * to the Bearer token, so a leaked access token alone cannot mint a lasting credential; the key
 * that signed is recorded, and the access key works only while that key may still sign for the
 * DID (the D3 rule for refresh tokens: `keyStillSigns`). The secret is shown once, at minting,
 * and kept sealed under the secrets key (secret-box.ts).
 *
 * `findAccessKey` is the S3 listener's one entry here: it answers a usable key with its secret,
 * or undefined for anything that must not authenticate.
 *
 * @example
 *   const keys = createKeys({ sql, secretsKey, resolver, chainId, domain })
 *   const minted = await keys.create(caller, { did, token, requestID, payload: "rw:*:0", signature })
 *   const key = await findAccessKey(deps, minted.accessKeyId) // { secretAccessKey, did, access, … }
 */
import { timingSafeEqual } from "node:crypto";
import type { TypedDataDomain } from "viem";
import type { Sql } from "../db/sql.ts";
import type { Logger } from "../log.ts";
import { Failure } from "../failure.ts";
import type { Limit } from "../http/rate-limit.ts";
import { createSharedRateLimiter } from "../http/shared-rate-limit.ts";
import type { Did } from "../identity/did.ts";
import { keyStillSigns, type DidResolver } from "../identity/resolver.ts";
import { createSessions, type RestrictedInput } from "../authorities/sessions.ts";
import { fail } from "./error-codes.ts";
import type { ListedKey, MintedKey } from "./model.ts";
import { secretBox, type SecretBox } from "./secret-box.ts";

export type KeyAccess = "rw" | "ro" | "pins";
export type KeyBucket = "dfs" | "ipfs" | "*";

/** A usable key as the S3 listener needs it (the contract with src/s3api). */
export type AccessKey = {
  id: string;
  accessKeyId: string;
  secretAccessKey: string;
  did: string;
  access: KeyAccess;
  bucket: KeyBucket;
  /** Unix seconds; null = no expiry. */
  expiresAt: number | null;
};

export interface KeysDeps {
  sql: Sql;
  /** 32 bytes: STOWAGE_SECRETS_KEY, or the one generated in data/secrets. */
  secretsKey: Uint8Array;
  resolver: DidResolver;
  chainId: number;
  /** The EIP-712 domain restricted requests are signed in (D4). */
  domain: TypedDataDomain;
  /** Epoch ms. */
  now?: () => number;
  /** Active keys one account may hold (default MAX_KEYS_PER_ACCOUNT). */
  maxKeys?: number;
  /** Mints per account in a window, counted in the shared database (default MINT_LIMIT); on unless false. */
  rateLimits?: boolean;
  mintLimit?: Limit;
  /** Mints and revocations are logged (who, which key id, signer, scope): an audit trail. */
  log?: Logger;
}

/** Active keys one account may hold at once: bounds the table a signing key can fill. */
export const MAX_KEYS_PER_ACCOUNT = 100;
/** Mints per account an hour, across gateways: revoked keys stay as rows, so minting and revoking
 * in a loop must not grow the table without bound either. */
export const MINT_LIMIT: Limit = { name: "keys-mint-did", max: 30, windowMs: 60 * 60_000 };
/** How long a revoked or expired key's row stays (without its secret) before a mint of the same
 * account removes it: long enough to answer "which key was that?" from the logs. */
export const KEEP_DEAD_KEYS_MS = 30 * 24 * 3_600_000;

const PURPOSE = "s3-access-key-secret";
/** AWS's alphabet for access key ids: base32's. */
const ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const ID_PREFIX = "STW";
const ACCESS_KEY_ID = /^STW[A-Z2-7]{17}$/;

// $2: the scopes that may authenticate where the caller asks (S3: rw and ro; the pinning API: pins).
const FIND = `SELECT id, access_key_id AS "accessKeyId", did, signer, access, bucket, secret_enc AS "secretEnc", expires_at AS "expiresAt"
  FROM access_keys WHERE access_key_id = $1 AND revoked_at IS NULL AND (access = $2 OR access = $3)`;
const LIST = `SELECT id, access_key_id AS "accessKeyId", access AS scope, bucket, expires_at AS "expiresAt", created_at AS "createdAt", signer
  FROM access_keys WHERE did = $1 AND revoked_at IS NULL ORDER BY created_at, id`;
const ACTIVE = "SELECT COUNT(*) AS n FROM access_keys WHERE did = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)";
const INSERT = `INSERT INTO access_keys (id, access_key_id, did, signer, access, bucket, secret_enc, expires_at, created_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`;
// The sealed secret goes at once: a revoked key never authenticates again, so nothing needs it.
const REVOKE = "UPDATE access_keys SET revoked_at = $3, secret_enc = '' WHERE (id = $1 OR access_key_id = $1) AND did = $2 AND revoked_at IS NULL RETURNING id, access_key_id AS \"accessKeyId\"";
const PURGE_DEAD = "DELETE FROM access_keys WHERE did = $1 AND ((revoked_at IS NOT NULL AND revoked_at <= $2) OR (expires_at IS NOT NULL AND expires_at <= $2))";

type Row = { id: string; accessKeyId: string; did: string; signer: string; access: KeyAccess; bucket: KeyBucket; secretEnc: string; expiresAt: number | null };

const boxes = new WeakMap<Uint8Array, SecretBox>();
const boxFor = (secretsKey: Uint8Array) => {
  let box = boxes.get(secretsKey);
  if (!box) boxes.set(secretsKey, (box = secretBox(secretsKey, PURPOSE)));
  return box;
};

const toSeconds = (ms: number | null) => (ms === null ? null : Math.floor(ms / 1000));

/**
 * The key named `accessKeyId` with its secret, if it may authenticate now: known, not revoked,
 * not expired, and its recorded signer still the DID's owner or a valid delegate (the resolver's
 * answers are cached ≤ 10 s, so a revocation on chain takes effect within that). A chain that
 * does not answer, or a secret that does not open, throws: neither is the key's fault.
 */
export async function findAccessKey(deps: FindDeps, accessKeyId: string): Promise<AccessKey | undefined> {
  return findKey(deps, accessKeyId, ["rw", "ro"]);
}

type FindDeps = Pick<KeysDeps, "sql" | "secretsKey" | "resolver" | "chainId" | "now">;

async function findKey(deps: FindDeps, accessKeyId: string, scopes: readonly [KeyAccess, KeyAccess]): Promise<AccessKey | undefined> {
  if (!ACCESS_KEY_ID.test(accessKeyId)) return undefined;
  const row = await deps.sql.get<Row>(FIND, [accessKeyId, ...scopes]);
  if (!row) return undefined;
  if (row.expiresAt !== null && row.expiresAt <= (deps.now ?? Date.now)()) return undefined;
  if (!(await keyStillSigns(deps.resolver, deps.chainId, { did: row.did, signer: row.signer }))) return undefined;
  const secretAccessKey = boxFor(deps.secretsKey).open(row.secretEnc, row.id);
  return { id: row.id, accessKeyId: row.accessKeyId, secretAccessKey, did: row.did, access: row.access, bucket: row.bucket, expiresAt: toSeconds(row.expiresAt) };
}

/**
 * The Pinning Service API's token (a key of scope `pins`) as the account it acts for, if it may
 * authenticate now (as `findAccessKey`): `<access key id>.<secret>`, the secret compared in
 * constant time. An S3 key's id with its secret is no token, and a token is no S3 key.
 */
export async function findPinsToken(deps: FindDeps, token: string): Promise<{ id: string; did: string } | undefined> {
  const dot = token.indexOf(".");
  if (dot < 0 || token.length > 128) return undefined;
  const key = await findKey(deps, token.slice(0, dot), ["pins", "pins"]);
  if (!key) return undefined;
  const given = Buffer.from(token.slice(dot + 1));
  const kept = Buffer.from(key.secretAccessKey);
  if (given.length !== kept.length || !timingSafeEqual(given, kept)) return undefined;
  return { id: key.id, did: key.did };
}

/** The Bearer token of a pins key: its access key id, a dot, its secret. */
export const pinsToken = (accessKeyId: string, secret: string) => `${accessKeyId}.${secret}`;

/**
 * `<rw|ro>:<dfs|ipfs|*>:<expiry unix seconds, 0 = none>`, or `pins:ipfs:<expiry>` (a pinning
 * token acts on ipfs only); the expiry must be in the future.
 */
export function parseKeyPayload(payload: unknown, nowMs: number): { access: KeyAccess; bucket: KeyBucket; expiresAt: number | null } {
  const m = typeof payload === "string" ? /^(?:(rw|ro):(dfs|ipfs|\*)|(pins):(ipfs)):(0|[1-9]\d{0,11})$/.exec(payload) : null;
  if (!m) throw fail("KEY_PAYLOAD_INVALID", typeof payload === "string" ? `got ${JSON.stringify(payload.slice(0, 64))}` : "payload is missing");
  const expiry = Number(m[5]);
  if (expiry !== 0 && expiry * 1000 <= nowMs) throw fail("KEY_PAYLOAD_INVALID", "the expiry is in the past");
  return { access: (m[1] ?? m[3]) as KeyAccess, bucket: (m[2] ?? m[4]) as KeyBucket, expiresAt: expiry === 0 ? null : expiry };
}

function randomAccessKeyId(): string {
  // 32 symbols divide 256: each byte's low five bits pick one uniformly.
  const bytes = crypto.getRandomValues(new Uint8Array(17));
  return ID_PREFIX + Array.from(bytes, (b) => ID_ALPHABET[b & 31]).join("");
}

/** 40 characters of base64url: 240 random bits. */
const randomSecret = () => Buffer.from(crypto.getRandomValues(new Uint8Array(30))).toString("base64url");

export function createKeys(deps: KeysDeps) {
  const { sql } = deps;
  const now = deps.now ?? Date.now;
  const sessions = createSessions({ sql, resolver: deps.resolver, domain: deps.domain, chainId: deps.chainId, now });
  const box = boxFor(deps.secretsKey);
  const maxKeys = deps.maxKeys ?? MAX_KEYS_PER_ACCOUNT;
  const limiter = createSharedRateLimiter(sql, { now, enabled: deps.rateLimits !== false });
  const mintLimit = deps.mintLimit ?? MINT_LIMIT;

  /** POST /v2/keys: a new key for the Bearer DID `caller`, from its signed restricted request. */
  async function create(caller: Did, input: RestrictedInput): Promise<MintedKey> {
    // The payload first: a malformed one claims no requestID and stores nothing.
    const wanted = parseKeyPayload(input.payload, now());
    // Before any signature work: a flood of mints, signed or not, costs one counter each.
    const verdict = await limiter.hit(mintLimit, caller.canonical);
    if (!verdict.ok) throw fail("KEY_RATE_LIMITED", undefined, { "Retry-After": String(verdict.retryAfter) });
    let signer: string;
    try {
      ({ signer } = await sessions.restricted(input, "keys", caller));
    } catch (err) {
      // The same refusals as uploads and deletes, in the account API's error model.
      if (err instanceof Failure && err.code === "unauthenticated") throw fail("KEY_REQUEST_REFUSED", err.message);
      throw err;
    }
    const id = crypto.randomUUID();
    const accessKeyId = randomAccessKeyId();
    const secretAccessKey = randomSecret();
    const sealed = box.seal(secretAccessKey, id);
    const t = now();
    const expiresMs = wanted.expiresAt === null ? null : wanted.expiresAt * 1000;
    // Count and insert in one serializable transaction: two mints at once cannot both take the last place.
    await sql.tx(async (tx) => {
      // Rows dead for long are dropped here, where the account adds one: the table stays bounded
      // by live keys plus a month of dead ones, with no sweeper of its own.
      await tx.run(PURGE_DEAD, [caller.canonical, t - KEEP_DEAD_KEYS_MS]);
      const active = await tx.get<{ n: number }>(ACTIVE, [caller.canonical, t]);
      if (Number(active?.n ?? 0) >= maxKeys) throw fail("KEY_LIMIT", `at most ${maxKeys}`);
      await tx.run(INSERT, [id, accessKeyId, caller.canonical, signer.toLowerCase(), wanted.access, wanted.bucket, sealed, expiresMs, t]);
    });
    deps.log?.info("access key minted", { did: caller.canonical, id, accessKeyId, signer: signer.toLowerCase(), scope: wanted.access, bucket: wanted.bucket, expiresAt: wanted.expiresAt });
    const minted: MintedKey = { accessKeyId, secretAccessKey, scope: wanted.access, bucket: wanted.bucket, expiresAt: wanted.expiresAt };
    return wanted.access === "pins" ? { ...minted, token: pinsToken(accessKeyId, secretAccessKey) } : minted;
  }

  /** GET /v2/keys: the account's keys not revoked (expired ones too, with their expiry), no secrets. */
  async function list(caller: Did): Promise<ListedKey[]> {
    const rows = await sql.all<ListedKey>(LIST, [caller.canonical]);
    return rows.map((r) => ({ ...r, expiresAt: toSeconds(r.expiresAt), createdAt: toSeconds(r.createdAt) as number }));
  }

  /** DELETE /v2/keys/<id>: `id` is the key's id or its access key id; another account's is not found. */
  async function revoke(caller: Did, id: string): Promise<void> {
    const done = await sql.get<{ id: string; accessKeyId: string }>(REVOKE, [id, caller.canonical, now()]);
    if (!done) throw fail("KEY_NOT_FOUND");
    deps.log?.info("access key revoked", { did: caller.canonical, id: done.id, accessKeyId: done.accessKeyId });
  }

  const find = (accessKeyId: string) => findAccessKey(deps, accessKeyId);
  const findPins = (token: string) => findPinsToken(deps, token);

  return { create, list, revoke, find, findPins };
}

export type Keys = ReturnType<typeof createKeys>;
