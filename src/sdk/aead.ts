/**
 * ChaCha20-Poly1305 (IETF, 12-byte nonce) for age's STREAM payload (D20). It bounds encrypted
 * transfers: in JavaScript (@noble/ciphers) it runs at a third of what libsodium's WASM build
 * (libsodium-wrappers) does, so the payload uses libsodium when its WASM loads, and @noble where
 * it cannot (a runtime without WebAssembly, a page whose CSP forbids it). The two must agree
 * byte for byte (age's test vectors and Debian's `age` check the result): libsodium is used only
 * after it seals a fixed message exactly as @noble does. The header's few small seals stay on @noble.
 *
 * @example
 *   const aead = await payloadAead();
 *   const sealed = aead.seal(key, nonce, plain); const plain2 = aead.open(key, nonce, sealed); // null if forged
 */
import { chacha20poly1305 } from "@noble/ciphers/chacha.js";

export interface Aead {
  /** "libsodium" or "noble": which one runs (the bench reports it). */
  name: string;
  seal(key: Uint8Array, nonce: Uint8Array, plain: Uint8Array): Uint8Array;
  /** The plaintext, or null when the tag does not verify. */
  open(key: Uint8Array, nonce: Uint8Array, sealed: Uint8Array): Uint8Array | null;
  /** Seals into `out` (exactly plain.length + 16 bytes), where the implementation can write
   * there directly (native libsodium, aead-native.ts): the stream then fills one large buffer. */
  sealInto?(key: Uint8Array, nonce: Uint8Array, plain: Uint8Array, out: Uint8Array): void;
  /** Opens into `out` (exactly sealed.length − 16 bytes); false, with `out` untouched, when the
   * tag does not verify. */
  openInto?(key: Uint8Array, nonce: Uint8Array, sealed: Uint8Array, out: Uint8Array): boolean;
}

export const nobleAead: Aead = {
  name: "noble",
  seal: (key, nonce, plain) => chacha20poly1305(key, nonce).encrypt(plain),
  open(key, nonce, sealed) {
    try {
      return chacha20poly1305(key, nonce).decrypt(sealed);
    } catch {
      return null;
    }
  },
};

async function loadSodium(): Promise<Aead> {
  const sodium = (await import("libsodium-wrappers")).default;
  await sodium.ready;
  const aead: Aead = {
    name: "libsodium",
    seal: (key, nonce, plain) => sodium.crypto_aead_chacha20poly1305_ietf_encrypt(plain, null, null, nonce, key),
    open(key, nonce, sealed) {
      try {
        return sodium.crypto_aead_chacha20poly1305_ietf_decrypt(null, sealed, null, nonce, key);
      } catch {
        return null;
      }
    },
  };
  // Same bytes or not at all: a build that disagrees with @noble would write files nobody opens.
  const key = new Uint8Array(32).map((_, i) => i);
  const nonce = new Uint8Array(12).map((_, i) => 100 + i);
  const plain = new Uint8Array(1000).map((_, i) => (i * 7) & 255);
  const ours = aead.seal(key, nonce, plain);
  const theirs = nobleAead.seal(key, nonce, plain);
  if (ours.length !== theirs.length || !ours.every((b, i) => b === theirs[i])) throw new Error("libsodium's ChaCha20-Poly1305 disagrees with @noble's");
  return aead;
}

let chosen: Promise<Aead> | undefined;

/** The payload's AEAD: libsodium's WASM once loaded (once per process), else @noble's. */
export function payloadAead(): Promise<Aead> {
  chosen ??= loadSodium().catch(() => nobleAead);
  return chosen;
}

/** Pins the payload's AEAD: by name (the bench compares them; tests check @noble still agrees),
 * or one given (a faster one the runtime offers, a test's counting wrapper). */
export function usePayloadAead(aead: "noble" | "libsodium" | Aead): void {
  chosen = aead === "noble" ? Promise.resolve(nobleAead) : aead === "libsodium" ? loadSodium() : Promise.resolve(aead);
}
