/**
 * secp256k1 public-key recovery in the system's libsecp256k1 (Bitcoin Core's C library; Debian's
 * libsecp256k1-1 on 12, libsecp256k1-2 on 13, both with the recovery module), through Bun's FFI.
 * Every signed request, login, grant and voucher recovers its signer (signer.ts): in @noble's pure
 * JS that is ≈ 0.55 ms each, two per small upload and one per ranged GET. The server
 * only: `bun:ffi` must stay out of the SDK's and the console's bundles, which import eip712.ts.
 * As aead-native.ts does with its AEADs, the library is used only after it answers a few fixed
 * signatures exactly as @noble does — keys recovered, a high-s form recovered to the same key, and
 * each malformed one refused; where it does not load or disagrees, recovery stays on @noble (no
 * log line: the answer is the same, only slower).
 *
 * @example
 *   const recover = nativeRecovery()                  // undefined without the library
 *   const key = recover?.(digest, compact, 0)         // 65 bytes 0x04 ‖ x ‖ y; throws if refused
 */
import { dlopen, FFIType, type Pointer } from "bun:ffi";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { keccak_256 } from "@noble/hashes/sha3.js";

/**
 * The uncompressed public key (0x04 ‖ x ‖ y) that signed the 32-byte `digest` as `compact`
 * (r ‖ s, 64 bytes) with recovery id `recovery`; throws where no key can be recovered (r or s 0 or
 * ≥ n, r not an x on the curve, the point at infinity). High-s is recovered, as @noble does: the
 * low-s rule is the signer's, recovery has none. The answer may be a buffer the next call reuses.
 */
export type RecoverKey = (digest: Uint8Array, compact: Uint8Array, recovery: 0 | 1) => Uint8Array;

/** @noble's recovery: the reference, and the answer where the library is missing. */
export const nobleRecoverKey: RecoverKey = (digest, compact, recovery) =>
  secp256k1.Signature.fromBytes(compact, "compact").addRecoveryBit(recovery).recoverPublicKey(digest).toBytes(false);

/** Sonames tried in order: Debian 13, Debian 12 (and other Linux), an unversioned one, macOS (Homebrew). */
export const SECP256K1_LIBRARIES = ["libsecp256k1.so.2", "libsecp256k1.so.1", "libsecp256k1.so", "libsecp256k1.2.dylib", "libsecp256k1.1.dylib", "libsecp256k1.dylib"];

const symbols = {
  // (flags) → context
  secp256k1_context_create: { args: [FFIType.u32], returns: FFIType.ptr },
  // (ctx, sig out, input64, recid) → 1, or 0 when r or s ≥ n
  secp256k1_ecdsa_recoverable_signature_parse_compact: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
  // (ctx, pubkey out, sig, msghash32) → 1, or 0 when no key recovers
  secp256k1_ecdsa_recover: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  // (ctx, output, outputlen in/out, pubkey, flags) → 1
  secp256k1_ec_pubkey_serialize: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.u32], returns: FFIType.i32 },
} as const;
/** SECP256K1_CONTEXT_VERIFY: what versions before 0.2 need for recovery; 0.2 takes it as CONTEXT_NONE. */
const CONTEXT_VERIFY = (1 << 0) | (1 << 8);
const EC_UNCOMPRESSED = 1 << 1;

/** Every library opened: held for the process, as its functions are (the symbols' trampolines
 * belong to the library object, which must not be collected while a recovery can still call them). */
const opened: object[] = [];

function dlopenFirst(names: string[]) {
  for (const name of names) {
    try {
      const lib = dlopen(name, symbols);
      opened.push(lib);
      return lib;
    } catch {
      // not this name: try the next
    }
  }
  return undefined;
}

/** libsecp256k1's recovery from the first of `names` that loads, checked against @noble, or undefined. */
export function loadNativeRecovery(names: string[] = SECP256K1_LIBRARIES): RecoverKey | undefined {
  const lib = dlopenFirst(names);
  if (!lib) return undefined;
  const { secp256k1_context_create: create, secp256k1_ecdsa_recoverable_signature_parse_compact: parse, secp256k1_ecdsa_recover: recover, secp256k1_ec_pubkey_serialize: serialize } = lib.symbols;
  // One context for the process, never destroyed (the process is single-threaded; a worker loads
  // its own copy of this module). Bun's types allow a bigint for a returned pointer; this is a plain one.
  const ctx = create(CONTEXT_VERIFY) as Pointer | null;
  if (!ctx) return undefined;
  // The library's opaque structs (a recoverable signature is 65 bytes, a public key 64) and the
  // call's inputs and output live in buffers made once: a recovery allocates nothing of its own.
  // The arrays themselves go to each call, which reads their current address: an address taken
  // once with ptr() goes stale (a small typed array moves its bytes the first time a view of it is
  // taken, as the caller's key.subarray(1) does), and Bun 1.4.5 crashed (a null dereference) after
  // some thousands of calls with addresses kept in this closure.
  const digestIn = new Uint8Array(32);
  const compactIn = new Uint8Array(64);
  const signature = new Uint8Array(65);
  const pubkey = new Uint8Array(64);
  const key = new Uint8Array(65);
  const keyLength = new BigUint64Array(1); // size_t
  const native: RecoverKey = (digest, compact, recovery) => {
    // The library reads exactly these lengths, and aborts the process on a recovery id outside
    // 0–3 (its illegal-argument callback): both are checked here, before any call.
    if (digest.length !== 32 || compact.length !== 64) throw new RangeError("recovery takes a 32-byte digest and a 64-byte r ‖ s");
    if (recovery !== 0 && recovery !== 1) throw new RangeError("recovery id must be 0 or 1");
    digestIn.set(digest);
    compactIn.set(compact);
    if (parse(ctx, signature, compactIn, recovery) !== 1) throw new Error("invalid signature: r or s is not below the curve order");
    if (recover(ctx, pubkey, signature, digestIn) !== 1) throw new Error("invalid signature: no public key recovers from it");
    keyLength[0] = 65n; // the output's room, read by the library (it refuses less than 65)
    if (serialize(ctx, key, keyLength, pubkey, EC_UNCOMPRESSED) !== 1 || keyLength[0] !== 65n) throw new Error("libsecp256k1 failed to serialise a recovered key");
    return key;
  };
  return agreesWithNoble(native) ? native : undefined;
}

/** `recover`'s answer as hex, or "refused" where it throws: two recoveries compared as plain values. */
const answer = (recover: RecoverKey, digest: Uint8Array, compact: Uint8Array, recovery: 0 | 1): string => {
  try {
    return Buffer.from(recover(digest, compact, recovery)).toString("hex");
  } catch {
    return "refused";
  }
};

/**
 * Whether `recover` answers as @noble on fixed signatures: three keys' (low-s), the same with the
 * other recovery id (another key), their high-s forms with the id flipped (the same key) and kept
 * (another), and refusals: r or s 0, n, 2^256 − 1, and an r that is no x on the curve. Exported for
 * its test, which shows that a recovery wrong in any one of these ways is not used.
 */
export function agreesWithNoble(recover: RecoverKey): boolean {
  const n = secp256k1.Point.CURVE().n;
  const be32 = (x: bigint) => Buffer.from(x.toString(16).padStart(64, "0"), "hex");
  const compactOf = (r: bigint, s: bigint) => new Uint8Array([...be32(r), ...be32(s)]);
  let refusals = 0;
  for (const [i, secret] of [1n, 0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318n, n - 1n].entries()) {
    const digest = keccak_256(new TextEncoder().encode(`stowage secp256k1 check ${i}`));
    const signed = secp256k1.sign(digest, be32(secret), { prehash: false, format: "recovered" });
    const recovery = signed[0] as 0 | 1;
    const r = BigInt(`0x${Buffer.from(signed.subarray(1, 33)).toString("hex")}`);
    const s = BigInt(`0x${Buffer.from(signed.subarray(33)).toString("hex")}`);
    const key = Buffer.from(secp256k1.getPublicKey(be32(secret), false)).toString("hex");
    const flipped = (recovery ^ 1) as 0 | 1;
    const cases: [Uint8Array, 0 | 1, string | undefined][] = [
      [compactOf(r, s), recovery, key],
      [compactOf(r, s), flipped, undefined],
      [compactOf(r, n - s), flipped, key],
      [compactOf(r, n - s), recovery, undefined],
      [compactOf(0n, s), recovery, "refused"],
      [compactOf(r, 0n), recovery, "refused"],
      [compactOf(n, s), recovery, "refused"],
      [compactOf(r, n), recovery, "refused"],
      [compactOf((1n << 256n) - 1n, s), recovery, "refused"],
      [compactOf(r, (1n << 256n) - 1n), recovery, "refused"],
      [compactOf(5n, s), recovery, "refused"], // 5³ + 7 = 132 is not a square mod p: no point has x = 5
    ];
    for (const [compact, id, expected] of cases) {
      const theirs = answer(nobleRecoverKey, digest, compact, id);
      const ours = answer(recover, digest, compact, id);
      if (ours !== theirs || (expected !== undefined && ours !== expected)) return false;
      if (ours === "refused") refusals++;
    }
  }
  return refusals === 21;
}

let loaded: RecoverKey | null | undefined;

/** The library's recovery where it loads and agrees with @noble, else undefined; looked for once per process. */
export function nativeRecovery(): RecoverKey | undefined {
  if (loaded === undefined) loaded = loadNativeRecovery() ?? null;
  return loaded ?? undefined;
}
