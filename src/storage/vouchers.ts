/**
 * Traffic vouchers (D6). A voucher `Voucher(seller, size)` signed by the payer authorises a
 * cumulative count of bytes moved at this seller. Each (payer, size) is accepted once; a transfer
 * may move up to `size − used` bytes, `used` being the payer's all-time count when the voucher
 * was accepted. Bytes really moved are added to the count when the transfer ends.
 *
 * @example
 *   const v = await vouchers.accept(await vouchers.payerOf({ size, sign }), length)
 *   … stream …
 *   await vouchers.settle(v, sentBytes)
 *
 * Two gateways that see one voucher at the same moment accept it once: the (payer, size) key
 * decides, in a conditional insert (D16).
 */
import { bytesToHex, getAddress, type Address, type TypedDataDomain } from "viem";
import type { Queryable, Sql } from "../db/sql.ts";
import { storageError } from "../http/errors.ts";
import { wholeBytes } from "../http/params.ts";
import { isSignature } from "../identity/eip712.ts";
import { voucherDigest, voucherSigner } from "../identity/voucher-signer.ts";

/** The payer's all-time count, 0 before its first transfer: an expression on `$1`. */
const USED_BY = "COALESCE((SELECT used FROM voucher_counters WHERE payer = $1), 0)";
const USED = `SELECT ${USED_BY} AS used`;
/** A claim of (`$1` payer, `$2` size), deciding by its conflict: `values` gives its base and time. */
const claimWith = (values: string) => `INSERT INTO vouchers_used (payer, size, base, used_at) VALUES ($1, $2, ${values})
  ON CONFLICT (payer, size) DO NOTHING RETURNING base`;
// The payer's count read by the claim itself (one statement, the allowance is checked
// on its answer, and a refusal rolls the claim back with the caller's transaction).
const CLAIM = claimWith(`${USED_BY}, $3`);
// The count a peek read before (`claimPeeked`). Two texts, not one `COALESCE($3, …)`: PostgreSQL
// planned that one again on every call (a custom plan drops the subquery when $3 is given).
const CLAIM_AT = claimWith("$3, $4");
// What a claim would find, in one read without a transaction: the payer's count and whether the voucher is claimed.
const PEEK = `SELECT ${USED_BY} AS used, EXISTS (SELECT 1 FROM vouchers_used WHERE payer = $1 AND size = $2) AS claimed`;
const UNCLAIM = "DELETE FROM vouchers_used WHERE payer = $1 AND size = $2";
const COUNT = "INSERT INTO voucher_counters (payer, used) VALUES ($1, $2) ON CONFLICT (payer) DO UPDATE SET used = voucher_counters.used + excluded.used";

/** What a voucher of `size` still allows after `used` bytes; refused (402) when it cannot cover `needs`. */
function allowanceOf(size: number, used: number, needs?: number): number {
  const allowance = size - used;
  if (allowance <= 0 || (needs !== undefined && needs > allowance)) {
    throw storageError.quota(`the voucher covers up to ${size} bytes in all; ${used} are used${needs !== undefined ? `, this transfer needs ${needs}` : ""}: sign a new one (GET /traffichash)`);
  }
  return allowance;
}

const usedUp = () => storageError.quota("this voucher was already used: sign a new one (GET /traffichash)");

export interface AcceptedVoucher {
  payer: Address;
  size: number;
  /** Bytes this transfer may move. */
  allowance: number;
}

/** A voucher as `claim` would accept it now, not claimed yet: `base` is the payer's count it read. */
export interface PeekedVoucher extends AcceptedVoucher {
  base: number;
}

export function createVouchers({ sql, domain, seller, now = Date.now }: { sql: Sql; domain: TypedDataDomain; seller: Address; now?: () => number }) {
  /** The payer's all-time count, read with `q` (accept()'s transaction, or the pool). */
  const usedIn = async (q: Queryable, payer: string) => (await q.get<{ used: number }>(USED, [payer]))?.used ?? 0;
  const usedBy = (payer: string) => usedIn(sql, payer);
  // viem's recoverTypedDataAddress at ≈ 55% of its CPU (it was ≈ 1 ms of a ranged GET).
  const signerOf = voucherSigner(domain, seller);
  const digestOf = voucherDigest(domain, seller);

  /** GET /traffichash: the digest to sign for `size`, with the payer's counter. */
  async function hashFor(payer: Address, rawSize: unknown) {
    const size = wholeBytes(rawSize);
    if (size === undefined) throw storageError.badRequest("size must be a whole number of bytes");
    const used = await usedBy(getAddress(payer));
    return {
      hash: bytesToHex(digestOf(BigInt(size))),
      seller,
      size: String(size),
      chainId: Number(domain.chainId),
      verifyingContract: domain.verifyingContract as Address,
      used: String(used),
      remaining: String(Math.max(0, size - used)),
    };
  }

  /** The payer of a voucher; 517 when it is missing or cannot be recovered. */
  async function payerOf(input: { size?: unknown; sign?: unknown }): Promise<{ payer: Address; size: number }> {
    const size = wholeBytes(input.size);
    if (size === undefined || !isSignature(input.sign)) throw storageError.address("Address parameter missing or invalid: size and sign (a voucher) are required");
    try {
      return { payer: signerOf(BigInt(size), input.sign), size };
    } catch {
      throw storageError.address("Address parameter missing or invalid: the voucher signature cannot be recovered");
    }
  }

  /**
   * Claims a voucher once in `q` (a transaction: a refusal after the insert must roll it back),
   * for a transfer of `needs` bytes (unknown for uploads until the end). A voucher both used and
   * short is refused for being short, as when the count was read first.
   */
  async function claim(q: Queryable, v: { payer: Address; size: number }, needs?: number): Promise<AcceptedVoucher> {
    const fresh = await q.get<{ base: number }>(CLAIM, [v.payer, v.size, now()]);
    if (!fresh) {
      allowanceOf(v.size, await usedIn(q, v.payer), needs);
      throw usedUp();
    }
    return { payer: v.payer, size: v.size, allowance: allowanceOf(v.size, fresh.base, needs) };
  }

  /** Accepts a voucher once, in a transaction of its own. */
  function accept(v: { payer: Address; size: number }, needs?: number): Promise<AcceptedVoucher> {
    // Every read-modify-write here is the conditional insert: READ COMMITTED suffices (D16).
    return sql.tx((tx) => claim(tx, v, needs), { isolation: "read committed" });
  }

  /**
   * What `claim` would answer now, read without a transaction and refused as `claim` refuses (a
   * voucher both used and short for being short): a download read whole is refused this way
   * before its content is read, an upload before its body is (the claim decides all the same).
   */
  async function peek(v: { payer: Address; size: number }, needs?: number): Promise<PeekedVoucher> {
    const found = await sql.get<{ used: number; claimed: boolean | number }>(PEEK, [v.payer, v.size]);
    const base = Number(found?.used ?? 0);
    const allowance = allowanceOf(v.size, base, needs);
    if (found?.claimed) throw usedUp();
    return { payer: v.payer, size: v.size, allowance, base };
  }

  /**
   * Claims, in `q`, a voucher peeked before: with the count the peek read as its base, so the
   * transfer keeps the allowance it was streamed with (what its payer's other transfers counted
   * meanwhile is not taken from it, as when the claim came first). Refused when claimed meanwhile.
   */
  async function claimPeeked(q: Queryable, v: PeekedVoucher): Promise<AcceptedVoucher> {
    if (!(await q.get(CLAIM_AT, [v.payer, v.size, v.base, now()]))) throw usedUp();
    return v;
  }

  /** Adds what really moved to the payer's all-time count (in `q`: the caller's transaction, or on its own). */
  async function settle(v: AcceptedVoucher, bytes: number, q: Queryable = sql) {
    if (bytes <= 0) return;
    await q.run(COUNT, [v.payer, bytes]);
  }

  /** Undoes `claim` and `settle` of a transfer that failed before any byte went out: the bytes
   * are no longer counted and the voucher is unused again (a retry of the same link works). */
  async function refund(v: AcceptedVoucher, bytes: number, q: Queryable = sql) {
    if (bytes > 0) await q.run(COUNT, [v.payer, -bytes]);
    await q.run(UNCLAIM, [v.payer, v.size]);
  }

  return { hashFor, payerOf, claim, accept, peek, claimPeeked, settle, refund, usedBy };
}

export type Vouchers = ReturnType<typeof createVouchers>;
