/**
 * Secrets the server must read back (S3 access-key secrets: SigV4 needs the secret itself, so a
 * hash will not do) are sealed with AES-256-GCM under a key derived from STOWAGE_SECRETS_KEY, with
 * the row's id as associated data: a sealed value copied onto another row does not open there.
 * The derivation (HKDF, one `purpose` per kind of secret) keeps one configured key usable for
 * other kinds later without two kinds ever sharing an AES key.
 */
import { gcm } from "@noble/ciphers/aes.js";
import { hkdf } from "@noble/hashes/hkdf.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { concatBytes, randomBytes, utf8ToBytes } from "@noble/hashes/utils.js";
import { base64urlnopad } from "@scure/base";

const VERSION = "v1.";
const NONCE = 12;

/** A sealed value that does not open: wrong key (a gateway with another STOWAGE_SECRETS_KEY), another row, or tampering. */
export class SealedSecretError extends Error {
  override name = "SealedSecretError";
}

export interface SecretBox {
  seal(plain: string, associated: string): string;
  open(sealed: string, associated: string): string;
}

export function secretBox(secretsKey: Uint8Array, purpose: string): SecretBox {
  if (secretsKey.length !== 32) throw new Error("the secrets key must be 32 bytes");
  const key = hkdf(sha256, secretsKey, undefined, utf8ToBytes(`stowage/${purpose}`), 32);
  return {
    seal(plain, associated) {
      const nonce = randomBytes(NONCE);
      const sealed = gcm(key, nonce, utf8ToBytes(associated)).encrypt(utf8ToBytes(plain));
      return VERSION + base64urlnopad.encode(concatBytes(nonce, sealed));
    },
    open(sealed, associated) {
      if (!sealed.startsWith(VERSION)) throw new SealedSecretError("unknown sealed-secret format");
      try {
        const bytes = base64urlnopad.decode(sealed.slice(VERSION.length));
        const plain = gcm(key, bytes.subarray(0, NONCE), utf8ToBytes(associated)).decrypt(bytes.subarray(NONCE));
        return new TextDecoder("utf-8", { fatal: true }).decode(plain);
      } catch {
        throw new SealedSecretError("a stored secret does not open with this gateway's secrets key (is STOWAGE_SECRETS_KEY the same on every gateway?)");
      }
    },
  };
}
