/**
 * The payload's ChaCha20-Poly1305 in the system's own libsodium, through Bun's FFI (Bun only, so
 * the SDK's index does not import it: its browser and Node builds never see `bun:ffi`; the
 * package's Bun entry, bun.ts, offers it to the default). libsodium's
 * WASM build runs at ≈ 250 MiB/s here; the native library, with its SIMD ChaCha20 and Poly1305,
 * at ≈ 1,100 MiB/s, which is what brings an encrypted transfer near a plain one (issue 16). The
 * library is the one Debian ships (libsodium23, already on most systems); where it is missing the
 * payload stays on WASM. As with WASM, it is used only after it seals a fixed message exactly as
 * @noble does, and it seals straight into the caller's buffer and opens in place (no copy per chunk).
 *
 * @example
 *   const native = nativeAead()          // undefined without libsodium
 *   if (native) usePayloadAead(native)   // the command line does this at start
 */
import { dlopen, FFIType, ptr, type Pointer } from "bun:ffi";
import { nobleAead, usePayloadAead, type Aead } from "./aead.ts";

const TAG = 16;
/** Where a chunk is opened before its plaintext goes back over it (a STREAM chunk at most, +1 so an empty one has an address). */
const opened = new Uint8Array(64 * 1024 + 1);
/** Sonames tried in order: Debian/Ubuntu, other Linux, macOS (Homebrew). */
const LIBRARIES = ["libsodium.so.23", "libsodium.so.26", "libsodium.so", "libsodium.23.dylib", "libsodium.26.dylib", "libsodium.dylib"];

const symbols = {
  sodium_init: { args: [], returns: FFIType.i32 },
  // (c, clen_p, m, mlen, ad, adlen, nsec, npub, k)
  crypto_aead_chacha20poly1305_ietf_encrypt: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.u64, FFIType.ptr, FFIType.u64, FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  // (m, mlen_p, nsec, c, clen, ad, adlen, npub, k)
  crypto_aead_chacha20poly1305_ietf_decrypt: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.u64, FFIType.ptr, FFIType.u64, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
} as const;

function open(): ReturnType<typeof dlopen<typeof symbols>> | undefined {
  for (const name of LIBRARIES) {
    try {
      return dlopen(name, symbols);
    } catch {
      // not this name: try the next
    }
  }
  return undefined;
}

/** A zero-length view has no address to give: libsodium reads nothing at a length of 0. */
const at = (bytes: Uint8Array): Pointer | null => (bytes.length > 0 ? ptr(bytes) : null);

let loaded: Aead | null | undefined;

/** The native AEAD, or undefined where libsodium does not load or disagrees with @noble. */
export function nativeAead(): Aead | undefined {
  if (loaded !== undefined) return loaded ?? undefined;
  loaded = null;
  const lib = open();
  if (!lib || lib.symbols.sodium_init() < 0) return undefined;
  const { crypto_aead_chacha20poly1305_ietf_encrypt: encrypt, crypto_aead_chacha20poly1305_ietf_decrypt: decrypt } = lib.symbols;
  const check = (key: Uint8Array, nonce: Uint8Array) => {
    if (key.length !== 32 || nonce.length !== 12) throw new RangeError("ChaCha20-Poly1305 takes a 32-byte key and a 12-byte nonce");
  };
  const aead: Aead = {
    name: "libsodium-native",
    seal(key, nonce, plain) {
      const out = new Uint8Array(plain.length + TAG);
      aead.sealInto?.(key, nonce, plain, out);
      return out;
    },
    sealInto(key, nonce, plain, out) {
      check(key, nonce);
      if (out.length !== plain.length + TAG) throw new RangeError("the sealed chunk's buffer must be the plaintext's length + 16");
      encrypt(ptr(out), null, at(plain), plain.length, null, 0, null, ptr(nonce), ptr(key));
    },
    open(key, nonce, sealed) {
      check(key, nonce);
      if (sealed.length < TAG) return null;
      // A zero-length output still needs somewhere to point.
      const out = new Uint8Array(Math.max(1, sealed.length - TAG));
      if (decrypt(ptr(out), null, null, ptr(sealed), sealed.length, null, 0, ptr(nonce), ptr(key)) !== 0) return null;
      return out.subarray(0, sealed.length - TAG);
    },
    openInPlace(key, nonce, sealed) {
      check(key, nonce);
      if (sealed.length < TAG) return false;
      if (sealed.length - TAG > opened.length) {
        const plain = aead.open(key, nonce, sealed);
        if (plain) sealed.set(plain);
        return plain !== null;
      }
      // Not m == c, though libsodium would decrypt so: on a bad tag it zeroes the output, and the
      // caller must then try the chunk as final (age.ts). So into one warm buffer, copied back.
      if (decrypt(ptr(opened), null, null, ptr(sealed), sealed.length, null, 0, ptr(nonce), ptr(key)) !== 0) return false;
      sealed.set(opened.subarray(0, sealed.length - TAG));
      return true;
    },
  };
  // Same bytes or not at all, as for the WASM build (aead.ts): both directions, and a forgery refused.
  const key = new Uint8Array(32).map((_, i) => i);
  const nonce = new Uint8Array(12).map((_, i) => 100 + i);
  const plain = new Uint8Array(1000).map((_, i) => (i * 7) & 255);
  const ours = aead.seal(key, nonce, plain);
  const theirs = nobleAead.seal(key, nonce, plain);
  const back = aead.open(key, nonce, theirs);
  const inPlace = theirs.slice();
  const forged = theirs.slice();
  forged[3] = (forged[3] as number) ^ 1;
  const forgedKept = forged.slice();
  const agrees =
    ours.length === theirs.length &&
    ours.every((b, i) => b === theirs[i]) &&
    back !== null &&
    back.every((b, i) => b === plain[i]) &&
    aead.open(key, nonce, forged) === null &&
    aead.openInPlace?.(key, nonce, inPlace) === true &&
    plain.every((b, i) => b === inPlace[i]) &&
    // A forged chunk stays as it was: the caller tries it again under the other nonce.
    aead.openInPlace(key, nonce, forged) === false &&
    forged.every((b, i) => b === forgedKept[i]);
  if (!agrees) return undefined;
  loaded = aead;
  return aead;
}

/** Makes the native AEAD the payload's, where it loads (once per process); false where it does not. */
export function useNativeAead(): boolean {
  const native = nativeAead();
  if (native) usePayloadAead(native);
  return native !== undefined;
}
