/**
 * Session grants (D19). The console makes a key in the browser and the wallet signs, once, an
 * EIP-4361 (Sign-In with Ethereum) message: its domain is the page's origin (which wallets check
 * against the page that asks, so no other site can ask for it in this one's name), its URI the
 * key (`did:pkh:eip155:<chain>:<key>`), its Expiration Time the grant's end (≤ 24 h), and its
 * ERC-5573 ReCap the DID and what the key may sign for it: upload and delete `Request`s and
 * traffic `Voucher`s — never a login, a purchase, a key mint or the age identity (those check the
 * DID's keys alone, and a ReCap asking for anything else is refused). The gateway checks it as it
 * checks a SIWE login: an allowed origin, its chain, a nonce it issued for this DID used once,
 * the times, the signature (a plain key or a smart wallet), and that the signer may sign for the
 * DID the grant names, which must be the Bearer caller's. A grant holds only while its signer may
 * still sign for the DID, so a revoked delegate's grants die with it.
 *
 * Registering also opens the key's storage session (a fresh token, requestIDs from 1): the key
 * signs requests at once and never a login, and the wallet signs nothing else to start storage.
 *
 * Why a table and not a grant carried by every call: a download's voucher is its only
 * credential (a query string with no room for a grant and its signature to go with it), a grant
 * must be revocable (which needs a row anyway), and one lookup by (did, key) is all a check costs.
 *
 * @example
 *   const grants = createGrants({ sql, resolver, chainId, allowedOrigins, verifySignature, openSession })
 *   const { nonce } = await grants.nonce(did)
 *   await grants.register(did, { message, signature })
 *   await grants.allows(did, signer, "upload") // true while the grant holds and names "upload"
 */
import { bytesToHex, getAddress, isAddress, isHex, type Address, type Hex } from "viem";
import { generateSiweNonce } from "viem/siwe";
import { fail } from "../accounts/error-codes.ts";
import { originOf } from "../accounts/evm.ts";
import { parseSiwe } from "../accounts/siwe.ts";
import type { Sql } from "../db/sql.ts";
import { accountError } from "../http/errors.ts";
import { parseDid, type Did } from "../identity/did.ts";
import type { DidResolver } from "../identity/resolver.ts";
import { GRANT_ABILITIES, GRANT_NAMESPACE, MAX_GRANT_SECONDS, type GrantAbility } from "../sdk/grants.ts";
import { decodeRecap, RECAP_PREFIX, RecapError, recapStatement } from "../sdk/recap.ts";

/** D19: a grant lasts at most a day. */
export const MAX_GRANT_S = MAX_GRANT_SECONDS;
/** Clock skew allowed between the browser that wrote the message's times and this gateway. */
const SKEW_S = 60;
/** Live grants one DID may hold: bounds what a signing key can write. */
export const MAX_GRANTS_PER_DID = 32;
/** How long a grant nonce may wait for its message (as a sign-in challenge does). */
export const NONCE_TTL_MS = 10 * 60_000;
/** Unused live nonces one DID may hold: bounds the rows a Bearer caller can make. */
export const MAX_NONCES_PER_DID = 16;
/** Spent and expired nonces are kept a day, so a late replay still reads "used", not "unknown". */
const NONCE_RETENTION_MS = 24 * 3600_000;
/** A grant message is a few hundred bytes; a limit well above that, as the login's. */
export const MAX_MESSAGE = 4096;

const KEY_URI = /^did:pkh:eip155:(\d{1,16}):(0x[0-9a-fA-F]{40})$/;

export interface GrantInput {
  message?: unknown;
  signature?: unknown;
  /** The retired EIP-712 SessionGrant's fields: present, they get an error naming the new format. */
  key?: unknown;
  validUntil?: unknown;
}

export interface GrantView {
  key: Address;
  validUntil: number;
  signer: Address;
  createdAt: number;
  abilities: GrantAbility[];
  origin: string;
}

// A grant once revoked stays revoked: the same key is never let in again.
const UPSERT = `INSERT INTO session_grants (did, key, valid_until, signer, created_at, abilities, origin) VALUES ($1, $2, $3, $4, $5, $6, $7)
  ON CONFLICT (did, key) DO UPDATE SET valid_until = excluded.valid_until, signer = excluded.signer, abilities = excluded.abilities, origin = excluded.origin
  WHERE session_grants.revoked_at IS NULL RETURNING did`;
// Expired rows decide nothing any more (a revoked one included): gone at the next registration.
const PRUNE = "DELETE FROM session_grants WHERE did = $1 AND valid_until < $2";
// Rows without abilities (the retired format's) allow nothing: neither listed nor counted.
const LIVE = "SELECT COUNT(*) AS n FROM session_grants WHERE did = $1 AND key <> $2 AND revoked_at IS NULL AND valid_until >= $3 AND abilities <> ''";
const LIST = `SELECT key, valid_until AS "validUntil", signer, created_at AS "createdAt", abilities, origin FROM session_grants
  WHERE did = $1 AND revoked_at IS NULL AND valid_until >= $2 AND abilities <> '' ORDER BY created_at, key`;
const FIND = `SELECT valid_until AS "validUntil", signer, abilities FROM session_grants WHERE did = $1 AND key = $2 AND revoked_at IS NULL`;
const REVOKE = "UPDATE session_grants SET revoked_at = $3 WHERE did = $1 AND key = $2 AND revoked_at IS NULL RETURNING did";

const SWEEP_NONCES = "DELETE FROM session_grant_nonces WHERE expires_at < $1";
const LIVE_NONCES = `SELECT COUNT(*) AS n, MIN(expires_at) AS "first" FROM session_grant_nonces WHERE did = $1 AND used_at IS NULL AND expires_at > $2`;
const INSERT_NONCE = "INSERT INTO session_grant_nonces (nonce, did, issued_at, expires_at) VALUES ($1, $2, $3, $4)";
const FIND_NONCE = `SELECT did, expires_at AS "expiresAt", used_at AS "usedAt" FROM session_grant_nonces WHERE nonce = $1`;
// One conditional update spends it, whichever gateway races (D16).
const SPEND_NONCE = "UPDATE session_grant_nonces SET used_at = $2 WHERE nonce = $1 AND did = $3 AND used_at IS NULL AND expires_at > $2";

const param = (message: string) => accountError("PARAM_ERROR", message);
const GRANTABLE = new Set<string>(GRANT_ABILITIES);
const abilitiesOf = (stored: string) => stored.split(" ").filter((a): a is GrantAbility => GRANTABLE.has(a));

export const OLD_FORMAT =
  "The EIP-712 SessionGrant(key, validUntil) is no longer accepted: any website could ask a wallet for it. Send { message, signature }: an EIP-4361 (Sign-In with Ethereum) message from an allowed origin, with a nonce from POST /v2/session-grants/nonce, the session key as URI (did:pkh:eip155:<chain>:<key>) and an ERC-5573 ReCap naming the DID and its abilities (the SDK's sessionGrantMessage)";

export function createGrants(deps: {
  sql: Sql;
  resolver: DidResolver;
  chainId: number;
  /** STOWAGE_ALLOWED_ORIGINS: the sites that may ask for a grant (as for a SIWE login). */
  allowedOrigins: readonly string[];
  /** Whether `signature` is `address`'s signature of `message` (a plain key or a smart wallet). */
  verifySignature: (address: Address, message: string, signature: Hex) => Promise<boolean>;
  /** Opens the storage session (did, token) for the key (storage/sessions.ts's openSession). */
  openSession: (did: Did, token: Hex) => Promise<void>;
  now?: () => number;
}) {
  const { sql, resolver, chainId } = deps;
  const nowMs = () => (deps.now ?? Date.now)();
  const nowS = () => Math.floor(nowMs() / 1000);
  const allowed = new Set(deps.allowedOrigins.map(originOf).filter((o): o is string => o !== undefined));

  const keyOf = (raw: unknown): Address => {
    if (typeof raw !== "string" || !isAddress(raw, { strict: false })) throw param("key must be the session key's address (0x + 40 hex)");
    return getAddress(raw);
  };

  /** A nonce for one grant of `who`, valid NONCE_TTL_MS. */
  async function nonce(who: Did): Promise<{ nonce: string; expiresAt: number }> {
    const t = nowMs();
    const nonce = generateSiweNonce();
    const expiresAt = t + NONCE_TTL_MS;
    await sql.run(SWEEP_NONCES, [t - NONCE_RETENTION_MS]);
    await sql.tx(async (tx) => {
      const live = await tx.get<{ n: number | string; first: number | string | null }>(LIVE_NONCES, [who.canonical, t]);
      if (Number(live?.n ?? 0) >= MAX_NONCES_PER_DID) {
        const wait = Math.max(1, Math.ceil((Number(live?.first ?? t) - t) / 1000));
        throw accountError("RATE_LIMITED", `this DID holds ${MAX_NONCES_PER_DID} unused grant nonces: use one, or wait until the oldest expires`, { "retry-after": String(wait) });
      }
      await tx.run(INSERT_NONCE, [nonce, who.canonical, t, expiresAt]);
    });
    return { nonce, expiresAt: Math.floor(expiresAt / 1000) };
  }

  /** The grant's fields, checked in the order that costs least: nothing here reads the chain. */
  function read(who: Did, message: string) {
    const fields = parseSiwe(message);
    if (!fields) throw param("message is not an EIP-4361 (Sign-In with Ethereum) message");
    const origin = originOf(`${fields.scheme ?? "https"}://${fields.domain}`);
    if (!origin || !allowed.has(origin)) throw fail("WRONG_DOMAIN");
    if (fields.chainId !== chainId) throw fail("WRONG_CHAIN");
    const uri = KEY_URI.exec(fields.uri);
    if (!uri || Number(uri[1]) !== chainId || !isAddress(uri[2] as string, { strict: false }))
      throw param(`the grant's URI must be the session key as did:pkh:eip155:${chainId}:<address>`);
    const key = getAddress(uri[2] as string);

    // ERC-5573: the ReCap is the last resource (and, here, the only one), and the statement ends
    // with what it says in words, so the wallet showed the user what is granted.
    const recapUri = fields.resources.at(-1);
    if (!recapUri?.startsWith(RECAP_PREFIX) || fields.resources.length !== 1) throw param("the grant's only resource must be its ReCap (urn:recap:…)");
    let details: ReturnType<typeof decodeRecap>;
    try {
      details = decodeRecap(recapUri);
    } catch (err) {
      throw param(err instanceof RecapError ? err.message : "the ReCap cannot be read");
    }
    if (details.prf) throw param("the ReCap may not delegate from other capabilities (prf): the signer grants for the DID itself");
    const resources = Object.keys(details.att);
    if (resources.length !== 1) throw param("the ReCap must name one resource: the DID the key signs for");
    let named: Did;
    try {
      named = parseDid(resources[0] as string, chainId);
    } catch {
      throw param("the ReCap's resource must be the DID the key signs for (did:ethr)");
    }
    if (named.canonical !== who.canonical) throw accountError("FORBIDDEN", `the grant is for ${named.canonical}, but this access token is ${who.canonical}'s`);
    const abilities: GrantAbility[] = [];
    for (const [ability, caveats] of Object.entries(details.att[resources[0] as string] as Record<string, unknown[]>)) {
      const [namespace, name] = ability.split("/");
      if (namespace !== GRANT_NAMESPACE || !GRANTABLE.has(name as string))
        throw param(`a session key may be granted ${GRANT_ABILITIES.map((a) => `${GRANT_NAMESPACE}/${a}`).join(", ")} only (never a login, a purchase, a key mint or the age identity): not ${ability}`);
      if (caveats.length !== 1 || Object.keys(caveats[0] as object).length) throw param(`${ability} must be granted without qualifications: [{}]`);
      abilities.push(name as GrantAbility);
    }
    if (!fields.statement?.endsWith(recapStatement(details.att))) throw param("the statement does not end with the ReCap's words (ERC-5573): the wallet must show what is granted");

    const t = nowMs();
    if (fields.expirationTime === undefined) throw param("a grant needs an Expiration Time, at most 24 hours after its Issued At");
    if (fields.expirationTime <= t) throw accountError("UNAUTHORIZED", "the grant has expired: sign a new one");
    if (fields.issuedAt > t + SKEW_S * 1000) throw param("the grant's Issued At is in the future");
    if (fields.expirationTime - fields.issuedAt > MAX_GRANT_S * 1000) throw param("a grant may last at most 24 hours (Expiration Time − Issued At)");
    if (fields.notBefore !== undefined && fields.notBefore > t + SKEW_S * 1000) throw param("a grant that starts later (Not Before) is not supported: register it when it starts");
    return { fields, origin, key, abilities: abilities.sort(), validUntil: Math.floor(fields.expirationTime / 1000) };
  }

  /** Registers a grant the DID's owner (or a delegate) signed; answers it as stored, with the key's storage session. */
  async function register(who: Did, input: GrantInput): Promise<GrantView & { token: Hex }> {
    if (input.message === undefined && (input.key !== undefined || input.validUntil !== undefined)) throw param(OLD_FORMAT);
    if (typeof input.message !== "string" || !input.message) throw param("message (the signed EIP-4361 grant) is required");
    if (typeof input.signature !== "string" || !isHex(input.signature) || input.signature.length < 4) throw param("signature must be 0x-hex");
    const message = input.message;
    const signature = input.signature;
    const { fields, origin, key, abilities, validUntil } = read(who, message);

    const issued = await sql.get<{ did: string; expiresAt: number | string; usedAt: number | string | null }>(FIND_NONCE, [fields.nonce]);
    if (!issued || issued.did !== who.canonical) throw fail("NONCE_UNKNOWN", "ask POST /v2/session-grants/nonce for this DID");
    if (issued.usedAt !== null) throw fail("NONCE_USED");
    const t = nowMs();
    if (Number(issued.expiresAt) <= t) throw accountError("UNAUTHORIZED", "the grant's nonce has expired: ask for a new one");
    // Spent before the (slow) signature check, so two racing registrations cannot both use it.
    if ((await sql.run(SPEND_NONCE, [fields.nonce, t, who.canonical])) === 0) throw fail("NONCE_USED");

    if (!(await deps.verifySignature(fields.address, message, signature))) throw fail("SIGNATURE_INVALID");
    if (!(await resolver.canSign(who, fields.address))) throw accountError("UNAUTHORIZED", `the grant's signer ${fields.address} may not sign for ${who.canonical}: it is neither its owner nor a valid delegate`);

    const lowerKey = key.toLowerCase();
    const createdAt = nowMs();
    await sql.tx(async (tx) => {
      await tx.run(PRUNE, [who.canonical, nowS()]);
      const live = await tx.get<{ n: number | string }>(LIVE, [who.canonical, lowerKey, nowS()]);
      if (Number(live?.n ?? 0) >= MAX_GRANTS_PER_DID) throw accountError("CONFLICT", `this DID holds ${MAX_GRANTS_PER_DID} live session grants: revoke one first`);
      const stored = await tx.get(UPSERT, [who.canonical, lowerKey, validUntil, fields.address.toLowerCase(), createdAt, abilities.join(" "), origin]);
      if (!stored) throw accountError("UNAUTHORIZED", "this session key's grant was revoked: make a new key");
    });
    // A fresh token: no other session is ever reset by it.
    const token = bytesToHex(crypto.getRandomValues(new Uint8Array(32)));
    await deps.openSession(who, token);
    return { key, validUntil, signer: fields.address, createdAt: Math.floor(createdAt / 1000), abilities, origin, token };
  }

  async function list(who: Did): Promise<GrantView[]> {
    const rows = await sql.all<{ key: string; validUntil: number; signer: string; createdAt: number; abilities: string; origin: string | null }>(LIST, [who.canonical, nowS()]);
    return rows.map((r) => ({
      key: getAddress(r.key),
      validUntil: Number(r.validUntil),
      signer: getAddress(r.signer),
      createdAt: Math.floor(Number(r.createdAt) / 1000),
      abilities: abilitiesOf(r.abilities),
      origin: r.origin ?? "",
    }));
  }

  async function revoke(who: Did, rawKey: unknown): Promise<void> {
    const key = keyOf(rawKey);
    const done = await sql.get(REVOKE, [who.canonical, key.toLowerCase(), nowMs()]);
    if (!done) throw accountError("NOT_FOUND", "this DID has no such session grant");
  }

  /**
   * Whether `signer` is a session key the DID granted `ability`, live now: before its expiry, not
   * revoked, and its grant's signer may still sign for the DID. Storage asks this for `Request`
   * (upload, delete) and `Voucher` signatures only.
   */
  async function allows(who: Did, signer: Address, ability: GrantAbility): Promise<boolean> {
    const row = await sql.get<{ validUntil: number; signer: string; abilities: string }>(FIND, [who.canonical, signer.toLowerCase()]);
    if (!row || nowS() >= Number(row.validUntil) || !abilitiesOf(row.abilities).includes(ability) || !isAddress(row.signer, { strict: false })) return false;
    return resolver.canSign(who, getAddress(row.signer));
  }

  return { nonce, register, list, revoke, allows };
}

export type Grants = ReturnType<typeof createGrants>;
