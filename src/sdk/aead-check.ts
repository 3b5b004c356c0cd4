/**
 * The check every payload AEAD but @noble's passes before it is used (aead-native.ts for Bun,
 * aead-node.ts for Node): the same bytes as @noble, both directions, an empty message, and a
 * forgery refused and left as it was (the STREAM reader then tries the chunk as final, age.ts).
 * A library that disagrees would write files nobody opens; it is then simply not used. Not part of
 * the SDK's API (index.ts does not export it).
 *
 * @example
 *   if (!agreesWithNoble(candidate)) return undefined
 */
import { nobleAead, type Aead } from "./aead.ts";

export function agreesWithNoble(aead: Aead): boolean {
  const key = new Uint8Array(32).map((_, i) => i);
  const nonce = new Uint8Array(12).map((_, i) => 100 + i);
  const same = (a: Uint8Array | null | undefined, b: Uint8Array) => a != null && a.length === b.length && a.every((x, i) => x === b[i]);
  for (const plain of [new Uint8Array(1000).map((_, i) => (i * 7) & 255), new Uint8Array(0)]) {
    const theirs = nobleAead.seal(key, nonce, plain);
    const into = new Uint8Array(plain.length + 16);
    aead.sealInto?.(key, nonce, plain, into);
    const inPlace = theirs.slice();
    const forged = theirs.slice();
    forged[forged.length - 1] = (forged[forged.length - 1] as number) ^ 1;
    const kept = forged.slice();
    if (!same(aead.seal(key, nonce, plain), theirs) || (aead.sealInto && !same(into, theirs)) || !same(aead.open(key, nonce, theirs), plain)) return false;
    if (aead.open(key, nonce, forged) !== null || aead.openInPlace?.(key, nonce, inPlace) !== true || !same(inPlace.subarray(0, plain.length), plain)) return false;
    if (aead.openInPlace(key, nonce, forged) || !same(forged, kept)) return false;
  }
  return true;
}

type SealInto = NonNullable<Aead["sealInto"]>;

/** `seal` and `sealInto` from a library's sealing into a given buffer (aead-native.ts, aead-node.ts):
 * the buffer's length checked once here, `seal` a fresh one sealed into. */
export function sealingBy(sealInto: SealInto): { seal: Aead["seal"]; sealInto: SealInto } {
  const checked: SealInto = (key, nonce, plain, out) => {
    if (out.length !== plain.length + 16) throw new RangeError("the sealed chunk's buffer must be the plaintext's length + 16");
    sealInto(key, nonce, plain, out);
  };
  return {
    seal(key, nonce, plain) {
      const out = new Uint8Array(plain.length + 16);
      checked(key, nonce, plain, out);
      return out;
    },
    sealInto: checked,
  };
}
