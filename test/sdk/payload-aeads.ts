/**
 * The payload AEADs the age tests run under (age-in-place, age-testkit): @noble's and libsodium's
 * WASM build always, the system's libsodium and OpenSSL through Bun's FFI where they load (which
 * age-in-place.test.ts and aead.test.ts require here, so the native paths are never skipped).
 */
import { opensslAead, sodiumAead } from "../../src/sdk/aead-native.ts";
import { usePayloadAead } from "../../src/sdk/aead.ts";

export const sodium = sodiumAead();
export const openssl = opensslAead();

/** Each AEAD's label, and the call that makes it the payload's. */
export const payloadAeads: [string, () => void][] = [
  ["@noble", () => usePayloadAead("noble")],
  ["libsodium WASM", () => usePayloadAead("libsodium")],
  ...(sodium ? [["libsodium native", () => usePayloadAead(sodium)] as [string, () => void]] : []),
  ...(openssl ? [["OpenSSL native", () => usePayloadAead(openssl)] as [string, () => void]] : []),
];
