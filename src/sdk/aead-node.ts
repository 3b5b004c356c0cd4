/**
 * The payload's ChaCha20-Poly1305 in Node's own crypto (OpenSSL inside Node), for the SDK's Node
 * entry (node.ts, the package's "node" export condition): ≈ 0.6–0.7 ms/MiB of CPU to open a 64 KiB
 * chunk here against ≈ 3–3.5 for libsodium's WASM build, the SDK's default elsewhere, which makes
 * an encrypted download cost several plain ones. Node only: index.ts imports no node:
 * module (Bun's node:crypto has no ChaCha20-Poly1305; Bun has aead-native.ts). Used only after it
 * agrees with @noble (aead-check.ts).
 *
 * @example
 *   offerPayloadAead(nodeAead)   // node.ts does this at import
 */
import { createCipheriv, createDecipheriv } from "node:crypto";
import { type Aead } from "./aead.ts";
import { agreesWithNoble, sealingBy } from "./aead-check.ts";

const TAG = 16;
const CIPHER = "chacha20-poly1305";

let loaded: Aead | null | undefined;

/** Node's AEAD, or undefined where its crypto lacks ChaCha20-Poly1305 or disagrees with @noble. */
export function nodeAead(): Aead | undefined {
  if (loaded !== undefined) return loaded ?? undefined;
  loaded = null;
  const aead: Aead = {
    name: "node-crypto",
    ...sealingBy((key, nonce, plain, out) => {
      const cipher = createCipheriv(CIPHER, key, nonce, { authTagLength: TAG });
      out.set(cipher.update(plain));
      cipher.final();
      out.set(cipher.getAuthTag(), plain.length);
    }),
    open(key, nonce, sealed) {
      if (sealed.length < TAG) return null;
      const decipher = createDecipheriv(CIPHER, key, nonce, { authTagLength: TAG });
      decipher.setAuthTag(sealed.subarray(sealed.length - TAG));
      // Written before the tag is checked (final): the caller sees it only when the tag is good.
      const plain = decipher.update(sealed.subarray(0, sealed.length - TAG));
      try {
        decipher.final();
      } catch {
        return null;
      }
      return new Uint8Array(plain.buffer, plain.byteOffset, plain.length);
    },
    // Node's update writes into a buffer of its own: its plaintext is copied over the chunk.
    openInPlace(key, nonce, sealed) {
      const plain = aead.open(key, nonce, sealed);
      if (plain) sealed.set(plain);
      return plain !== null;
    },
  };
  try {
    if (!agreesWithNoble(aead)) return undefined;
  } catch {
    return undefined; // no such cipher in this runtime's crypto
  }
  loaded = aead;
  return aead;
}
