/**
 * The payload's ChaCha20-Poly1305 in a system library, through Bun's FFI (Bun only, so the SDK's
 * index does not import it: its browser and Node builds never see `bun:ffi`; the package's Bun
 * entry, bun.ts, offers it to the default). Two libraries, the faster first: OpenSSL's libcrypto
 * (libssl3, on nearly every system; its AVX2/AVX-512 code opens ≈ 2,500 MiB/s of CPU here) and
 * libsodium (libsodium23; ≈ 1,100 MiB/s); libsodium's WASM build runs at ≈ 250. The cipher is
 * what an encrypted transfer adds to a plain one, so its pace sets how near the two
 * come. Where neither loads the payload stays on WASM. As with WASM, a library is used only after
 * it seals and opens a fixed message exactly as @noble does and leaves a forgery as it was; it
 * seals straight into the caller's buffer and opens in place (no buffer per chunk).
 *
 * @example
 *   const native = nativeAead()          // undefined without either library
 *   if (native) usePayloadAead(native)   // the command line does this at start
 */
import { dlopen, FFIType, ptr, type Pointer } from "bun:ffi";
import { usePayloadAead, type Aead } from "./aead.ts";
import { agreesWithNoble, sealingBy } from "./aead-check.ts";

const TAG = 16;
const checkKey = (key: Uint8Array, nonce: Uint8Array) => {
  if (key.length !== 32 || nonce.length !== 12) throw new RangeError("ChaCha20-Poly1305 takes a 32-byte key and a 12-byte nonce");
};
/** Where a chunk is opened before its plaintext goes back over it (a STREAM chunk at most, +1 so
 * an empty one has an address): a bad tag must leave the chunk as it was, since the caller then
 * tries it as the final one (age.ts), and neither library does in place (libsodium zeroes its
 * output, OpenSSL writes it before the tag is checked). Reused: copying 64 KiB back from a warm
 * buffer costs far less than writing fresh memory. */
const opened = new Uint8Array(64 * 1024 + 1);

function dlopenFirst<S extends Parameters<typeof dlopen>[1]>(names: string[], symbols: S): ReturnType<typeof dlopen<S>> | undefined {
  for (const name of names) {
    try {
      return dlopen(name, symbols);
    } catch {
      // not this name: try the next
    }
  }
  return undefined;
}

/** Opens `sealed` into `out` (at least sealed.length − 16 long, and never empty: it needs an address); false on a bad tag. */
type OpenInto = (key: Uint8Array, nonce: Uint8Array, sealed: Uint8Array, out: Uint8Array) => boolean;

/** A native library's Aead from its two calls into given buffers, used only once it agrees with @noble. */
function nativeOf(name: string, sealInto: NonNullable<Aead["sealInto"]>, openInto: OpenInto): Aead | undefined {
  const aead: Aead = {
    name,
    ...sealingBy(sealInto),
    open(key, nonce, sealed) {
      if (sealed.length < TAG) return null;
      const out = new Uint8Array(Math.max(1, sealed.length - TAG));
      return openInto(key, nonce, sealed, out) ? out.subarray(0, sealed.length - TAG) : null;
    },
  };
  aead.openInPlace = inPlaceBy(aead, openInto);
  return agreesWithNoble(aead) ? aead : undefined;
}

/** An in-place opening from an opening into `out`, by way of the warm buffer above. */
function inPlaceBy(aead: Aead, openInto: OpenInto): Aead["openInPlace"] {
  return (key, nonce, sealed) => {
    if (sealed.length < TAG) return false;
    if (sealed.length - TAG >= opened.length) {
      const plain = aead.open(key, nonce, sealed);
      if (plain) sealed.set(plain);
      return plain !== null;
    }
    if (!openInto(key, nonce, sealed, opened)) return false;
    sealed.set(opened.subarray(0, sealed.length - TAG));
    return true;
  };
}

// ---------------------------------------------------------------------------------------------
// libsodium

/** Sonames tried in order: Debian/Ubuntu, other Linux, macOS (Homebrew). */
const SODIUM = ["libsodium.so.23", "libsodium.so.26", "libsodium.so", "libsodium.23.dylib", "libsodium.26.dylib", "libsodium.dylib"];
const sodiumSymbols = {
  sodium_init: { args: [], returns: FFIType.i32 },
  // (c, clen_p, m, mlen, ad, adlen, nsec, npub, k)
  crypto_aead_chacha20poly1305_ietf_encrypt: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.u64, FFIType.ptr, FFIType.u64, FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  // (m, mlen_p, nsec, c, clen, ad, adlen, npub, k)
  crypto_aead_chacha20poly1305_ietf_decrypt: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.u64, FFIType.ptr, FFIType.u64, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
} as const;

/** A zero-length view has no address to give: libsodium reads nothing at a length of 0. */
const at = (bytes: Uint8Array): Pointer | null => (bytes.length > 0 ? ptr(bytes) : null);

let sodium: Aead | null | undefined;

/** libsodium's, or undefined where it does not load or disagrees with @noble. */
export function sodiumAead(): Aead | undefined {
  if (sodium !== undefined) return sodium ?? undefined;
  sodium = null;
  const lib = dlopenFirst(SODIUM, sodiumSymbols);
  if (!lib || lib.symbols.sodium_init() < 0) return undefined;
  const { crypto_aead_chacha20poly1305_ietf_encrypt: encrypt, crypto_aead_chacha20poly1305_ietf_decrypt: decrypt } = lib.symbols;
  const aead = nativeOf(
    "libsodium-native",
    (key, nonce, plain, out) => {
      checkKey(key, nonce);
      encrypt(ptr(out), null, at(plain), plain.length, null, 0, null, ptr(nonce), ptr(key));
    },
    (key, nonce, sealed, out) => {
      checkKey(key, nonce);
      return decrypt(ptr(out), null, null, ptr(sealed), sealed.length, null, 0, ptr(nonce), ptr(key)) === 0;
    },
  );
  sodium = aead ?? null;
  return aead;
}

// ---------------------------------------------------------------------------------------------
// OpenSSL

/** Sonames tried in order: OpenSSL 3 and 1.1 on Linux, then macOS (Homebrew). */
const OPENSSL = ["libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so", "libcrypto.3.dylib", "libcrypto.1.1.dylib"];
const opensslSymbols = {
  EVP_CIPHER_CTX_new: { args: [], returns: FFIType.ptr },
  EVP_chacha20_poly1305: { args: [], returns: FFIType.ptr },
  // (ctx, cipher, engine, key, iv, enc)
  EVP_CipherInit_ex: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
  // (ctx, out, outl, in, inl)
  EVP_CipherUpdate: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
  // (ctx, out, outl)
  EVP_CipherFinal_ex: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  // (ctx, type, arg, ptr)
  EVP_CIPHER_CTX_ctrl: { args: [FFIType.ptr, FFIType.i32, FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
} as const;
const EVP_CTRL_AEAD_GET_TAG = 0x10;
const EVP_CTRL_AEAD_SET_TAG = 0x11;
/** EVP_CipherUpdate takes an int length: larger inputs go in steps. */
const STEP = 2 ** 30;

let openssl: Aead | null | undefined;

/** OpenSSL's, or undefined where libcrypto does not load or disagrees with @noble. */
export function opensslAead(): Aead | undefined {
  if (openssl !== undefined) return openssl ?? undefined;
  openssl = null;
  const lib = dlopenFirst(OPENSSL, opensslSymbols);
  if (!lib) return undefined;
  const { EVP_CIPHER_CTX_new, EVP_chacha20_poly1305, EVP_CipherInit_ex: init, EVP_CipherUpdate: update, EVP_CipherFinal_ex: final, EVP_CIPHER_CTX_ctrl: ctrl } = lib.symbols;
  const cipher = EVP_chacha20_poly1305();
  // One context per direction for the process, set up once; each chunk only re-keys it (the
  // process is single-threaded, and a worker loads its own copy of this module). (Bun's types
  // allow a bigint for a returned pointer; these are plain pointers, checked below.)
  const sealer = EVP_CIPHER_CTX_new() as Pointer | null;
  const opener = EVP_CIPHER_CTX_new() as Pointer | null;
  if (!cipher || !sealer || !opener || init(sealer, cipher, null, null, null, 1) !== 1 || init(opener, cipher, null, null, null, 0) !== 1) return undefined;
  const outLength = new Int32Array(1);
  const outLengthAt = ptr(outLength);
  /** `length` bytes of `from` through the context into `to` (both from offset 0). */
  const run = (ctx: Pointer, to: Uint8Array, from: Uint8Array, length: number) => {
    for (let done = 0; done < length; done += STEP) {
      const n = Math.min(STEP, length - done);
      if (update(ctx, ptr(to, done), outLengthAt, ptr(from, done), n) !== 1) return false;
    }
    return true;
  };
  const aead = nativeOf(
    "openssl-native",
    (key, nonce, plain, out) => {
      checkKey(key, nonce);
      const ok =
        init(sealer, null, null, ptr(key), ptr(nonce), 1) === 1 &&
        run(sealer, out, plain, plain.length) &&
        final(sealer, ptr(out, plain.length), outLengthAt) === 1 &&
        ctrl(sealer, EVP_CTRL_AEAD_GET_TAG, TAG, ptr(out, plain.length)) === 1;
      if (!ok) throw new Error("OpenSSL's ChaCha20-Poly1305 failed to seal");
    },
    (key, nonce, sealed, out) => {
      checkKey(key, nonce);
      const n = sealed.length - TAG;
      if (n < 0 || init(opener, null, null, ptr(key), ptr(nonce), 0) !== 1 || !run(opener, out, sealed, n)) return false;
      if (ctrl(opener, EVP_CTRL_AEAD_SET_TAG, TAG, ptr(sealed, n)) !== 1) return false;
      // The tag is checked here, after the plaintext was written: `out` is never the caller's on a failure.
      return final(opener, ptr(out, Math.min(n, out.length - 1)), outLengthAt) === 1;
    },
  );
  openssl = aead ?? null;
  return aead;
}

/** The fastest native AEAD that loads here (OpenSSL's, else libsodium's), or undefined. */
export function nativeAead(): Aead | undefined {
  return opensslAead() ?? sodiumAead();
}

/** Makes the native AEAD the payload's, where it loads (once per process); false where it does not. */
export function useNativeAead(): boolean {
  const native = nativeAead();
  if (native) usePayloadAead(native);
  return native !== undefined;
}
