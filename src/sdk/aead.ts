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
  /** Opens `sealed` where it lies: its first sealed.length − 16 bytes become the plaintext. False,
   * with `sealed` unchanged, when the tag does not verify. A download opens its chunks in the
   * fetched bytes themselves (age.ts), so no output buffer is written: fresh memory costs as
   * much to fill as the native cipher takes to run. */
  openInPlace?(key: Uint8Array, nonce: Uint8Array, sealed: Uint8Array): boolean;
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
  openInPlace(key, nonce, sealed) {
    if (sealed.length < 16) return false;
    try {
      // noble checks the tag before it writes, then decrypts within the one buffer.
      chacha20poly1305(key, nonce).decrypt(sealed, sealed.subarray(0, sealed.length - 16));
      return true;
    } catch {
      return false;
    }
  },
};

/** The raw Emscripten module under libsodium-wrappers (its `libsodium` property): 64-bit lengths
 * are passed as two 32-bit halves, pointers are offsets into HEAPU8 (re-read on each call: the
 * heap's view is replaced when its memory grows). */
interface RawSodium {
  HEAPU8: Uint8Array;
  _malloc(n: number): number;
  _crypto_aead_chacha20poly1305_ietf_encrypt(c: number, clenP: number, m: number, mlenLo: number, mlenHi: number, ad: number, adlenLo: number, adlenHi: number, nsec: number, npub: number, k: number): number;
  _crypto_aead_chacha20poly1305_ietf_decrypt(m: number, mlenP: number, nsec: number, c: number, clenLo: number, clenHi: number, ad: number, adlenLo: number, adlenHi: number, npub: number, k: number): number;
}

/** The largest plaintext the in-place path takes: one STREAM chunk (bigger ones go through the wrappers). */
const IN_PLACE_MAX = 64 * 1024;

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
  // In place: the wrappers allocate, copy in, copy out and free five buffers per call, about as
  // much time as the cipher itself on a 64 KiB chunk; one region kept for the process instead,
  // and the result copied straight into the caller's buffer (so sealing fills 1 MiB pieces, age.ts),
  // or, opening, back over the sealed chunk.
  const raw = (sodium as unknown as { libsodium?: Partial<RawSodium> }).libsodium;
  if (raw?.HEAPU8 && raw._malloc && raw._crypto_aead_chacha20poly1305_ietf_encrypt && raw._crypto_aead_chacha20poly1305_ietf_decrypt) {
    const lib = raw as RawSodium;
    const K = lib._malloc(32 + 16 + 2 * (IN_PLACE_MAX + 16));
    const N = K + 32;
    const IN = N + 16;
    const OUT = IN + IN_PLACE_MAX + 16;
    const load = (key: Uint8Array, nonce: Uint8Array, input: Uint8Array) => {
      if (key.length !== 32 || nonce.length !== 12) throw new RangeError("ChaCha20-Poly1305 takes a 32-byte key and a 12-byte nonce");
      const heap = lib.HEAPU8;
      heap.set(key, K);
      heap.set(nonce, N);
      heap.set(input, IN);
      return heap;
    };
    aead.sealInto = (key, nonce, plain, out) => {
      if (plain.length > IN_PLACE_MAX) return void out.set(aead.seal(key, nonce, plain));
      if (out.length !== plain.length + 16) throw new RangeError("the sealed chunk's buffer must be the plaintext's length + 16");
      load(key, nonce, plain);
      lib._crypto_aead_chacha20poly1305_ietf_encrypt(OUT, 0, IN, plain.length, 0, 0, 0, 0, 0, N, K);
      out.set(lib.HEAPU8.subarray(OUT, OUT + out.length));
    };
    aead.openInPlace = (key, nonce, sealed) => {
      if (sealed.length < 16) return false;
      if (sealed.length > IN_PLACE_MAX + 16) {
        const plain = aead.open(key, nonce, sealed);
        if (plain) sealed.set(plain);
        return plain !== null;
      }
      load(key, nonce, sealed);
      if (lib._crypto_aead_chacha20poly1305_ietf_decrypt(OUT, 0, 0, IN, sealed.length, 0, 0, 0, 0, N, K) !== 0) return false;
      sealed.set(lib.HEAPU8.subarray(OUT, OUT + sealed.length - 16));
      return true;
    };
  }
  // Same bytes or not at all: a build that disagrees with @noble would write files nobody opens.
  const key = new Uint8Array(32).map((_, i) => i);
  const nonce = new Uint8Array(12).map((_, i) => 100 + i);
  const plain = new Uint8Array(1000).map((_, i) => (i * 7) & 255);
  const theirs = nobleAead.seal(key, nonce, plain);
  const same = (a: Uint8Array | null) => a !== null && a.length === theirs.length && a.every((b, i) => b === theirs[i]);
  if (!same(aead.seal(key, nonce, plain))) throw new Error("libsodium's ChaCha20-Poly1305 disagrees with @noble's");
  if (aead.sealInto && aead.openInPlace) {
    const into = new Uint8Array(plain.length + 16);
    aead.sealInto(key, nonce, plain, into);
    const back = theirs.slice();
    const forged = theirs.slice();
    forged[0] = (forged[0] as number) ^ 1;
    // Without the in-place path, not without libsodium: the wrappers still serve.
    if (!same(into) || !aead.openInPlace(key, nonce, back) || !plain.every((b, i) => b === back[i]) || aead.openInPlace(key, nonce, forged)) {
      delete aead.sealInto;
      delete aead.openInPlace;
    }
  }
  return aead;
}

let chosen: Promise<Aead> | undefined;
let offered: (() => Aead | undefined) | undefined;

/** The payload's AEAD (chosen once per process): one the runtime offers where it loads, else
 * libsodium's WASM, else @noble's. */
export function payloadAead(): Promise<Aead> {
  chosen ??= (async () => {
    try {
      const fast = offered?.();
      if (fast) return fast;
    } catch {
      // offered but unusable here: the WASM build serves
    }
    return loadSodium();
  })().catch(() => nobleAead);
  return chosen;
}

/** Offers the default a faster AEAD to try first, before its first use; `find` answers undefined
 * where it cannot load. The SDK's Bun entry (bun.ts) offers the system's libsodium through FFI
 * (aead-native.ts), so Bun users of the package get it unasked; Node and browsers never see it. */
export function offerPayloadAead(find: () => Aead | undefined): void {
  offered = find;
}

/** Pins the payload's AEAD: by name (the bench compares them; tests check @noble still agrees),
 * or one given (a faster one the runtime offers, a test's counting wrapper). */
export function usePayloadAead(aead: "noble" | "libsodium" | Aead): void {
  chosen = aead === "noble" ? Promise.resolve(nobleAead) : aead === "libsodium" ? loadSodium() : Promise.resolve(aead);
}
