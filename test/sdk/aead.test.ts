/**
 * The payload's AEAD (src/sdk/aead.ts): libsodium's WASM where it loads, @noble's otherwise, and
 * the two write the same age files, so a file sealed by either opens with the other (and with
 * Debian's `age`, which test/sdk/age.test.ts checks against whichever runs).
 */
import { afterAll, expect, test } from "bun:test";
import { nobleAead, payloadAead, usePayloadAead } from "../../src/sdk/aead.ts";
import { decryptStream, generateIdentity, identityToRecipient, prepareEncryption } from "../../src/sdk/age.ts";

afterAll(() => usePayloadAead("libsodium"));

const bytes = (stream: ReadableStream<Uint8Array>) => new Response(stream).bytes();

test("libsodium's WASM loads here and is what the payload uses", async () => {
  expect((await payloadAead()).name).toBe("libsodium");
});

test("a forged chunk is refused by both (null, not a throw)", async () => {
  const key = crypto.getRandomValues(new Uint8Array(32));
  const nonce = new Uint8Array(12);
  const sealed = nobleAead.seal(key, nonce, new Uint8Array(100));
  sealed[3] = (sealed[3] as number) ^ 1;
  expect(nobleAead.open(key, nonce, sealed)).toBeNull();
  expect((await payloadAead()).open(key, nonce, sealed)).toBeNull();
});

test("the same prepared encryption gives the same bytes under either; each opens the other's", async () => {
  const identity = generateIdentity();
  // Several chunks and a partial last one: every nonce (counter, final flag) is exercised.
  const plain = crypto.getRandomValues(new Uint8Array(3 * 65536 + 1234));
  const sealed = prepareEncryption([identityToRecipient(identity)]);
  usePayloadAead("libsodium");
  const bySodium = await bytes(sealed.encrypt(new Blob([plain]).stream()));
  usePayloadAead("noble");
  const byNoble = await bytes(sealed.encrypt(new Blob([plain]).stream()));
  expect(Buffer.compare(bySodium, byNoble)).toBe(0);
  expect(Buffer.compare(await bytes(decryptStream([identity], new Blob([bySodium]).stream())), plain)).toBe(0);
  usePayloadAead("libsodium");
  expect(Buffer.compare(await bytes(decryptStream([identity], new Blob([byNoble]).stream())), plain)).toBe(0);
});
