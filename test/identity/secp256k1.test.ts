/**
 * Signer recovery on the system's libsecp256k1 (src/identity/secp256k1-native.ts, through
 * signer.ts) must answer exactly as on @noble, which it replaces where it loads: the same address
 * for every signature (v 27/28 and 0/1, low-s and high-s), a refusal for the same malformed ones
 * (r or s 0 or ≥ n, a bad v or length, r off the curve). The library is installed where missing,
 * so these run on the native path on every machine (and say so); the fallback is shown too: a
 * library that is absent, lacks the symbols or disagrees with @noble in any one way is not used.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { keccak_256 } from "@noble/hashes/sha3.js";
import { bytesToHex, numberToHex, recoverAddress, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { agreesWithNoble, loadNativeRecovery, nativeRecovery, nobleRecoverKey, type RecoverKey } from "../../src/identity/secp256k1-native.ts";
import { recoveryIn, signerBy, signerOfDigest } from "../../src/identity/signer.ts";
import { ensureLibsecp256k1, orRefused, withV } from "./support.ts";

const N = secp256k1.Point.CURVE().n;
const hex32 = (n: bigint) => numberToHex(n, { size: 32 }).slice(2);
const sigOf = (r: bigint, s: bigint, v: number): Hex => `0x${hex32(r)}${hex32(s)}${v.toString(16).padStart(2, "0")}`;
const randomDigest = () => crypto.getRandomValues(new Uint8Array(32));

let native: RecoverKey;
beforeAll(async () => {
  await ensureLibsecp256k1();
  const loaded = nativeRecovery();
  if (!loaded) throw new Error("libsecp256k1 is installed but its recovery did not load or disagreed with @noble");
  native = loaded;
});

/** Both signers' answers (an address or "refused") for one digest and signature. */
async function both(digest: Uint8Array, signature: Hex) {
  const ours = await orRefused(() => signerBy(native)(digest, signature));
  const noble = await orRefused(() => signerBy(nobleRecoverKey)(digest, signature));
  return { ours, noble };
}

describe("native secp256k1 recovery", () => {
  test("is the one in use where the library is installed", () => {
    expect(recoveryIn()).toBe("libsecp256k1");
  });

  test("the same address as @noble for random keys and digests: v 27/28 and 0/1, low-s and high-s", async () => {
    const outcomes = { signer: 0, other: 0 };
    for (let i = 0; i < 150; i++) {
      const account = privateKeyToAccount(generatePrivateKey());
      const digest = randomDigest();
      const sig = await account.sign({ hash: bytesToHex(digest) });
      const r = BigInt(`0x${sig.slice(2, 66)}`);
      const s = BigInt(`0x${sig.slice(66, 130)}`);
      const v = Number.parseInt(sig.slice(130), 16);
      expect(s <= N / 2n).toBe(true); // viem signs low-s: the high-s forms below are the other half
      const forms: [Hex, "signer" | "other"][] = [
        [sig, "signer"],
        [withV(sig, v - 27), "signer"],
        [withV(sig, 55 - v), "other"], // the other parity: the key of the mirrored R
        [sigOf(r, N - s, 55 - v), "signer"], // high-s with the parity flipped: the same key
        [sigOf(r, N - s, 28 - v), "signer"],
        [sigOf(r, N - s, v), "other"], // high-s, parity kept: another key
      ];
      for (const [form, expected] of forms) {
        const { ours, noble } = await both(digest, form);
        expect({ form, ours }).toEqual({ form, ours: noble });
        expect(ours === account.address ? "signer" : "other").toBe(expected);
        expect(ours).toBe(await recoverAddress({ hash: bytesToHex(digest), signature: form }));
        outcomes[expected]++;
      }
      // signerOfDigest (what the services call) is the native one here: the same answers.
      expect(signerOfDigest(digest, sig)).toBe(account.address);
    }
    expect(outcomes).toEqual({ signer: 600, other: 300 });
  });

  test("refuses exactly what @noble refuses: r or s 0 or ≥ n, a bad v or length, r off the curve", async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const digest = randomDigest();
    const sig = await account.sign({ hash: bytesToHex(digest) });
    const r = BigInt(`0x${sig.slice(2, 66)}`);
    const s = BigInt(`0x${sig.slice(66, 130)}`);
    const refused: Hex[] = [
      sigOf(0n, s, 27),
      sigOf(r, 0n, 27),
      sigOf(0n, 0n, 28),
      sigOf(N, s, 27),
      sigOf(r, N, 28),
      sigOf(N + 1n, s, 0),
      sigOf(r, N + 1n, 1),
      sigOf((1n << 256n) - 1n, s, 27),
      sigOf(r, (1n << 256n) - 1n, 27),
      // x = 5, 7, 9, 10, 11 and n − 1 are on no point of the curve (x³ + 7 is no square mod p)
      ...[5n, 7n, 9n, 10n, 11n, N - 1n].flatMap((x) => [sigOf(x, s, 27), sigOf(x, s, 28)]),
      ...[2, 3, 26, 29, 35, 36, 255].map((v) => withV(sig, v)),
      sig.slice(0, 130) as Hex,
      `${sig}00` as Hex,
      "0x" as Hex,
      `${sig.slice(0, 129)}g` as Hex,
    ];
    for (const bad of refused) expect({ bad, ...(await both(digest, bad)) }).toEqual({ bad, ours: "refused", noble: "refused" });
    // x = 1, 2 and n − 2 are points, s = 1 and n − 1 are in range: recovered, to the same key by both.
    for (const edge of [sigOf(1n, s, 27), sigOf(2n, s, 28), sigOf(N - 2n, s, 27), sigOf(r, N - 1n, 28), sigOf(r, 1n, 27)]) {
      const { ours, noble } = await both(digest, edge);
      expect(ours).not.toBe("refused");
      expect(ours).toBe(noble);
    }
    // Random 65 bytes with a valid v: whatever @noble answers, so does the library.
    for (let i = 0; i < 100; i++) {
      const random = withV(bytesToHex(crypto.getRandomValues(new Uint8Array(65))), 27 + (i % 2));
      const { ours, noble } = await both(digest, random);
      expect({ random, ours }).toEqual({ random, ours: noble });
    }
  });

  test("the native recovery refuses a digest or r ‖ s of another length, and a recovery id beyond 0/1, before calling the library", () => {
    const compact = new Uint8Array(64).fill(1);
    expect(() => native(new Uint8Array(31), compact, 0)).toThrow(RangeError);
    expect(() => native(new Uint8Array(33), compact, 0)).toThrow(RangeError);
    expect(() => native(randomDigest(), new Uint8Array(65), 0)).toThrow(RangeError);
    expect(() => native(randomDigest(), compact, 2 as 0)).toThrow(RangeError);
  });
});

describe("the fallback to @noble", () => {
  test("a library that is absent, or lacks the recovery symbols, is not used", () => {
    expect(loadNativeRecovery(["libsecp256k1.so.999", "libnothing-here.so"])).toBeUndefined();
    expect(loadNativeRecovery(["libc.so.6"])).toBeUndefined();
    // The same list with the installed library last: it is found and used.
    expect(loadNativeRecovery(["libnothing-here.so", "libsecp256k1.so.2", "libsecp256k1.so.1"])).toBeDefined();
  });

  test("the check at load passes @noble and the library, and fails a recovery wrong in any one way", () => {
    expect(agreesWithNoble(nobleRecoverKey)).toBe(true);
    expect(agreesWithNoble(native)).toBe(true);
    const lowSOnly: RecoverKey = (d, c, id) => {
      if (BigInt(bytesToHex(c.subarray(32))) > N / 2n) throw new Error("high-s");
      return nobleRecoverKey(d, c, id);
    };
    const reducesModN: RecoverKey = (d, c, id) => {
      const r = BigInt(bytesToHex(c.subarray(0, 32))) % N;
      const s = BigInt(bytesToHex(c.subarray(32))) % N;
      return nobleRecoverKey(d, Buffer.from(hex32(r) + hex32(s), "hex"), id);
    };
    const acceptsZero: RecoverKey = (d, c, id) => (c.subarray(0, 32).every((b) => b === 0) ? secp256k1.getPublicKey(secp256k1.utils.randomSecretKey(), false) : nobleRecoverKey(d, c, id));
    const ignoresId: RecoverKey = (d, c) => nobleRecoverKey(d, c, 0);
    const offCurveAsPoint: RecoverKey = (d, c, id) => {
      try {
        return nobleRecoverKey(d, c, id);
      } catch (err) {
        if (BigInt(bytesToHex(c.subarray(0, 32))) === 5n) return secp256k1.getPublicKey(secp256k1.utils.randomSecretKey(), false);
        throw err;
      }
    };
    const wrongDigest: RecoverKey = (d, c, id) => nobleRecoverKey(keccak_256(d), c, id);
    for (const wrong of [lowSOnly, reducesModN, acceptsZero, ignoresId, offCurveAsPoint, wrongDigest]) expect(agreesWithNoble(wrong)).toBe(false);
  });

  test("a signer on @noble answers the signer, and refuses a bad v, as the native one does", async () => {
    const noble = signerBy(nobleRecoverKey);
    for (let i = 0; i < 20; i++) {
      const account = privateKeyToAccount(generatePrivateKey());
      const digest = randomDigest();
      const sig = await account.sign({ hash: bytesToHex(digest) });
      expect(noble(digest, sig)).toBe(account.address);
      expect(signerBy(native)(digest, sig)).toBe(account.address);
      expect(() => noble(digest, withV(sig, 29))).toThrow("Invalid yParityOrV value");
      expect(() => signerBy(native)(digest, withV(sig, 29))).toThrow("Invalid yParityOrV value");
      expect(() => noble(digest, sig.slice(0, 130) as Hex)).toThrow("invalid signature length");
      expect(() => signerBy(native)(digest, sig.slice(0, 130) as Hex)).toThrow("invalid signature length");
    }
  });
});
