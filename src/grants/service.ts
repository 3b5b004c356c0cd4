/**
 * Session grants (D19). The console makes a key in the browser and the wallet signs, once, the
 * EIP-712 `SessionGrant(address key, uint64 validUntil)` in the storage domain (D4); registered
 * here, that key may then sign `Request` messages of uploads and deletes and traffic `Voucher`s
 * for the DID until `validUntil` (at most 24 h ahead) or revocation — never a login, a purchase
 * or an access-key mint (those check the DID's keys alone). A grant holds only while the address
 * that signed it may still sign for the DID, so a revoked delegate's grants die with it.
 *
 * Why a table and not a grant carried by every call: a download's voucher is its only
 * credential (a query string with no room for a grant and its signature to go with it), a grant
 * must be revocable (which needs a row anyway), and one lookup by (did, key) is all a check costs.
 *
 * @example
 *   const grants = createGrants({ sql, resolver, domain })
 *   await grants.register(did, { key, validUntil, signature })
 *   await grants.allows(did, signer) // true while the grant holds
 */
import { getAddress, hashTypedData, hexToBytes, isAddress, type Address, type Hex, type TypedDataDomain } from "viem";
import type { Sql } from "../db/sql.ts";
import { accountError } from "../http/errors.ts";
import type { Did } from "../identity/did.ts";
import { isSignature } from "../identity/eip712.ts";
import type { DidResolver } from "../identity/resolver.ts";
import { signerOfDigest } from "../identity/signer.ts";
import { sessionGrantTypes } from "../sdk/grants.ts";

/**
 * The address that signed a `SessionGrant` in `domain` (the storage domain): viem's hash, our curve
 * (identity/signer.ts's signerOfDigest, as for the other messages). Its typed data is the one the
 * wallet signs, the SDK's sessionGrantTypes: the SDK's published declarations may name no server
 * module (scripts/build-sdk.ts), and identity/ may not import the SDK (the SDK imports identity/:
 * a folder cycle), so the grant is recovered here. Async as the others: a refusal is a rejection.
 */
export const recoverSessionGrant = async (domain: TypedDataDomain, message: { key: Address; /** Unix seconds. */ validUntil: bigint }, signature: Hex): Promise<Address> =>
  signerOfDigest(hexToBytes(hashTypedData({ domain, types: sessionGrantTypes, primaryType: "SessionGrant", message })), signature);

/** D19: a grant lasts at most a day. */
export const MAX_GRANT_S = 24 * 3600;
/** Clock skew allowed between the browser that chose `validUntil` and this gateway. */
const SKEW_S = 60;
/** Live grants one DID may hold: bounds what a signing key can write. */
export const MAX_GRANTS_PER_DID = 32;

export interface GrantInput {
  key?: unknown;
  validUntil?: unknown;
  signature?: unknown;
}

export interface GrantView {
  key: Address;
  validUntil: number;
  signer: Address;
  createdAt: number;
}

// A grant once revoked stays revoked: the same key is never let in again.
const UPSERT = `INSERT INTO session_grants (did, key, valid_until, signer, created_at) VALUES ($1, $2, $3, $4, $5)
  ON CONFLICT (did, key) DO UPDATE SET valid_until = excluded.valid_until, signer = excluded.signer
  WHERE session_grants.revoked_at IS NULL RETURNING did`;
// Expired rows decide nothing any more (a revoked one included): gone at the next registration.
const PRUNE = "DELETE FROM session_grants WHERE did = $1 AND valid_until < $2";
const LIVE = "SELECT COUNT(*) AS n FROM session_grants WHERE did = $1 AND key <> $2 AND revoked_at IS NULL AND valid_until >= $3";
const LIST = `SELECT key, valid_until AS "validUntil", signer, created_at AS "createdAt" FROM session_grants
  WHERE did = $1 AND revoked_at IS NULL AND valid_until >= $2 ORDER BY created_at, key`;
const FIND = `SELECT valid_until AS "validUntil", signer FROM session_grants WHERE did = $1 AND key = $2 AND revoked_at IS NULL`;
const REVOKE = "UPDATE session_grants SET revoked_at = $3 WHERE did = $1 AND key = $2 AND revoked_at IS NULL RETURNING did";

const param = (message: string) => accountError("PARAM_ERROR", message);

export function createGrants(deps: { sql: Sql; resolver: DidResolver; domain: TypedDataDomain; now?: () => number }) {
  const { sql, resolver, domain } = deps;
  const nowS = () => Math.floor((deps.now ?? Date.now)() / 1000);

  const keyOf = (raw: unknown): Address => {
    if (typeof raw !== "string" || !isAddress(raw, { strict: false })) throw param("key must be the session key's address (0x + 40 hex)");
    return getAddress(raw);
  };

  /** Registers a grant the DID's owner (or a delegate) signed for `key`; answers it as stored. */
  async function register(who: Did, input: GrantInput): Promise<GrantView> {
    const key = keyOf(input.key);
    const raw = String(input.validUntil ?? "");
    if (!/^\d{1,12}$/.test(raw)) throw param("validUntil must be Unix seconds");
    const validUntil = Number(raw);
    const now = nowS();
    if (validUntil <= now) throw param("validUntil is in the past");
    if (validUntil > now + MAX_GRANT_S + SKEW_S) throw param("validUntil may be at most 24 hours ahead");
    if (!isSignature(input.signature)) throw param("signature must be 65 bytes of 0x-hex");
    const signature = input.signature;
    let signer: Address;
    try {
      signer = await recoverSessionGrant(domain, { key, validUntil: BigInt(validUntil) }, signature);
    } catch {
      throw accountError("UNAUTHORIZED", "the grant's signature cannot be verified");
    }
    if (!(await resolver.canSign(who, signer))) throw accountError("UNAUTHORIZED", "the grant's signer is not the DID's owner or a valid delegate");
    const lowerKey = key.toLowerCase();
    const createdAt = (deps.now ?? Date.now)();
    await sql.tx(async (tx) => {
      await tx.run(PRUNE, [who.canonical, now]);
      const live = await tx.get<{ n: number | string }>(LIVE, [who.canonical, lowerKey, now]);
      if (Number(live?.n ?? 0) >= MAX_GRANTS_PER_DID) throw accountError("CONFLICT", `this DID holds ${MAX_GRANTS_PER_DID} live session grants: revoke one first`);
      const stored = await tx.get(UPSERT, [who.canonical, lowerKey, validUntil, signer.toLowerCase(), createdAt]);
      if (!stored) throw accountError("UNAUTHORIZED", "this session key's grant was revoked: make a new key");
    });
    return { key, validUntil, signer, createdAt: Math.floor(createdAt / 1000) };
  }

  async function list(who: Did): Promise<GrantView[]> {
    const rows = await sql.all<{ key: string; validUntil: number; signer: string; createdAt: number }>(LIST, [who.canonical, nowS()]);
    return rows.map((r) => ({ key: getAddress(r.key), validUntil: Number(r.validUntil), signer: getAddress(r.signer), createdAt: Math.floor(Number(r.createdAt) / 1000) }));
  }

  async function revoke(who: Did, rawKey: unknown): Promise<void> {
    const key = keyOf(rawKey);
    const done = await sql.get(REVOKE, [who.canonical, key.toLowerCase(), (deps.now ?? Date.now)()]);
    if (!done) throw accountError("NOT_FOUND", "this DID has no such session grant");
  }

  /**
   * Whether `signer` is a session key the DID granted, live now: before `validUntil`, not
   * revoked, and its grant's signer may still sign for the DID. Storage asks this for `Request`
   * (upload, delete) and `Voucher` signatures only.
   */
  async function allows(who: Did, signer: Address): Promise<boolean> {
    const row = await sql.get<{ validUntil: number; signer: string }>(FIND, [who.canonical, signer.toLowerCase()]);
    if (!row || nowS() >= Number(row.validUntil) || !isAddress(row.signer, { strict: false })) return false;
    return resolver.canSign(who, getAddress(row.signer));
  }

  return { register, list, revoke, allows };
}

export type Grants = ReturnType<typeof createGrants>;
