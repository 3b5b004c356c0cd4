/**
 * An age identity wrapped as clients before the deployment-bound derivation wrapped it (v1): the
 * owner's signature of the chain-wide `EncryptionKey(string purpose)`, or a passphrase, with the
 * account's address alone as associated data. What a gateway upgraded in place still stores, for
 * the tests of the re-wrap at the next unlock.
 */
import { xchacha20poly1305 } from "@noble/ciphers/chacha.js";
import { hkdf } from "@noble/hashes/hkdf.js";
import { scrypt } from "@noble/hashes/scrypt.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { randomBytes, utf8ToBytes } from "@noble/hashes/utils.js";
import { base64nopad } from "@scure/base";
import { getAddress, type Hex } from "viem";
import { identityToRecipient } from "../../src/sdk/age.ts";
import { legacyEncryptionKeyTypedData, normaliseSignature } from "../../src/sdk/encryption.ts";

/** The v1 wrapping key of a signature of `legacyEncryptionKeyTypedData`. */
export const legacyKey = (signature: Hex) => hkdf(sha256, normaliseSignature(signature), new Uint8Array(0), utf8ToBytes("stowage age identity v1 wrap"), 32);

export async function legacyWrapped(
  account: { address: `0x${string}`; signTypedData: (typed: ReturnType<typeof legacyEncryptionKeyTypedData>) => Promise<Hex> },
  chainId: number,
  identity: string,
  o: { passphrase?: string } = {},
): Promise<string> {
  const nonce = randomBytes(24);
  const ad = utf8ToBytes(getAddress(account.address));
  const recipient = identityToRecipient(identity);
  if (o.passphrase !== undefined) {
    const salt = randomBytes(16);
    const key = scrypt(utf8ToBytes(o.passphrase), salt, { N: 2 ** 17, r: 8, p: 1, dkLen: 32 });
    const box = xchacha20poly1305(key, nonce, ad).encrypt(utf8ToBytes(identity));
    return JSON.stringify({ v: 1, kdf: "passphrase", salt: base64nopad.encode(salt), nonce: base64nopad.encode(nonce), box: base64nopad.encode(box), recipient });
  }
  const key = legacyKey(await account.signTypedData(legacyEncryptionKeyTypedData(chainId)));
  const box = xchacha20poly1305(key, nonce, ad).encrypt(utf8ToBytes(identity));
  return JSON.stringify({ v: 1, kdf: "signature", nonce: base64nopad.encode(nonce), box: base64nopad.encode(box), recipient });
}
