/**
 * Traffic vouchers (D6, D22). A voucher `Voucher(seller, size, cid, expires)` signed by the payer
 * authorises a cumulative count of bytes moved at this seller, for the one file whose Cid it names
 * and until `expires` (unix seconds; 0: no end). Each (payer, size) is accepted once; a transfer
 * may move up to `size − used` bytes, `used` being the payer's all-time count when the voucher
 * was accepted. Bytes really moved are added to the count when the transfer ends.
 *
 * The Cid is not a field of the request: it is the file the transfer moves, so a voucher signed
 * for another file recovers some other key, which may read nothing.
 *
 * @example
 *   const signed = await vouchers.payerOf({ size, sign, expires }, cid)
 *   const v = await sql.tx((tx) => vouchers.claim(tx, signed, length))
 *   … stream …
 *   await vouchers.settle(v, sentBytes)
 *
 * Two gateways that see one voucher at the same moment accept it once: the (payer, size) key
 * decides, in a conditional insert (D16).
 */
import { bytesToHex, getAddress, type Address, type TypedDataDomain } from "viem";
import { type Look, looks, type Queryable, type Sql } from "../db/sql.ts";
import { wholeBytes } from "../byte-count.ts";
import { canonicalCid } from "../cid/canonical.ts";
import { failure } from "../failure.ts";
import { isSignature, LEGACY_VOUCHER_TYPE_TEXT, UINT64_MAX, VOUCHER_TYPE_TEXT } from "../identity/eip712.ts";
import { legacyVoucherSigner, voucherDigest, voucherSigner } from "../identity/voucher-signer.ts";

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
// What a claim would find, as a look (db/sql.ts): the payer's count and whether the voucher is claimed.
const PEEK = { used: USED_BY, claimed: "EXISTS (SELECT 1 FROM vouchers_used WHERE payer = $1 AND size = $2)" };
const UNCLAIM = "DELETE FROM vouchers_used WHERE payer = $1 AND size = $2";
const COUNT = "INSERT INTO voucher_counters (payer, used) VALUES ($1, $2) ON CONFLICT (payer) DO UPDATE SET used = voucher_counters.used + excluded.used";

/** What a voucher of `size` still allows after `used` bytes; refused when it cannot cover `needs`
 * (the domain's refusal: a claim runs inside the storage pipeline's transactions). */
function allowanceOf(size: number, used: number, needs?: number): number {
  const allowance = size - used;
  if (allowance <= 0 || (needs !== undefined && needs > allowance)) {
    throw failure("quota-exceeded", `the voucher covers up to ${size} bytes in all; ${used} are used${needs !== undefined ? `, this transfer needs ${needs}` : ""}: sign a new one (GET /traffichash)`);
  }
  return allowance;
}

const usedUp = () => failure("quota-exceeded", "this voucher was already used: sign a new one (GET /traffichash)");

/** What a voucher's query (or an upload's fields) carries: the spec's `size` and `sign`, and
 * `expires` when it is not 0. */
export interface VoucherInput {
  size?: unknown;
  sign?: unknown;
  expires?: unknown;
}

/** `expires` as sent: absent or empty is 0 (no end); else unix seconds, a uint64. */
function expiryOf(raw: unknown): bigint | undefined {
  if (raw === undefined || raw === "") return 0n;
  const s = String(raw).trim();
  if (!/^\d{1,20}$/.test(s)) return undefined;
  const n = BigInt(s);
  return n <= UINT64_MAX ? n : undefined;
}

/** The refusal of a voucher of the old type, which names no file: what to sign instead. */
export const oldVoucher = () =>
  failure(
    "bad-voucher",
    `Address parameter missing or invalid: this voucher is of the old type ${LEGACY_VOUCHER_TYPE_TEXT}, which is no longer accepted because it names no file. Sign ${VOUCHER_TYPE_TEXT} instead: cid is the file's Cid (CIDv1, base32), expires unix seconds or 0, and the query adds expires when it is not 0 (GET /traffichash?size=…&cid=… answers the digest); update the client`,
  );

/** A voucher's terms as the gateway checks them: its payer, and what it covers. */
export interface SignedVoucher {
  payer: Address;
  size: number;
  /** Unix seconds; 0: no end. */
  expires: bigint;
}

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

/** Each payer's all-time bytes moved under its traffic vouchers at this seller (D6): what the
 * operator's usage report reads. */
export function voucherCounters(q: Queryable): Promise<{ payer: string; used: number }[]> {
  return q.all("SELECT payer, used FROM voucher_counters ORDER BY payer");
}

export function createVouchers({ sql, domain, seller, now = Date.now }: { sql: Sql; domain: TypedDataDomain; seller: Address; now?: () => number }) {
  /** The payer's all-time count, read with `q` (a claim's transaction, or the pool). */
  const usedIn = async (q: Queryable, payer: string) => (await q.get<{ used: number }>(USED, [payer]))?.used ?? 0;
  const usedBy = (payer: string) => usedIn(sql, payer);
  // viem's recoverTypedDataAddress at ≈ 55% of its CPU (it was ≈ 1 ms of a ranged GET).
  const signerOf = voucherSigner(domain, seller);
  const legacySignerOf = legacyVoucherSigner(domain, seller);
  const digestOf = voucherDigest(domain, seller);

  /**
   * GET /traffichash: the payer's counter, and with `cid` the digest to sign for `size`, that
   * Cid and `expires`. Without a Cid there is no voucher to hash (each names its file): the
   * counter alone is answered, as clients that sign their own digests ask for it.
   */
  async function hashFor(payer: Address, query: { size?: unknown; cid?: unknown; expires?: unknown }) {
    const size = wholeBytes(query.size);
    if (size === undefined) throw failure("bad-input", "size must be a whole number of bytes");
    const expires = expiryOf(query.expires);
    if (expires === undefined) throw failure("bad-input", "expires must be unix seconds (a uint64), or 0 for none");
    let cid: string | undefined;
    if (query.cid !== undefined && query.cid !== "") {
      try {
        cid = canonicalCid(String(query.cid));
      } catch {
        throw failure("bad-input", "cid must be the Cid of the file the voucher reads or uploads");
      }
    }
    const used = await usedBy(getAddress(payer));
    return {
      ...(cid !== undefined ? { hash: bytesToHex(digestOf({ size: BigInt(size), cid, expires })), cid, expires: String(expires) } : {}),
      seller,
      size: String(size),
      chainId: Number(domain.chainId),
      verifyingContract: domain.verifyingContract as Address,
      used: String(used),
      remaining: String(Math.max(0, size - used)),
    };
  }

  /**
   * The payer of a voucher for the file `cid` (canonical): 517 when it is missing or cannot be
   * recovered, 403 once it expired (checked before any curve work). A voucher signed for another
   * file, or of the old type, recovers some other key: the caller finds that key may not act.
   */
  async function payerOf(input: VoucherInput, cid: string): Promise<SignedVoucher> {
    const size = wholeBytes(input.size);
    if (size === undefined || !isSignature(input.sign)) throw failure("bad-voucher", "Address parameter missing or invalid: size and sign (a voucher) are required");
    const expires = expiryOf(input.expires);
    if (expires === undefined) throw failure("bad-voucher", "Address parameter missing or invalid: expires must be unix seconds, as the voucher signs it");
    if (expires !== 0n && BigInt(Math.floor(now() / 1000)) >= expires) {
      throw failure("forbidden", `Permission denied: this voucher expired at ${new Date(Number(expires) * 1000).toISOString()}: ask its payer for a new one`);
    }
    try {
      return { payer: signerOf({ size: BigInt(size), cid, expires }, input.sign), size, expires };
    } catch {
      throw failure("bad-voucher", "Address parameter missing or invalid: the voucher signature cannot be recovered");
    }
  }

  /** Whom `input` would name as its payer were it the old two-field voucher; undefined when it
   * cannot be one. Asked only once a voucher is refused, to tell an old client what changed. */
  function legacyPayerOf(input: VoucherInput): Address | undefined {
    const size = wholeBytes(input.size);
    if (size === undefined || !isSignature(input.sign) || (input.expires !== undefined && input.expires !== "")) return undefined;
    try {
      return legacySignerOf(BigInt(size), input.sign);
    } catch {
      return undefined;
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

  /**
   * What `claim` would answer now, as a look (db/sql.ts) read without a transaction and refused
   * as `claim` refuses (a voucher both used and short for being short): a download read whole is
   * refused this way before its content is read, an upload before its body is (the claim decides
   * all the same), in the one read of its first looks.
   */
  function peekLook(v: { payer: Address; size: number }, needs?: number): Look<PeekedVoucher> {
    return {
      columns: PEEK,
      params: [v.payer, v.size],
      read(row) {
        const base = Number(row.used ?? 0);
        const allowance = allowanceOf(v.size, base, needs);
        if (row.claimed === true || Number(row.claimed) === 1) throw usedUp();
        return { payer: v.payer, size: v.size, allowance, base };
      },
    };
  }

  /** `peekLook` read by itself. */
  async function peek(v: { payer: Address; size: number }, needs?: number): Promise<PeekedVoucher> {
    const [peeked] = await looks(sql, peekLook(v, needs));
    return peeked;
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

  return { hashFor, payerOf, legacyPayerOf, claim, peekLook, peek, claimPeeked, settle, refund, usedBy };
}

export type Vouchers = ReturnType<typeof createVouchers>;
